package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// TestRevokeSaysWhatTheLedgerHolds: a revocation is recorded whatever the
// grant id, and the answer says when the ledger holds no rows of it, when
// an earlier time already on record stands, and takes --at now.
func TestRevokeSaysWhatTheLedgerHolds(t *testing.T) {
	f := start(t)
	const noRows = "the ledger holds no rows of grant a2agrant_typo yet: check the grant id"
	tests := []struct {
		name      string
		role      string
		args      []string
		want      []string
		wantNot   []string
		wantInErr []string
	}{
		{"a grant with no rows", "admin", []string{"revoke", "a2agrant_typo", "--note", "test"},
			[]string{"grant a2agrant_typo revoked as of ", noRows}, nil, nil},
		{"a grant with rows", "admin", []string{"revoke", "a2agrant_7Q2F", "--at", "2026-10-07T13:10:00Z"},
			[]string{"grant a2agrant_7Q2F revoked as of 2026-10-07 13:10:00Z: receipts issued after that are incidents"}, []string{"no rows", "stands"}, nil},
		{"a later time", "admin", []string{"revoke", "a2agrant_7Q2F", "--at", "2026-12-07"},
			[]string{"grant a2agrant_7Q2F was already revoked as of 2026-10-07 13:10:00Z; that earlier time stands"}, []string{"revoked as of 2026-12-07"}, nil},
		{"a later time, by a writer", "writer", []string{"revoke", "a2agrant_7Q2F", "--at", "2026-12-08"},
			[]string{"grant a2agrant_7Q2F was already revoked as of 2026-10-07 13:10:00Z; that earlier time stands"}, nil, nil},
		{"an earlier time", "admin", []string{"revoke", "a2agrant_7Q2F", "--at", "2026-10-07T13:00:00Z"},
			[]string{"grant a2agrant_7Q2F revoked as of 2026-10-07 13:00:00Z, replacing the later 2026-10-07 13:10:00Z on record"}, nil, nil},
		{"a writer cannot read the grant", "writer", []string{"revoke", "a2agrant_other"},
			[]string{"grant a2agrant_other revoked as of ", "this key may not read the ledger", "ledgerctl grant a2agrant_other",
				"the embedded Provider: not stopped: it keeps serving the grant, if it issued it; only a revocation an admin key records, or one it signed itself, stops it"}, []string{"check the grant id"}, nil},
		{"an admin after a writer", "admin", []string{"revoke", "a2agrant_other", "--at", "2099-01-01"},
			[]string{"that earlier time stands", "the embedded Provider: stopped from 2099-01-01 00:00:00Z (an admin's revocation)"}, nil, nil},
		{"the grant shows both", "auditor", []string{"grant", "a2agrant_other"},
			[]string{"reported by writer", "at the Provider", "stopped from 2099-01-01 00:00:00Z (an admin's revocation)"}, nil, nil},
		{"--at now", "admin", []string{"revoke", "a2agrant_now", "--at", "now"},
			[]string{"grant a2agrant_now revoked as of "}, nil, nil},
		{"--json keeps its output JSON", "admin", []string{"--json", "revoke", "a2agrant_json"},
			[]string{`"grantId"`, `"a2agrant_json"`}, []string{"check the grant id"}, []string{"the ledger holds no rows of grant a2agrant_json yet"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := f.ctl(t, tc.role, tc.args...)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", strings.Join(tc.args, " "), code, out, errs)
			}
			checkOutput(t, tc.args, out, errs, tc.want, tc.wantNot, tc.wantInErr)
		})
	}
	// A writer's revocations asked for nothing it may not read: no
	// refusal for an operator to take for a key misused.
	res, err := http.Get(f.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "grpc_server_handled_total{") && strings.Contains(l, `grpc_code="PermissionDenied"`) && !strings.HasSuffix(l, " 0") {
			t.Errorf("refusals: %s", l)
		}
	}
}

