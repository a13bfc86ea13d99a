package ledger_test

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// poolRows records, in a logged ledger, two receipts the monthly drill may
// sample and one row of each kind it may not: a read-only turn, a
// refusal, a replay (a duplicate) and a receipt whose signature failed.
// It returns them in that order.
func poolRows(t *testing.T, h *harness) []*ledger.Row {
	t.Helper()
	ctx := context.Background()
	first := h.sc.Mint(pacttest.Spec{Target: "P-1"})
	var rows []*ledger.Row
	for _, r := range []*pacttest.Receipt{
		first,
		h.sc.Mint(pacttest.Spec{Target: "P-2", User: "acct-2"}),
		h.sc.Mint(pacttest.Spec{Target: "P-3", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}),
	} {
		row, _ := h.append(t, in(r))
		rows = append(rows, row)
	}
	refusal, err := h.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-9", Tool: "change_address", Target: "P-4", Reason: "no receipt", ObservedAt: h.clock().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	replay := *first
	replay.ReceiptJWS = pacttest.MalleateES256(first.ReceiptJWS)
	dup, _ := h.append(t, in(&replay))
	forged := h.sc.Mint(pacttest.Spec{Target: "P-5", User: "acct-5"})
	parts := strings.Split(forged.ReceiptJWS, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sig[5] ^= 0xff
	parts[2] = base64.RawURLEncoding.EncodeToString(sig)
	forged.ReceiptJWS = strings.Join(parts, ".")
	bad, _ := h.append(t, in(forged))
	rows = append(rows, refusal, dup, bad)
	for i, r := range rows {
		if want := i < 2; ledger.Drillable(r) != want {
			t.Fatalf("row %d (kind %d, %s, class %s): drillable %v, want %v", i, r.Kind, r.Status, r.Class, !want, want)
		}
	}
	if dup.Status != ledger.Duplicate || bad.Status != ledger.Unauthorized {
		t.Fatalf("replay recorded %s, forgery %s", dup.Status, bad.Status)
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	return rows
}

// fsck holds the drill pool to the rule: a row the monthly drill may
// sample that the pool does not hold (taken out of it, or the pool
// emptied, so that no drill picks it), and a row the pool holds that the
// drill may not sample, are each a finding on that row, page by page.
func TestIntegrityChecksTheDrillPool(t *testing.T) {
	tests := []struct {
		name string
		edit func(rows []*ledger.Row) []func(*bbolt.Tx) error
		rows []int // the rows with a finding
		want string
	}{
		{"a row taken out of the pool", func(rows []*ledger.Row) []func(*bbolt.Tx) error {
			return []func(*bbolt.Tx) error{tamper.DropFromDrillPool(rows[1].ID)}
		}, []int{1}, "the monthly drill may sample the row, but the drill pool does not hold it"},
		{"the pool emptied", func([]*ledger.Row) []func(*bbolt.Tx) error {
			return []func(*bbolt.Tx) error{tamper.EmptyDrillPool()}
		}, []int{0, 1}, "the monthly drill may sample the row, but the drill pool does not hold it"},
		{"a read-only turn put in the pool", func(rows []*ledger.Row) []func(*bbolt.Tx) error {
			return []func(*bbolt.Tx) error{tamper.AddToDrillPool(rows[2].ID)}
		}, []int{2}, "the drill pool holds the row, but the monthly drill may not sample it (a read-only turn)"},
		{"a refusal put in the pool", func(rows []*ledger.Row) []func(*bbolt.Tx) error {
			return []func(*bbolt.Tx) error{tamper.AddToDrillPool(rows[3].ID)}
		}, []int{3}, "the drill pool holds the row, but the monthly drill may not sample it (a refusal)"},
		{"a duplicate put in the pool", func(rows []*ledger.Row) []func(*bbolt.Tx) error {
			return []func(*bbolt.Tx) error{tamper.AddToDrillPool(rows[4].ID)}
		}, []int{4}, "the drill pool holds the row, but the monthly drill may not sample it (a duplicate)"},
		{"a receipt whose signature failed put in the pool", func(rows []*ledger.Row) []func(*bbolt.Tx) error {
			return []func(*bbolt.Tx) error{tamper.AddToDrillPool(rows[5].ID)}
		}, nil, "earlier versions put such receipts in the pool: no finding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			rows := poolRows(t, h)
			if got := integrity(t, h); len(got.Findings) != 0 || got.RowsChecked != len(rows) {
				t.Fatalf("clean ledger: %+v", got)
			}
			for _, e := range tc.edit(rows) {
				h.tamper(t, e)
			}
			got := integrity(t, h)
			var with []int
			var problems []string
			for _, f := range got.Findings {
				problems = append(problems, f.RowID+": "+f.Problem)
				i := slices.IndexFunc(rows, func(r *ledger.Row) bool { return r.ID == f.RowID })
				if i < 0 || !strings.Contains(f.Problem, tc.want) {
					t.Errorf("finding %s: %s; want only findings with %q", f.RowID, f.Problem, tc.want)
				}
				with = append(with, i)
			}
			slices.Sort(with)
			if !slices.Equal(with, tc.rows) {
				t.Fatalf("findings on rows %v, want %v:\n%s", with, tc.rows, strings.Join(problems, "\n"))
			}
		})
	}
}
