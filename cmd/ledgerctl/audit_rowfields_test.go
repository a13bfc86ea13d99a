package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A row's principal and targets are in no leaf: the leaf commits to the
// evidence they were read from. A row moved to another customer or order
// in the row store (the lookups by principal and by order then miss it)
// is found by the audit reading the fields again from the evidence, which
// it binds to the leaf itself: a row logged before the kept checkpoint
// (compared through its proof, or from the tiles with --all) and one
// logged since.
func TestAuditFindsARowMovedToAnotherCustomer(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(r *ledger.Row)
		want string
	}{
		{"principal", func(r *ledger.Row) { r.Principal = "acct-00000" }, "the row's principal is acct-00000; its evidence says acct-48213: the row was edited after it was written"},
		{"target", func(r *ledger.Row) { r.Actions[0].Target = "Z-0000" }, "the row's target of cancel_order is Z-0000; its evidence says A-5531: the row was edited after it was written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t)
			kept, later, key := f.keptAudit(t)
			f.edit(t, tamper.EditRow(f.rowID, tc.edit))
			laterWant := strings.NewReplacer("acct-48213", "acct-9", "A-5531", "L-9").Replace(tc.want)
			f.edit(t, tamper.EditRow(later, tc.edit))
			for _, all := range []bool{false, true} {
				code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
				if code != 1 {
					t.Errorf("audit (--all %v): exit %d, want 1 (the rows' %s edited in the row store):\n%s%s", all, code, tc.name, out, errs)
				}
				for _, w := range []string{"row " + f.rowID + ") differs from the ledger: " + tc.want, "row " + later + ") differs from the ledger: " + laterWant} {
					if !strings.Contains(out, w) {
						t.Errorf("audit (--all %v): no %q:\n%s", all, w, out)
					}
				}
			}
		})
	}
}

// The evidence hash the server states is its own word: a server that
// returns evidence rewritten to match an edited row, stating the hash the
// row records, is found by the audit's own hash of the returned tokens
// and action log entries.
func TestAuditHashesTheEvidenceItIsGiven(t *testing.T) {
	f := start(t)
	kept, _, key := f.keptAudit(t)
	f.edit(t, tamper.EditRow(f.rowID, func(r *ledger.Row) { r.Actions[0].Target = "Z-0000" }))
	s := f.split(t)
	s.evidence = func(ev *ledgerv1.GetEvidenceResponse) {
		if ev.GetRowId() == f.rowID {
			ev.Actions[0].Target = "Z-0000"
		}
	}
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if want := "the tokens or action log entries returned, or those values of the row, are not those written"; code != 1 || !strings.Contains(out, want) {
			t.Errorf("audit (--all %v): exit %d, want 1 with %q:\n%s%s", all, code, want, out, errs)
		}
	}
	// Another receipt of the same shape in place of the row's: its
	// canonical hash is not the leaf's.
	other := f.sc.Mint(pacttest.Spec{User: "acct-00000", Target: "A-5531"})
	s.evidence = func(ev *ledgerv1.GetEvidenceResponse) {
		if ev.GetRowId() == f.rowID {
			ev.ReceiptJws = other.ReceiptJWS
		}
	}
	code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, true)...)
	if want := "the receipt the server returns as the row's evidence hashes to sha256:"; code != 1 || !strings.Contains(out, want) {
		t.Errorf("audit: exit %d, want 1 with %q:\n%s%s", code, want, out, errs)
	}
}

