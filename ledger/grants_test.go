package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// An admin's revocation is kept apart from a writer's: AdminRevokedAt is
// the earliest time an admin recorded, whatever a writer records before
// or after it, while RevokedAt, which makes receipts incidents, is the
// earliest of all.
func TestAnAdminsRevocationIsKept(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	at := func(hm string) time.Time {
		tm, _ := time.Parse("15:04", hm)
		return time.Date(2026, 10, 7, tm.Hour(), tm.Minute(), 0, 0, time.UTC)
	}
	steps := []struct {
		name          string
		at            string
		by            string
		admin         bool
		wantRevokedAt string
		wantBy        string
		wantAdminAt   string // "" for none
	}{
		{"a writer's", "13:10", "writer-key", false, "13:10", "writer-key", ""},
		{"an admin's later than the writer's", "13:30", "admin-key", true, "13:10", "writer-key", "13:30"},
		{"a writer's earlier than the admin's", "13:05", "writer-key", false, "13:05", "writer-key", "13:30"},
		{"an admin's later than its first", "13:40", "admin-key", true, "13:05", "writer-key", "13:30"},
		{"an admin's earlier than all", "13:00", "admin-key", true, "13:00", "admin-key", "13:00"},
		{"a writer's earlier than all", "12:50", "writer-key", false, "12:50", "writer-key", "13:00"},
	}
	for _, st := range steps {
		rev, err := h.l.RevokeGrant(ctx, "a2agrant_7Q2F", at(st.at), "", st.by, st.admin)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		stored, err := h.l.Revocation(ctx, "a2agrant_7Q2F")
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		var wantAdmin time.Time
		if st.wantAdminAt != "" {
			wantAdmin = at(st.wantAdminAt)
		}
		for _, got := range []*ledger.Revocation{&rev, stored} {
			if !got.RevokedAt.Equal(at(st.wantRevokedAt)) || got.By != st.wantBy || !got.AdminRevokedAt.Equal(wantAdmin) {
				t.Fatalf("after %s: %+v, want revoked at %s by %s, by an admin at %q", st.name, got, st.wantRevokedAt, st.wantBy, st.wantAdminAt)
			}
		}
	}
}

// An admin's own record of its revocation, its key name and note, is kept
// beside the revocation in force, whatever a writer records before or
// after it; an admin's later than its first leaves the first's.
func TestAnAdminsNoteIsKept(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	at := func(hm string) time.Time {
		tm, _ := time.Parse("15:04", hm)
		return time.Date(2026, 10, 7, tm.Hour(), tm.Minute(), 0, 0, time.UTC)
	}
	steps := []struct {
		name                   string
		at, by, note           string
		admin                  bool
		wantBy, wantNote       string
		wantAdminBy, wantNote2 string
		wantAdminAt            string
	}{
		{"a writer's", "13:10", "writer-key", "customer revoked in settings", false, "writer-key", "customer revoked in settings", "", "", ""},
		{"an admin's later than the writer's", "13:30", "admin-key", "customer asked by phone", true, "writer-key", "customer revoked in settings", "admin-key", "customer asked by phone", "13:30"},
		{"a writer's later than all", "14:00", "writer-key", "", false, "writer-key", "customer revoked in settings", "admin-key", "customer asked by phone", "13:30"},
		{"a writer's earlier than all", "13:00", "other-writer", "erase", false, "other-writer", "erase", "admin-key", "customer asked by phone", "13:30"},
		{"an admin's later than its first", "13:40", "admin-2", "second call", true, "other-writer", "erase", "admin-key", "customer asked by phone", "13:30"},
		{"an admin's earlier than all", "12:00", "admin-2", "fraud", true, "admin-2", "fraud", "admin-2", "fraud", "12:00"},
		{"a writer's earlier than the admin's", "11:00", "writer-key", "", false, "writer-key", "", "admin-2", "fraud", "12:00"},
	}
	for _, st := range steps {
		rev, err := h.l.RevokeGrant(ctx, "a2agrant_note", at(st.at), st.note, st.by, st.admin)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		stored, err := h.l.Revocation(ctx, "a2agrant_note")
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		var wantAdmin time.Time
		if st.wantAdminAt != "" {
			wantAdmin = at(st.wantAdminAt)
		}
		for _, got := range []*ledger.Revocation{&rev, stored} {
			if got.By != st.wantBy || got.Note != st.wantNote || got.AdminBy != st.wantAdminBy || got.AdminNote != st.wantNote2 ||
				!got.AdminRevokedAt.Equal(wantAdmin) || got.AdminRecordedAt.IsZero() != wantAdmin.IsZero() {
				t.Fatalf("after %s: %+v\nwant by %q note %q, the admin's by %q note %q at %q", st.name, got, st.wantBy, st.wantNote, st.wantAdminBy, st.wantNote2, st.wantAdminAt)
			}
		}
	}
}

