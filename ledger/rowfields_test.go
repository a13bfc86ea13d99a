package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// findingsOf lists the findings about row id.
func findingsOf(p *ledger.IntegrityPage, id string) []string {
	var out []string
	for _, f := range p.Findings {
		if f.RowID == id {
			out = append(out, f.Problem)
		}
	}
	return out
}

// A row's fields edited in the row store, with its evidence, leaf and
// verdict untouched, are found by VerifyRow and fsck: the fields are
// derived from the kept evidence again and compared (an issue time edited
// leaves the row's entry in the time index behind: VerifyRow refuses the
// row, and fsck compares it). The write-once copy holds the original, so
// the finding is not restorable from it.
func TestEditedRowFieldsAreFound(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		uploaded bool // the row store dropped its bundle: the copy is read
		refusal  bool
		edit     func(r *ledger.Row)
		want     string
	}{
		{"target", false, false, func(r *ledger.Row) { r.Actions[0].Target = "A-7777" },
			"the row's target of cancel_order is A-7777; its evidence says A-5531: the row was edited after it was written"},
		{"target, evidence uploaded", true, false, func(r *ledger.Row) { r.Actions[0].Target = "A-7777" },
			"the row's target of cancel_order is A-7777; its evidence says A-5531"},
		{"principal", false, false, func(r *ledger.Row) { r.Principal = "acct-99999" },
			"the row's principal is acct-99999; its evidence says acct-48213: the row was edited after it was written"},
		{"principal, evidence uploaded", true, false, func(r *ledger.Row) { r.Principal = "acct-99999" },
			"the row's principal is acct-99999; its evidence says acct-48213"},
		{"issued-at", false, false, func(r *ledger.Row) { r.IssuedAt = r.IssuedAt.AddDate(0, -1, 0) },
			"the row's issued-at is 2026-09-07T13:12:44Z; its evidence says 2026-10-07T13:12:44Z"},
		{"target source", false, false, func(r *ledger.Row) { r.Actions[0].TargetSource = verifier.TargetFromWriter },
			`the row's target source of cancel_order is "the action log alone"; its evidence says "the signed args": the row was edited after it was written`},
		{"refusal's target source", false, true, func(r *ledger.Row) { r.Actions[0].TargetSource = verifier.TargetFromSignedArgs },
			`the row's target source of cancel_order is "the signed args"; its evidence says "the action log alone"`},
		{"args hash", false, false, func(r *ledger.Row) { r.Actions[0].ArgsHash = "AAAA" },
			"the row's args hash of cancel_order is AAAA; its evidence says"},
		{"brand", false, false, func(r *ledger.Row) { r.Brand = "https://elsewhere.example" },
			"the row's brand is https://elsewhere.example; its evidence says"},
		{"an action added", false, false, func(r *ledger.Row) { r.Actions = append(r.Actions, r.Actions[0]) },
			"the row records 2 actions; its evidence says 1"},
		{"status", false, false, func(r *ledger.Row) { r.Status = ledger.Incident },
			"the row's status is incident; its write-time checks give authorized: the row was edited after it was written"},
		{"status, evidence uploaded", true, false, func(r *ledger.Row) { r.Status = ledger.Unauthorized },
			"the row's status is unauthorized; its write-time checks give authorized"},
		{"refusal's principal", false, true, func(r *ledger.Row) { r.Principal = "acct-99999" },
			"the row's principal is acct-99999; its evidence says acct-48213"},
		{"refusal's target", false, true, func(r *ledger.Row) { r.Actions[0].Target = "A-7777" },
			"the row's target of cancel_order is A-7777; its evidence says A-5531"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.startLog(t)
			var row *ledger.Row
			if tc.refusal {
				r := h.sc.Mint(pacttest.Spec{})
				var err error
				row, err = h.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedAgent: "agent", Tool: "cancel_order", Target: "A-5531", Reason: "no receipt",
					RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, ObservedAt: h.clock()})
				if err != nil || row.Principal != "acct-48213" {
					t.Fatalf("refusal: %+v %v", row, err)
				}
			} else {
				row, _ = h.append(t, in(h.sc.Mint(pacttest.Spec{})))
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.uploaded {
				h.drain(t)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("before the edit:\n%s", problems(got))
			}
			h.tamper(t, tamper.EditRow(row.ID, tc.edit))

			rv, err := h.l.VerifyRow(ctx, row.ID)
			switch {
			case tc.name == "issued-at":
				// The row's entry in the time index is keyed by its
				// issue time: the record no longer leads to it, and the
				// row is not served; fsck compares it.
				if !errors.Is(err, ledger.ErrStoreEdited) {
					t.Fatalf("VerifyRow after the edit: %v, want ErrStoreEdited", err)
				}
			case err != nil:
				t.Fatal(err)
			case rv.Same || !strings.Contains(strings.Join(rv.Differences, "\n"), tc.want):
				t.Fatalf("VerifyRow after the edit: same %v, differences:\n%s\nwant %q", rv.Same, strings.Join(rv.Differences, "\n"), tc.want)
			}
			got := integrity(t, h)
			found := findingsOf(got, row.ID)
			if !strings.Contains(strings.Join(found, "\n"), tc.want) {
				t.Fatalf("fsck after the edit:\n%s\nwant a finding about row %s: %q", problems(got), row.ID, tc.want)
			}
			for _, f := range got.Findings {
				if f.RowID == row.ID && f.Restorable {
					t.Fatalf("an edited row is not mended from the write-once copy: %+v", f)
				}
			}
		})
	}
}