// The audit's comparison of each row's fields with its evidence, and of
// the evidence with the leaf, passes honest rows of every kind: refusals
// with and without a delegation token (observed in another time zone),
// a forged receipt (its principal a claim), a receipt posted in its other
// ES256 signature form, receipts with limits and with empty limits, a
// duplicate, a read-only receipt and an incident; compared from the tiles
// (since the kept checkpoint, and with --all) and through their proofs.
func TestAuditPassesHonestRowsOfEveryKind(t *testing.T) {
	f := start(t)
	f.logged(t, f.rowID)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	c, wctx := f.writer(t)
	var ids []string
	post := func(r *pacttest.Receipt, lim *ledgerv1.Limits) {
		t.Helper()
		rep, err := c.AppendReceipt(wctx, &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken, Limits: lim,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rep.GetRow().GetId())
	}
	refuse := func(req *ledgerv1.AppendRefusalRequest) {
		t.Helper()
		rep, err := c.AppendRefusal(wctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rep.GetRow().GetId())
	}
	east := time.FixedZone("UTC+2", 2*60*60)
	refuse(&ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-48213", ClaimedAgent: "https://agent.example",
		Action: &ledgerv1.RefusalAction{Tool: "cancel_order", Target: "A-5531"}, Reason: "no receipt", ObservedAt: timestamppb.New(time.Now().Add(-time.Minute).In(east))})
	tok := f.sc.Mint(pacttest.Spec{User: "acct-2", Target: "R-2"})
	refuse(&ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-claimed", Action: &ledgerv1.RefusalAction{Tool: "cancel_order", Target: "R-2"},
		Reason: "over the limit", ObservedAt: timestamppb.New(time.Date(2026, 10, 7, 15, 12, 50, 123456789, east)), RequestJwt: tok.RequestJWT, DelegationToken: tok.DelegationToken})
	forged := f.sc.Mint(pacttest.Spec{User: "acct-99999", Target: "F-1"})
	forged.ReceiptJWS = pacttest.TamperSignature(forged.ReceiptJWS)
	post(forged, nil)
	twin := f.sc.Mint(pacttest.Spec{User: "acct-3", Target: "T-3"})
	twin.ReceiptJWS = pacttest.MalleateES256(twin.ReceiptJWS)
	post(twin, nil)
	limited := f.sc.Mint(pacttest.Spec{User: "acct-4", Target: "L-4"})
	post(limited, &ledgerv1.Limits{AmountMax: "order_value", CountMax: 3})
	post(limited, nil) // the same receipt with other evidence: a duplicate
	post(f.sc.Mint(pacttest.Spec{User: "acct-5", Target: "E-5"}), &ledgerv1.Limits{})
	post(f.sc.Mint(pacttest.Spec{User: "acct-6", Target: "G-6", Tool: "get_order", Granted: "orders:read", ScopesUsed: []string{"orders:read"}}), nil)
	if code, _, errs := f.ctl(t, "writer", "revoke", "a2agrant_7Q2F", "--at", "2026-10-07T13:00:00Z"); code != 0 {
		t.Fatalf("revoke: %s", errs)
	}
	post(f.sc.Mint(pacttest.Spec{User: "acct-7", Target: "I-7"}), nil)
	for _, id := range ids {
		f.logged(t, id)
	}
	key := f.verifierKey(t)
	later := filepath.Join(t.TempDir(), "later.checkpoint")
	if code, _, errs := f.ctl(t, "auditor", "log", "checkpoint", "--save", later); code != 0 {
		t.Fatalf("checkpoint: %s", errs)
	}
	for _, from := range []string{kept, later} {
		for _, all := range []bool{false, true} {
			if code, out, errs := f.ctl(t, "auditor", auditArgs(from, key, all)...); code != 0 {
				t.Errorf("audit from %s (--all %v): exit %d:\n%s%s", filepath.Base(from), all, code, out, errs)
			}
		}
	}
}

// A refusal's claimed principal and action are the writer's, kept in its
// evidence bundle and in no token: an edit of them in the row store is
// found by the bundle the audit rebuilds with them, which no longer
// hashes to the leaf's evidence line.
func TestAuditFindsARefusalsActionEdited(t *testing.T) {
	f := start(t)
	c, wctx := f.writer(t)
	rep, err := c.AppendRefusal(wctx, &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-48213", ClaimedAgent: "https://agent.example",
		Action: &ledgerv1.RefusalAction{Tool: "cancel_order", Target: "A-5531"}, Reason: "no receipt", ObservedAt: timestamppb.New(time.Now().Add(-time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	id := rep.GetRow().GetId()
	f.logged(t, id)
	kept, _, key := f.keptAudit(t)
	f.edit(t, tamper.EditRow(id, func(r *ledger.Row) {
		r.Principal, r.Refusal.ClaimedPrincipal = "acct-00000", "acct-00000"
		r.Actions[0].Target = "Z-0000"
	}))
	for _, all := range []bool{false, true} {
		code, out, errs := f.ctl(t, "auditor", auditArgs(kept, key, all)...)
		if want := "row " + id + ") differs from the ledger: the evidence the server returns, with the row's claimed principal and agent, action, reason and observedAt, encodes to a bundle of sha256:"; code != 1 || !strings.Contains(out, want) {
			t.Errorf("audit (--all %v): exit %d, want 1 with %q:\n%s%s", all, code, want, out, errs)
		}
	}
}