func TestGrantRevocation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	at := func(hm string) time.Time {
		tm, _ := time.Parse("15:04", hm)
		return time.Date(2026, 10, 7, tm.Hour(), tm.Minute(), 0, 0, time.UTC)
	}
	before, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1", At: at("13:05")})))
	if _, err := h.l.RevokeGrant(ctx, "a2agrant_7Q2F", at("13:10"), "customer revoked in account settings", "pipeline", false); err != nil {
		t.Fatal(err)
	}
	after, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-2", At: at("13:12")})))
	if c := check(after, verifier.CheckGrantNotRevoked); c.Result != verifier.Fail || after.Status != ledger.Incident || after.IncidentID == "" {
		t.Fatalf("receipt after revocation: %v %+v", after.Status, c)
	}
	late, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-3", At: at("13:08")}))) // issued before, posted after
	if c := check(late, verifier.CheckGrantNotRevoked); c.Result != verifier.Pass || late.Status != ledger.Authorized {
		t.Fatalf("receipt issued before revocation: %v %+v", late.Status, c)
	}
	if c := check(before, verifier.CheckGrantNotRevoked); c.Result != verifier.Pass {
		t.Fatalf("earlier row changed: %+v", c)
	}
	// A later revocation time does not replace the earlier; an earlier one does.
	rev, _ := h.l.RevokeGrant(ctx, "a2agrant_7Q2F", at("14:00"), "", "admin", true)
	if !rev.RevokedAt.Equal(at("13:10")) {
		t.Fatalf("later time replaced the revocation: %v", rev.RevokedAt)
	}
	rev, _ = h.l.RevokeGrant(ctx, "a2agrant_7Q2F", at("13:09"), "", "admin", true)
	if !rev.RevokedAt.Equal(at("13:09")) || rev.By != "admin" {
		t.Fatalf("earlier time did not replace it: %+v", rev)
	}
	g, err := h.l.Grant(ctx, "a2agrant_7Q2F")
	if err != nil {
		t.Fatal(err)
	}
	if g.RowCount != 3 || len(g.Rows) != 3 || g.Revocation == nil || len(g.Principals) != 1 || len(g.ScopesGranted) != 2 {
		t.Fatalf("grant view: %+v", g)
	}
	if _, err := h.l.Grant(ctx, "a2agrant_none"); err == nil {
		t.Fatal("unknown grant found")
	}
	// VerifyRow carries the write-time verdict.
	rv, err := h.l.VerifyRow(ctx, after.ID)
	if err != nil || !rv.Same {
		t.Fatalf("verify after revocation: %v %+v", err, rv)
	}
}

// A receipt's ts is in whole seconds, a revocation's time is not: a
// receipt in the revocation's own second may have been served after it,
// and is an incident; one the second before is not.
func TestAReceiptInTheRevocationsSecondIsAfterIt(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	second := time.Date(2026, 10, 7, 13, 10, 0, 0, time.UTC)
	if _, err := h.l.RevokeGrant(ctx, "a2agrant_7Q2F", second.Add(400*time.Millisecond), "customer revoked", "pipeline", false); err != nil {
		t.Fatal(err)
	}
	same, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "S-1", At: second})))
	if c := check(same, verifier.CheckGrantNotRevoked); c.Result != verifier.Fail || same.Status != ledger.Incident {
		t.Fatalf("a receipt of ts %s, the revocation at %s: %v %+v; want an incident", second, second.Add(400*time.Millisecond), same.Status, c)
	}
	before, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "S-2", At: second.Add(-time.Second)})))
	if c := check(before, verifier.CheckGrantNotRevoked); c.Result != verifier.Pass {
		t.Fatalf("a receipt the second before the revocation: %+v", c)
	}
}

