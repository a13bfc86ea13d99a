package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Only a read-only receipt keeps no evidence, and fsck takes a row's word
// for it only when its leaf agrees: a logged money_moved row marked "not
// kept" (its evidence, its write-once copy and its leaf's token digests
// would no longer be compared, and its principal and target could be
// changed unseen) is a finding that says why, and its write-once copy is
// still compared, which finds the fields changed.
func TestFsckFindsEvidenceNotKeptOnAMoneyMovedRow(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *ledger.Row)
		want []string
	}{
		{"the row's class kept", func(r *ledger.Row) {
			r.EvidenceNotKept = "read-only class: the receipt, tokens and args are not kept (personal data stays short-lived)"
			r.Principal = "acct-someone-else"
			r.Actions[0].Target = "Z-0000"
		}, []string{
			"the row says its evidence is not kept, as only a read-only receipt's may be, but the row's class is money_moved",
			"principal",
			"Z-0000",
		}},
		{"the row's class changed to read-only", func(r *ledger.Row) {
			r.EvidenceNotKept = "read-only class: the receipt, tokens and args are not kept (personal data stays short-lived)"
			r.Class = retention.ReadOnly
			r.Principal = "acct-someone-else"
		}, []string{
			"the row says its evidence is not kept, as only a read-only receipt's may be, but its leaf 1 logs a receipt of class money_moved",
			"principal",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			ctx := context.Background()
			ro, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "RO-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
			money, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "L-1"})))
			if ro.EvidenceNotKept == "" || money.Class != retention.MoneyMoved {
				t.Fatalf("rows: read-only %q, money %s", ro.EvidenceNotKept, money.Class)
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			h.drain(t)
			if got := integrity(t, h); len(got.Findings) != 0 || got.RowsChecked != 2 {
				t.Fatalf("clean ledger: %+v", got)
			}

			h.tamper(t, tamper.EditRow(money.ID, tc.edit))
			got := integrity(t, h)
			var problems []string
			for _, f := range got.Findings {
				if f.RowID != money.ID {
					t.Errorf("a finding on another row: %s: %s", f.RowID, f.Problem)
				}
				problems = append(problems, f.Problem)
			}
			all := strings.Join(problems, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("findings:\n%s\nwant one with %q", all, w)
				}
			}
			// A drill's comparison of the row with its leaf says so too.
			if idx, diff, err := h.l.RowLeafDiff(ctx, money.ID); err != nil || !strings.Contains(diff, tc.want[0]) {
				t.Errorf("RowLeafDiff = %d, %q, %v; want %q", idx, diff, err, tc.want[0])
			}
			// The row is read as the one that keeps its evidence it is:
			// the evidence view shows the bundle, and VerifyRow re-runs
			// the signatures on it and finds the rewritten fields.
			if !strings.Contains(tc.name, "read-only") {
				v, err := h.l.Evidence(ctx, money.ID)
				if err != nil || v.NotKept != "" || v.SHA256 == "" || v.Evidence.ReceiptJWS == "" {
					t.Errorf("Evidence: %+v, %v; want the bundle kept", v, err)
				}
				rv, err := h.l.VerifyRow(ctx, money.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range rv.Checks {
					if c.Result == verifier.Skipped && strings.Contains(c.Detail, "not kept") {
						t.Errorf("VerifyRow: %s skipped: %s", c.Name, c.Detail)
					}
				}
				if rv.Same {
					t.Errorf("VerifyRow found the rewritten row the same: %+v", rv)
				}
			}
		})
	}
}