// An untouched ledger holding a row of every kind yields no finding and
// VerifyRow gives the write-time result for each: the fields derived from
// the evidence are the fields the write path recorded.
func TestUntouchedRowsAgreeWithTheirEvidence(t *testing.T) {
	ctx := context.Background()
	for _, uploaded := range []bool{false, true} {
		name := "in the row store"
		if uploaded {
			name = "uploaded"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.startLog(t)
			var rows []*ledger.Row
			add := func(row *ledger.Row, _ ledger.Outcome) { rows = append(rows, row) }
			first := h.sc.Mint(pacttest.Spec{Target: "A-1"})
			add(h.append(t, in(first)))
			incident := h.sc.Mint(pacttest.Spec{Target: "A-2", ScopesUsed: []string{"refunds:issue"}})
			add(h.append(t, in(incident)))
			forged := h.sc.Mint(pacttest.Spec{Target: "A-3"})
			forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(forged.Claims)
			add(h.append(t, in(forged)))
			dup := in(first)
			dup.ReceiptJWS = pacttest.MalleateES256(first.ReceiptJWS)
			add(h.append(t, dup))
			add(h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "R-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))))
			limited := in(h.sc.Mint(pacttest.Spec{Target: "A-4", Tool: "issue_refund", ArgsJSON: `{"order":"A-4","amount":12.5}`, Granted: "orders:read refunds:issue", ScopesUsed: []string{"refunds:issue"}}))
			limited.Limits = &ledger.Limits{AmountMax: "10", CountMax: 3}
			limited.ContextID, limited.MessageID = "ctx-1", "msg-1"
			add(h.append(t, limited))
			noArgs := in(h.sc.Mint(pacttest.Spec{Target: "A-5"}))
			noArgs.Actions[0].ArgsJSON = ""
			add(h.append(t, noArgs))

			tokenOf := h.sc.Mint(pacttest.Spec{Target: "A-6"})
			for _, ri := range []ledger.RefusalInput{
				{ClaimedPrincipal: "acct-1", ClaimedAgent: "agent", Tool: "change_address", Target: "acct-1", Reason: "chat yes", ObservedAt: h.clock()},
				{ClaimedAgent: "agent", Tool: "issue_refund", Reason: "no receipt", RequestJWT: tokenOf.RequestJWT, ObservedAt: h.clock()},
				{ClaimedPrincipal: "acct-2", Tool: "cancel_order", Target: "A-6", Reason: "no receipt", RequestJWT: tokenOf.RequestJWT, DelegationToken: tokenOf.DelegationToken, ObservedAt: h.clock()},
				{ClaimedPrincipal: "acct-3", Tool: "cancel_order", Target: "A-7", Reason: "forged token", DelegationToken: pacttest.MustKey("brand-k3", jose.ES256).Sign(tokenOf.TokenClaims), ObservedAt: h.clock()},
			} {
				row, err := h.l.AppendRefusal(ctx, ri)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, row)
			}
			seen := map[ledger.Status]bool{}
			kinds := map[ledger.Kind]bool{}
			readOnly := false
			for _, r := range rows {
				seen[r.Status], kinds[r.Kind] = true, true
				readOnly = readOnly || r.Class == retention.ReadOnly
			}
			if len(seen) != 4 || len(kinds) != 2 || !readOnly {
				t.Fatalf("want every status, both kinds and a read-only row: %v %v %v", seen, kinds, readOnly)
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			if uploaded {
				h.drain(t)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("an untouched ledger:\n%s", problems(got))
			}
			for _, r := range rows {
				rv, err := h.l.VerifyRow(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !rv.Same {
					t.Fatalf("row %s (%v, %v): %v", r.ID, r.Status, r.Kind, rv.Differences)
				}
			}
		})
	}
}

// A read-only row keeps no evidence: an edit of its principal or target is
// not found by comparing it with its evidence, and VerifyRow says so
// beside its checks. The record then has no entries in the indexes of
// its new values, which fsck names (an edit that moved the entries too
// would leave nothing to find). An edit of what its leaf holds (its
// grant, status, class) is found against the leaf.
func TestReadOnlyRowFieldsAreNotCheckedAgainstEvidence(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "R-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	if row.EvidenceNotKept == "" {
		t.Fatal("not a read-only row")
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.tamper(t, tamper.EditRow(row.ID, func(r *ledger.Row) { r.Principal, r.Actions[0].Target = "acct-99999", "R-7777" }))
	got := findingsOf(integrity(t, h), row.ID)
	if len(got) != 2 || !strings.Contains(got[0], "no entry in its index by_principal for its value") || !strings.Contains(got[1], "no entry in its index by_target for its value") {
		t.Fatalf("a read-only row's principal and target edited in its record alone: %q; want the two indexes of their values named, and nothing compared with evidence", got)
	}
	rv, err := h.l.VerifyRow(ctx, row.ID)
	if err != nil || !rv.Same {
		t.Fatalf("VerifyRow: %v %+v", err, rv)
	}
	said := false
	for _, c := range rv.Checks {
		said = said || strings.Contains(c.Detail, "the row's fields cannot be compared with its evidence")
	}
	if !said {
		t.Fatalf("VerifyRow does not say the read-only row's fields went unchecked: %+v", rv.Checks)
	}
	h.tamper(t, tamper.EditRow(row.ID, func(r *ledger.Row) { r.GrantID = "a2agrant_OTHER" }))
	if got := findingsOf(integrity(t, h), row.ID); !strings.Contains(strings.Join(got, "\n"), "grant") {
		t.Fatalf("a read-only row's grant edited against its leaf: %q", got)
	}
}