func TestIntegrityCheckAndRestore(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var rows []*ledger.Row
	for i := range 5 {
		r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "F-" + string(rune('a'+i))})))
		rows = append(rows, r)
	}
	page, err := h.l.CheckIntegrity(ctx, 0, "")
	if err != nil || page.RowsChecked != 5 || page.PendingUpload != 5 || len(page.Findings) != 0 {
		t.Fatalf("before upload: %+v %v", page, err)
	}
	if _, err := h.l.UploadRound(ctx, 100, 2); err != nil {
		t.Fatal(err)
	}
	victim := rows[2]
	orig := writeOnce(t, h, victim.ID)
	h.store.Close()
	editEvidence(t, filepath.Join(h.dir, "ledger.db"), victim.ID, orig, func(b []byte) []byte {
		return append(b[:len(b)-1], []byte(`,"x":1}`)...)
	})
	h.open(t)

	// Walk in pages of two: the edit is found wherever it falls.
	var findings []ledger.Finding
	checked, token := 0, ""
	for {
		page, err := h.l.CheckIntegrity(ctx, 2, token)
		if err != nil {
			t.Fatal(err)
		}
		checked += page.RowsChecked
		findings = append(findings, page.Findings...)
		if page.Next == "" {
			break
		}
		token = page.Next
	}
	if checked != 5 || len(findings) != 1 || findings[0].RowID != victim.ID || !findings[0].Restorable {
		t.Fatalf("checked %d, findings %+v", checked, findings)
	}
	if rv, _ := h.l.VerifyRow(ctx, victim.ID); rv.Same {
		t.Fatal("VerifyRow did not catch the edit")
	}
	changed, _, err := h.l.RestoreEvidence(ctx, victim.ID)
	if err != nil || !changed {
		t.Fatalf("restore: %v %v", changed, err)
	}
	if page, _ := h.l.CheckIntegrity(ctx, 0, ""); len(page.Findings) != 0 {
		t.Fatalf("after restore: %+v", page.Findings)
	}
	if rv, _ := h.l.VerifyRow(ctx, victim.ID); !rv.Same {
		t.Fatalf("after restore VerifyRow: %v", rv.Differences)
	}
	if changed, _, _ := h.l.RestoreEvidence(ctx, victim.ID); changed {
		t.Fatal("restoring intact evidence changed it")
	}
}

func TestGrantViewStopsWhenCancelled(t *testing.T) {
	h := newHarness(t)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "C-1"})))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g, err := h.l.Grant(ctx, "a2agrant_7Q2F"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Grant with a cancelled context = %+v, %v; want context.Canceled", g, err)
	}
}

func TestGrantViewListsDistinctValues(t *testing.T) {
	h := newHarness(t)
	for i, used := range [][]string{{"orders:cancel"}, {"orders:read", "orders:cancel"}, {"orders:read"}} {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("D-%d", i), Granted: "orders:read orders:cancel", ScopesUsed: used})))
	}
	g, err := h.l.Grant(context.Background(), "a2agrant_7Q2F")
	if err != nil {
		t.Fatal(err)
	}
	// Rows come newest first: their values in the order first seen.
	got := [][]string{g.Principals, g.ScopesGranted, g.ScopesUsed}
	want := [][]string{{"acct-48213"}, {"orders:read", "orders:cancel"}, {"orders:read", "orders:cancel"}}
	if !reflect.DeepEqual(got, want) || g.ListsCut || g.RowCount != 3 {
		t.Fatalf("grant view lists = %q (cut %v, %d rows); want %q", got, g.ListsCut, g.RowCount, want)
	}
}

