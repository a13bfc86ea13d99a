package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// A revocation is a leaf of the log: an operator holding the row store who
// deletes a logged revocation, or moves it later (as a restore of the row
// store to before it would), is found by the audit, which compares each
// revocation leaf with the ledger's answer for the grant, whether the leaf
// is before the kept checkpoint or compared after it (--all). An honest
// ledger with revocations passes.
func TestAuditFindsARevocationLostBehindTheLog(t *testing.T) {
	const grant = "a2agrant_7Q2F"
	tests := []struct {
		name string
		edit func(*bbolt.Tx) error
		want string
	}{
		{"delete it", tamper.DropRevocation(grant), "records grant " + grant + " revoked as of 2026-10-07T12:00:00Z, but the ledger answers no revocation of it"},
		{"move it later", tamper.EditRevocation(grant, func(r *ledger.Revocation) {
			r.RevokedAt = r.RevokedAt.Add(48 * time.Hour)
		}), "but the ledger answers it revoked as of 2026-10-09T12:00:00Z, later"},
		{"drop the admin's", tamper.EditRevocation(grant, func(r *ledger.Revocation) {
			r.AdminRevokedAt, r.AdminBy, r.AdminNote, r.AdminRecordedAt = time.Time{}, "", "", time.Time{}
		}), "records an admin's revocation of grant " + grant + " as of 2026-10-07T13:00:00Z, but the ledger answers none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			if code, _, errs := f.ctl(t, "writer", "revoke", grant, "--at", "2026-10-07T12:00:00Z"); code != 0 {
				t.Fatalf("revoke: %s", errs)
			}
			if code, _, errs := f.ctl(t, "admin", "revoke", grant, "--at", "2026-10-07T13:00:00Z", "--note", "stolen laptop"); code != 0 {
				t.Fatalf("revoke: %s", errs)
			}
			// Logged in commit order: a row after the revocations is
			// logged after them.
			f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"}))
			kept := filepath.Join(t.TempDir(), "kept.checkpoint")
			if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
				t.Fatalf("checkpoint: %s", errs)
			}
			key := f.verifierKey(t)
			audit := func(all bool) (int, string, string) {
				args := []string{"log", "audit", "--from", kept, "--log-key", key, "--settle", "500ms"}
				if all {
					args = append(args, "--all")
				}
				return f.ctl(t, "auditor", args...)
			}
			for _, all := range []bool{false, true} {
				code, out, errs := audit(all)
				if code != 0 || !strings.Contains(out, "revocations: 1 revoked grants compared") {
					t.Fatalf("audit (--all %v) before the edit: %d %s %s", all, code, out, errs)
				}
			}

			f.edit(t, tc.edit)
			for _, all := range []bool{false, true} {
				code, out, errs := audit(all)
				if code != exitCheckFailed || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, tc.want) {
					t.Fatalf("audit (--all %v) after the edit: %d\n%s%s\nwant %q", all, code, out, errs, tc.want)
				}
			}
		})
	}
}

// A Provider's signed statement of a revocation is logged with it: the
// audit finds the statement the ledger no longer answers, as a restore of
// the row store to before it would leave it.
func TestAuditFindsAProvidersStatementLostBehindTheLog(t *testing.T) {
	const grant = "a2agrant_7Q2F"
	f := start(t)
	postStatement(t, f, grant, 1791374400)
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"}))
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	key := f.verifierKey(t)
	audit := func() (int, string, string) {
		return f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key, "--settle", "500ms", "--all")
	}
	if code, out, errs := audit(); code != 0 || !strings.Contains(out, "revocations: 1 revoked grants compared") {
		t.Fatalf("audit before the edit: %d %s %s", code, out, errs)
	}
	f.edit(t, tamper.EditRevocation(grant, func(r *ledger.Revocation) { r.ProviderStatements[0].Statement = "forged.not.signed" }))
	if code, out, errs := audit(); code != exitCheckFailed || !strings.Contains(out, "another statement of that brand as of that time") {
		t.Fatalf("audit after the statement was replaced: %d\n%s%s", code, out, errs)
	}
	f.edit(t, tamper.EditRevocation(grant, func(r *ledger.Revocation) { r.ProviderStatements = nil }))
	want := "records the Provider's signed statement of grant " + grant + "'s revocation as of 2026-10-07T12:00:00Z"
	if code, out, errs := audit(); code != exitCheckFailed || !strings.Contains(out, "MISMATCH") || !strings.Contains(out, want) {
		t.Fatalf("audit after the edit: %d\n%s%s\nwant %q", code, out, errs, want)
	}
	// What the operator does then: an admin's revocation as of its time,
	// which stops the embedded Provider; the audit passes again.
	if code, _, errs := f.ctl(t, "admin", "revoke", grant, "--at", "2026-10-07T12:00:00Z", "--note", "put back after a restore"); code != 0 {
		t.Fatalf("revoke: %s", errs)
	}
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-10", Target: "L-10"}))
	if code, out, errs := audit(); code != 0 {
		t.Fatalf("audit after an admin's revocation as of the lost statement's time: %d\n%s%s", code, out, errs)
	}
}

// postStatement posts, with the writer key, the brand's statement that it
// revoked grant as of 2026-10-07T12:00:00Z, signed at iat.
func postStatement(t *testing.T, f *fixture, grant string, iat int64) {
	t.Helper()
	stmt := f.sc.Brand.Key.SignTyp(verifier.RevocationTyp, verifier.RevocationClaims{Issuer: f.sc.AuthServer, Brand: f.sc.Brand.ID, GrantID: grant,
		RevokedAt: "2026-10-07T12:00:00Z", IssuedAt: iat})
	body, _ := json.Marshal(map[string]string{"providerStatement": stmt})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.http+"/v1/grants/"+grant+":revoke", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keys["writer"])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("RevokeGrant with the Provider's statement: %d", res.StatusCode)
	}
}

// A restore of the row store lost a Provider's statement, and the
// statement is posted again, signed again: the audit passes.
func TestAuditTakesAStatementSignedAgainAfterARestore(t *testing.T) {
	const grant = "a2agrant_7Q2F"
	f := start(t)
	postStatement(t, f, grant, 1791374400)
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-9", Target: "L-9"}))
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	f.edit(t, tamper.DropRevocation(grant))
	postStatement(t, f, grant, 1791378000)
	f.logged(t, f.append(t, pacttest.Spec{User: "acct-10", Target: "L-10"}))
	if code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", f.verifierKey(t), "--settle", "500ms", "--all"); code != 0 {
		t.Fatalf("audit after the statement was signed again: %d\n%s%s", code, out, errs)
	}
}