// TestRevokeDoesNotWaitOnItsCheck: the read of what the ledger holds of a
// grant is for revoke's words only; when it fails or takes too long (a
// grant of many rows, which any writer can post) the revocation is
// recorded all the same, and the answer says the check was not made.
func TestRevokeDoesNotWaitOnItsCheck(t *testing.T) {
	f := start(t)
	old := grantChecked
	grantChecked = time.Nanosecond
	t.Cleanup(func() { grantChecked = old })
	code, out, errs := f.ctl(t, "admin", "revoke", "a2agrant_slow", "--at", "2026-10-07T13:10:00Z")
	if code != 0 || !strings.Contains(out, "grant a2agrant_slow revoked as of 2026-10-07 13:10:00Z") || !strings.Contains(out, "could not be checked") {
		t.Fatalf("revoke with its check failing: exit %d\n%s%s", code, out, errs)
	}
	grantChecked = old
	if code, out, _ := f.ctl(t, "support", "grant", "a2agrant_slow"); code != 0 || !strings.Contains(out, "2026-10-07 13:10:00Z") {
		t.Fatalf("the revocation is not on record: exit %d\n%s", code, out)
	}
}

// TestAnAdminsRevocationKeepsItsNote: an admin's revocation after a
// writer's earlier one leaves the writer's time in force, and keeps the
// admin's key name and note beside it, in grant's words, its JSON and
// revoke's answer; a writer's later revocation, earlier than all, does not
// erase them. A writer's answer carries no admin's record.
func TestAnAdminsRevocationKeepsItsNote(t *testing.T) {
	f := start(t)
	const grant = "a2agrant_7Q2F"
	mustRun := func(role string, args ...string) string {
		t.Helper()
		code, out, errs := f.ctl(t, role, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	mustRun("writer", "revoke", grant, "--at", "2026-10-07T13:10:00Z", "--note", "customer revoked in settings")
	out := mustRun("admin", "revoke", grant, "--at", "2026-10-07T14:00:00Z", "--note", "customer asked by phone")
	for _, w := range []string{"that earlier time stands", "stopped from 2026-10-07 14:00:00Z",
		"the admin's revocation on record: as of 2026-10-07 14:00:00Z (recorded by admin at ", "): customer asked by phone"} {
		if !strings.Contains(out, w) {
			t.Errorf("revoke after a writer's: output lacks %q:\n%s", w, out)
		}
	}
	// A writer's revocation earlier than all replaces the one in force,
	// not the admin's record; its answer tells the writer neither.
	out = mustRun("writer", "revoke", grant, "--at", "2026-10-07T13:00:00Z", "--note", "erased")
	if strings.Contains(out, "customer asked by phone") || strings.Contains(out, "recorded by admin") {
		t.Errorf("a writer's answer carries the admin's record:\n%s", out)
	}
	var rep struct {
		Revocation struct{ By, Note, AdminBy, AdminNote, AdminRevokedAt, AdminRecordedAt string }
	}
	js := mustRun("writer", "--json", "revoke", grant)
	if err := json.Unmarshal([]byte(js), &rep); err != nil || rep.Revocation.AdminBy != "" || rep.Revocation.AdminNote != "" {
		t.Errorf("a writer's JSON answer carries the admin's record (%v):\n%s", err, js)
	}
	out = mustRun("support", "grant", grant)
	for _, w := range []string{"2026-10-07 13:00:00Z (reported by writer at ", "): erased",
		"admin's revocation", "as of 2026-10-07 14:00:00Z (recorded by admin at ", "): customer asked by phone"} {
		if !strings.Contains(out, w) {
			t.Errorf("grant: output lacks %q:\n%s", w, out)
		}
	}
	js = mustRun("auditor", "--json", "grant", grant)
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	if r := rep.Revocation; r.By != "writer" || r.Note != "erased" || r.AdminBy != "admin" || r.AdminNote != "customer asked by phone" ||
		r.AdminRevokedAt != "2026-10-07T14:00:00Z" || r.AdminRecordedAt == "" {
		t.Errorf("grant --json: %+v\n%s", r, js)
	}
}

// What ledgerctl says of the embedded Provider follows the revocation
// that stops it: an admin's, or the Provider's own signed one, the
// earlier of the two.
func TestProviderStoppedSaysWhichRevocationStopsIt(t *testing.T) {
	at := func(s string) *timestamppb.Timestamp {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return timestamppb.New(tm)
	}
	const brand = "https://shop.example/a2a/acme"
	tests := []struct {
		name string
		r    *ledgerv1.Revocation
		want string
	}{
		{"a writer's", &ledgerv1.Revocation{RevokedAt: at("2026-10-07T13:00:00Z")}, "not stopped: "},
		{"the Provider's own", &ledgerv1.Revocation{ProviderStatements: []*ledgerv1.ProviderStatement{{RevokedAt: at("2026-10-07T13:00:00Z"), Brand: brand}}},
			"stopped from 2026-10-07 13:00:00Z if it is the Provider of " + brand + " (the revocation it signed and reported): it serves no request under the grant"},
		{"two brands' statements", &ledgerv1.Revocation{ProviderStatements: []*ledgerv1.ProviderStatement{{RevokedAt: at("2026-10-07T15:00:00Z"), Brand: brand},
			{RevokedAt: at("2026-10-07T13:00:00Z"), Brand: "https://other.example/a2a/x"}}},
			"stopped from 2026-10-07 13:00:00Z if it is the Provider of https://other.example/a2a/x (the revocation it signed and reported); from 2026-10-07 15:00:00Z if it is the Provider of " + brand},
		{"the Provider's before an admin's", &ledgerv1.Revocation{ProviderStatements: []*ledgerv1.ProviderStatement{{RevokedAt: at("2026-10-07T13:00:00Z"), Brand: brand}},
			AdminRevokedAt: at("2026-10-07T14:00:00Z")},
			"; from 2026-10-07 14:00:00Z in any case (an admin's revocation): it serves no request under the grant"},
		{"an admin's before the Provider's", &ledgerv1.Revocation{ProviderStatements: []*ledgerv1.ProviderStatement{{RevokedAt: at("2026-10-07T15:00:00Z"), Brand: brand}},
			AdminRevokedAt: at("2026-10-07T14:00:00Z")},
			"stopped from 2026-10-07 14:00:00Z (an admin's revocation): it serves no request under the grant"},
		// Answered by the ledgerd that runs the embedded Provider: it says.
		{"another brand's statement, by the Provider's ledgerd", &ledgerv1.Revocation{ProviderStatements: []*ledgerv1.ProviderStatement{{RevokedAt: at("2026-10-07T13:00:00Z"), Brand: brand}},
			EmbeddedProvider: true}, "not stopped: "},
		{"its own statement, by the Provider's ledgerd", &ledgerv1.Revocation{ProviderStatements: []*ledgerv1.ProviderStatement{{RevokedAt: at("2026-10-07T13:00:00Z"), Brand: brand}},
			EmbeddedProvider: true, EmbeddedProviderStoppedAt: at("2026-10-07T13:00:00Z")}, "stopped from 2026-10-07 13:00:00Z (the revocation it signed and reported)"},
	}
	for _, tc := range tests {
		if got := providerStopped(tc.r); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want it to say %q", tc.name, got, tc.want)
		}
	}
}

// revocations lists the ledger's revocations and which stop the embedded
// Provider; --not-stopping keeps those an operator revokes again with an
// admin key after putting back an older provider.db.
func TestRevocationsListsWhatStopsTheProvider(t *testing.T) {
	f := start(t)
	for _, c := range [][]string{
		{"writer", "revoke", "a2agrant_W1", "--at", "2026-10-07T13:00:00Z", "--note", "revoked on the account page"},
		{"admin", "revoke", "a2agrant_A1", "--at", "2026-10-07T14:00:00Z", "--note", "fraud case 4411"},
	} {
		if code, out, errs := f.ctl(t, c[0], c[1:]...); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(c, " "), code, out, errs)
		}
	}
	tests := []struct {
		role      string
		args      []string
		code      int
		want      []string
		wantNot   []string
		wantInErr []string
	}{
		{"support", []string{"revocations"}, 0, []string{"GRANT", "a2agrant_A1", "stopped from 2026-10-07 14:00:00Z (an admin's)", "fraud case 4411",
			"a2agrant_W1", "2026-10-07 13:00:00Z", "not stopped", "revoked on the account page"}, nil, nil},
		{"auditor", []string{"revocations", "--not-stopping"}, 0, []string{"a2agrant_W1", "ledgerctl revoke GRANT"}, []string{"a2agrant_A1"}, nil},
		{"support", []string{"revocations", "--since", "2099-01-01"}, 0, []string{"no revocations"}, []string{"a2agrant_"}, nil},
		{"support", []string{"revocations", "--limit", "1"}, 0, []string{"a2agrant_A1", "more revocations: --all lists every one, or --page "}, []string{"a2agrant_W1"}, nil},
		{"support", []string{"--output", "csv", "revocations"}, 0, []string{"grant,revoked (UTC),reported by,the embedded Provider,note", "a2agrant_W1,"}, nil, nil},
		{"writer", []string{"revocations"}, 4, nil, nil, []string{"may not call ListRevocations"}},
	}
	for _, tc := range tests {
		code, out, errs := f.ctl(t, tc.role, tc.args...)
		if code != tc.code {
			t.Errorf("%s as %s: exit %d, want %d\n%s%s", strings.Join(tc.args, " "), tc.role, code, tc.code, out, errs)
			continue
		}
		checkOutput(t, tc.args, out, errs, tc.want, tc.wantNot, tc.wantInErr)
	}
}