// A forged receipt naming the grant (its signature does not verify) is
// one of the grant's rows, but its claims are in none of the lists: they
// hold what a signature vouches for.
func TestGrantViewListsOnlyVouchedClaims(t *testing.T) {
	h := newHarness(t)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "V-1", Granted: "orders:read orders:cancel", ScopesUsed: []string{"orders:cancel"}})))
	forged := h.sc.Mint(pacttest.Spec{Target: "V-2", User: "acct-99999", Granted: "orders:read refunds:issue", ScopesUsed: []string{"refunds:issue"}})
	forged.ReceiptJWS = pacttest.MustKey(h.sc.Brand.Key.Kid, jose.ES256).Sign(forged.Claims)
	forged.DelegationToken = pacttest.MustKey(h.sc.Brand.Key.Kid, jose.ES256).Sign(forged.TokenClaims)
	if row, _ := h.append(t, in(forged)); row.Status != ledger.Unauthorized {
		t.Fatalf("the forged receipt: %v", row.Status)
	}
	g, err := h.l.Grant(context.Background(), "a2agrant_7Q2F")
	if err != nil {
		t.Fatal(err)
	}
	got := [][]string{g.Principals, g.ScopesGranted, g.ScopesUsed}
	want := [][]string{{"acct-48213"}, {"orders:read", "orders:cancel"}, {"orders:cancel"}}
	if !reflect.DeepEqual(got, want) || g.RowCount != 2 {
		t.Fatalf("grant view lists = %q (%d rows); want %q (2 rows)", got, g.RowCount, want)
	}
}

// Any writer can post rows naming any grant: Grant reads the newest
// MaxGrantRows (here 5) and says the count is a lower bound when the
// grant has more, and that the lists may have left a value out (the real
// receipt's principal, behind the forged rows, is not read).
func TestGrantViewReadsABoundedNumberOfRows(t *testing.T) {
	h := newHarness(t)
	defer ledger.SetMaxGrantRows(5)()
	at := h.clock().Add(-time.Hour)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "W-0", At: at})))
	for i := 1; i <= 4; i++ {
		forged := h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("W-%d", i), User: fmt.Sprintf("acct-%d", 90000+i), At: at.Add(time.Duration(i) * time.Minute)})
		forged.ReceiptJWS = pacttest.TamperSignature(forged.ReceiptJWS)
		if row, _ := h.append(t, in(forged)); row.Status != ledger.Unauthorized {
			t.Fatalf("forged receipt %d: %v", i, row.Status)
		}
	}
	g, err := h.l.Grant(context.Background(), "a2agrant_7Q2F")
	if err != nil {
		t.Fatal(err)
	}
	if g.RowCount != 5 || g.RowCountCut || g.ListsCut || len(g.Principals) != 1 {
		t.Fatalf("5 rows: count %d, cut %v, lists cut %v, principals %q; want 5, not cut, the real principal", g.RowCount, g.RowCountCut, g.ListsCut, g.Principals)
	}
	forged := h.sc.Mint(pacttest.Spec{Target: "W-5", User: "acct-90005", At: at.Add(5 * time.Minute)})
	forged.ReceiptJWS = pacttest.TamperSignature(forged.ReceiptJWS)
	h.append(t, in(forged))
	if g, err = h.l.Grant(context.Background(), "a2agrant_7Q2F"); err != nil {
		t.Fatal(err)
	}
	if g.RowCount != 5 || !g.RowCountCut || !g.ListsCut || len(g.Rows) != 5 || !reflect.DeepEqual(g.Principals, []string{"acct-48213"}) {
		t.Fatalf("6 rows: count %d, cut %v, lists cut %v, %d rows, principals %q; want the newest 5 read, cut, lists cut, the real principal", g.RowCount, g.RowCountCut, g.ListsCut, len(g.Rows), g.Principals)
	}
}

// A writer that posts more forged receipts under a grant than one answer
// reads (MaxGrantRows, here 5), dated after the grant's real receipts,
// fills the rows read with them; the lists still hold what the grant's
// receipts whose signature passed vouch for, read from the index of
// them, newest first and MaxGrantRows at most, and say they may have
// left a value out. The rows and their count stay every row's, the
// forged ones first.
func TestForgedRowsUnderAGrantDoNotEmptyItsLists(t *testing.T) {
	h := newHarness(t)
	defer ledger.SetMaxGrantRows(5)()
	at := h.clock().Add(-time.Hour)
	forge := func(grant string, n int, from time.Time) {
		t.Helper()
		for i := range n {
			f := h.sc.Mint(pacttest.Spec{GrantID: grant, Target: fmt.Sprintf("F-%d", i), User: fmt.Sprintf("acct-%d", 90000+i), ScopesUsed: []string{"orders:read"},
				At: from.Add(time.Duration(i) * time.Second)})
			f.ReceiptJWS = pacttest.TamperSignature(f.ReceiptJWS)
			if row, _ := h.append(t, in(f)); row.Status != ledger.Unauthorized {
				t.Fatalf("forged receipt %d under %s: %v", i, grant, row.Status)
			}
		}
	}
	type lists struct{ Principals, Agents, ScopesUsed []string }
	tests := []struct {
		name   string
		grant  string
		real   []string // the users of the grant's real receipts, oldest first
		forged int
		want   lists
	}{
		{name: "one real receipt behind six forged", grant: "a2agrant_7Q2F", real: []string{"acct-48213"}, forged: 6,
			want: lists{[]string{"acct-48213"}, []string{h.sc.PA.ID}, []string{"orders:cancel"}}},
		{name: "more real receipts than one answer reads", grant: "a2agrant_MANY", real: []string{"acct-1", "acct-2", "acct-3", "acct-4", "acct-5", "acct-6"}, forged: 6,
			want: lists{[]string{"acct-6", "acct-5", "acct-4", "acct-3", "acct-2"}, []string{h.sc.PA.ID}, []string{"orders:cancel"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, user := range tc.real {
				if row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: tc.grant, User: user, Target: fmt.Sprintf("R-%d", i), At: at.Add(time.Duration(i) * time.Second)}))); !row.ReceiptVerified() {
					t.Fatalf("real receipt of %s: %+v", user, row.Verifier.Checks)
				}
			}
			forge(tc.grant, tc.forged, at.Add(time.Minute))
			g, err := h.l.Grant(context.Background(), tc.grant)
			if err != nil {
				t.Fatal(err)
			}
			if got := (lists{g.Principals, g.Agents, g.ScopesUsed}); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lists %+v; want %+v", got, tc.want)
			}
			if g.RowCount != 5 || !g.RowCountCut || !g.ListsCut || len(g.Rows) != 5 {
				t.Errorf("count %d, cut %v, lists cut %v, %d rows; want the newest 5 read, cut, lists cut", g.RowCount, g.RowCountCut, g.ListsCut, len(g.Rows))
			}
			for _, r := range g.Rows {
				if r.ReceiptVerified() {
					t.Errorf("row %s of %s in the rows read: want the forged rows, newest first", r.ID, r.Principal)
				}
			}
		})
	}
}

// A real delegation token of another grant, posted with a receipt naming
// this grant (a forged one, or the grant's real receipt posted first), is
// a token whose signature passes, but it vouches for its own grant: the
// scopes it grants are not this grant's.
func TestGrantViewTakesNoScopesFromAnotherGrantsToken(t *testing.T) {
	h := newHarness(t)
	mine := h.sc.Mint(pacttest.Spec{Target: "V-1", Granted: "orders:read orders:cancel", ScopesUsed: []string{"orders:cancel"}})
	other := h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_OTHER", User: "acct-7", Target: "W-1", Granted: "orders:read refunds:issue", ScopesUsed: []string{"refunds:issue"}})

	forged := h.sc.Mint(pacttest.Spec{Target: "V-2", ScopesUsed: []string{"refunds:issue"}})
	forged.ReceiptJWS = pacttest.MustKey(h.sc.Brand.Key.Kid, jose.ES256).Sign(forged.Claims)
	forged.DelegationToken = other.DelegationToken
	early := *mine
	early.DelegationToken = other.DelegationToken
	for _, r := range []*pacttest.Receipt{forged, &early} {
		if row, _ := h.append(t, in(r)); row.Status != ledger.Unauthorized {
			t.Fatalf("a receipt posted with another grant's token: %v", row.Status)
		}
	}
	h.append(t, in(mine))
	g, err := h.l.Grant(context.Background(), "a2agrant_7Q2F")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"orders:read", "orders:cancel"}; !reflect.DeepEqual(g.ScopesGranted, want) || g.RowCount != 3 {
		t.Fatalf("scopes granted = %q (%d rows); want %q (3 rows): refunds:issue is another grant's", g.ScopesGranted, g.RowCount, want)
	}
}