// revocations --not-stopping lists what does not stop the embedded
// Provider: as the ledgerd that runs it says, or, answered by another,
// every revocation without an admin's (a statement stops only the
// Provider that signed it, which that ledgerd cannot tell).
func TestNotStoppingFollowsTheProvidersLedgerd(t *testing.T) {
	stmt := []*ledgerv1.ProviderStatement{{RevokedAt: timestamppb.Now(), Brand: "https://other.example/a2a/x"}}
	for _, tc := range []struct {
		name string
		r    *ledgerv1.Revocation
		want bool
	}{
		{"a writer's, by another ledgerd", &ledgerv1.Revocation{}, false},
		{"a statement, by another ledgerd", &ledgerv1.Revocation{ProviderStatements: stmt}, false},
		{"an admin's, by another ledgerd", &ledgerv1.Revocation{AdminRevokedAt: timestamppb.Now()}, true},
		{"another brand's statement, by the Provider's ledgerd", &ledgerv1.Revocation{ProviderStatements: stmt, EmbeddedProvider: true}, false},
		{"its own statement, by the Provider's ledgerd", &ledgerv1.Revocation{ProviderStatements: stmt, EmbeddedProvider: true, EmbeddedProviderStoppedAt: timestamppb.Now()}, true},
	} {
		if got := stopsProvider(tc.r); got != tc.want {
			t.Errorf("%s: stops the Provider %v, want %v", tc.name, got, tc.want)
		}
	}
}

// checkOutput checks what ledgerctl args printed: out holds each of want
// and none of wantNot, errs each of wantInErr.
func checkOutput(t *testing.T, args []string, out, errs string, want, wantNot, wantInErr []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s%s", strings.Join(args, " "), w, out, errs)
		}
	}
	for _, w := range wantNot {
		if strings.Contains(out, w) {
			t.Errorf("%s: output says %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	for _, w := range wantInErr {
		if !strings.Contains(errs, w) {
			t.Errorf("%s: stderr lacks %q:\n%s", strings.Join(args, " "), w, errs)
		}
	}
}
