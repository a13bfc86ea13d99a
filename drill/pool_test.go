package drill_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
)

// monthly runs a monthly drill of five rows on l.
func monthly(t *testing.T, l *ledger.Ledger) *drill.Report {
	t.Helper()
	rep, err := drill.New(l, drill.Config{}).Run(context.Background(), drill.Request{Monthly: true, Sample: 5}, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// An operator who holds the row store's file empties the drill pool. The
// monthly drill does not report "nothing to drill": the rows it reads
// are eligible and the pool holds none of them, so it drills nothing,
// fails, and says how many rows each holds.
func TestMonthlyDrillFailsOnAnEmptiedPool(t *testing.T) {
	l, rows := editedLedger(t, []string{"A-1", "A-2", "A-3", "A-4", "A-5", "A-6"}, func([]*ledger.Row) []func(*bbolt.Tx) error {
		return []func(*bbolt.Tx) error{tamper.EmptyDrillPool()}
	})
	rep := monthly(t, l)
	if len(rep.Rows) != 0 || rep.ChecksTotal == 0 || rep.ChecksPassed != 0 {
		t.Fatalf("rows %d, checks %d/%d, note %q; want no row drilled and the drill failed", len(rep.Rows), rep.ChecksPassed, rep.ChecksTotal, rep.Note)
	}
	p := rep.Pulls[0]
	for _, want := range []string{"needs a person", "the drill pool", "does not hold 6 of the 6 eligible rows", "and 1 more"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("pull %s: %q; want %q in it", p.Name, p.Detail, want)
		}
	}
	// Five of the six are named, whichever the read began at.
	named := 0
	for _, r := range rows {
		if strings.Contains(p.Detail, r.ID) {
			named++
		}
	}
	if named != 5 {
		t.Errorf("pull %s names %d of the 6 rows, want 5: %q", p.Name, named, p.Detail)
	}
	if !strings.Contains(rep.Note, "the drill pool holds 0 rows") || strings.Contains(rep.Note, "nothing to drill") {
		t.Errorf("note %q; want the pool's count, not nothing to drill", rep.Note)
	}
}

// The operator takes one row out of the pool, so that no monthly drill
// can pick it. The drill reads every row of a small row store, finds it
// and fails naming it, rather than drill the others as if the pool were
// whole.
func TestMonthlyDrillFailsOnARowTakenOutOfThePool(t *testing.T) {
	l, rows := editedLedger(t, []string{"A-1", "A-2", "A-3", "A-4", "A-5", "A-6"}, func(rows []*ledger.Row) []func(*bbolt.Tx) error {
		return []func(*bbolt.Tx) error{tamper.DropFromDrillPool(rows[3].ID)}
	})
	rep := monthly(t, l)
	if len(rep.Rows) != 0 || rep.ChecksTotal == 0 || rep.ChecksPassed != 0 {
		t.Fatalf("rows %d, checks %d/%d, note %q; want no row drilled and the drill failed", len(rep.Rows), rep.ChecksPassed, rep.ChecksTotal, rep.Note)
	}
	if p := rep.Pulls[0]; !strings.Contains(p.Detail, "does not hold 1 of the 6 eligible rows") || !strings.Contains(p.Detail, rows[3].ID) {
		t.Errorf("pull %s: %q; want the row left out named", p.Name, p.Detail)
	}
	if !strings.Contains(rep.Note, "the drill pool holds 5 rows") {
		t.Errorf("note %q; want the pool's count", rep.Note)
	}
}

// poolLedger records a receipt minted from each of specs in a logged
// ledger (loggedLedger), logs them, applies edit to the closed bbolt
// file, as an operator who holds it can, and opens the ledger again. It
// returns the ledger and the rows as recorded.
func poolLedger(t *testing.T, specs []pacttest.Spec, edit func(rows []*ledger.Row) []func(*bbolt.Tx) error) (*ledger.Ledger, []*ledger.Row) {
	t.Helper()
	ctx := context.Background()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	dir := t.TempDir()
	open := loggedLedger(t, sc, dir)
	l, store := open()
	var rows []*ledger.Row
	for _, spec := range specs {
		r := sc.Mint(spec)
		row, _, err := l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	if _, err := l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tamper.Apply(filepath.Join(dir, "l.db"), edit(rows)...); err != nil {
		t.Fatal(err)
	}
	l, store = open()
	t.Cleanup(func() { store.Close() })
	return l, rows
}

// lookups are n specs of read-only turns, which the monthly drill never
// samples.
func lookups(n int) []pacttest.Spec {
	var specs []pacttest.Spec
	for i := range n {
		specs = append(specs, pacttest.Spec{Target: fmt.Sprintf("RO-%d", i), User: fmt.Sprintf("acct-%d", i), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	}
	return specs
}

// A row store larger than the drill reads: an emptied pool is found among
// the rows read from a random point, and, when those hold no eligible row
// (most rows read-only turns), among the larger read the drill makes of an
// empty pool before it says there is nothing to drill.
func TestMonthlyDrillReadsPastAnEmptyPool(t *testing.T) {
	for _, tc := range []struct {
		name        string
		read, empty int
		specs       []pacttest.Spec
		want        string
	}{
		{"eligible rows among those read", 3, 3, []pacttest.Spec{{Target: "A-1"}, {Target: "A-2"}, {Target: "A-3"}, {Target: "A-4"}, {Target: "A-5"}, {Target: "A-6"}},
			"does not hold 3 of the 3 eligible rows among 3 rows read from a random point of the row store"},
		{"one eligible row among many read-only turns", 1, 100, append(lookups(12), pacttest.Spec{Target: "A-1"}),
			"does not hold the one eligible row among "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drill.SetPoolRead(t, tc.read, tc.empty)
			l, _ := poolLedger(t, tc.specs, func([]*ledger.Row) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.EmptyDrillPool()}
			})
			whole := 0
			for range 20 { // from random points
				rep := monthly(t, l)
				if rep.ChecksTotal == 0 || rep.ChecksPassed != 0 || !strings.Contains(rep.Pulls[0].Detail, tc.want) {
					t.Fatalf("checks %d/%d, pulls %+v, note %q; want the drill failed with %q", rep.ChecksPassed, rep.ChecksTotal, rep.Pulls, rep.Note, tc.want)
				}
				if strings.Contains(rep.Pulls[0].Detail, "(all read)") {
					whole++
				}
			}
			if wantWhole := tc.empty >= len(tc.specs); (whole > 0) != wantWhole {
				t.Errorf("%d of 20 drills read every row; want some: %v", whole, wantWhole)
			}
		})
	}
}

// A pool that agrees with the row store is stated in the report's note:
// its count against the eligible rows read, all of a small row store or
// those read from a random point of a larger one. A row the pool holds
// that the drill may not sample is named, and hides no eligible row.
func TestMonthlyDrillStatesThePoolAgainstTheRowStore(t *testing.T) {
	specs := append(lookups(3), pacttest.Spec{Target: "A-1"}, pacttest.Spec{Target: "A-2", User: "acct-9"})
	l, rows := poolLedger(t, specs, func(rows []*ledger.Row) []func(*bbolt.Tx) error {
		return []func(*bbolt.Tx) error{tamper.AddToDrillPool(rows[1].ID)}
	})
	rep := monthly(t, l)
	for _, want := range []string{
		"the drill pool holds 3 rows, and each of the 2 eligible rows among the row store's 5 rows (all read) is in it",
		"it also holds 1 row the drill may not sample (row " + rows[1].ID + ": a read-only turn), which ledgerctl fsck reports",
	} {
		if !strings.Contains(rep.Note, want) {
			t.Errorf("note %q; want %q", rep.Note, want)
		}
	}

	drill.SetPoolRead(t, 2, 2)
	rep = monthly(t, l)
	if want := "rows read from a random point of the row store"; !strings.Contains(rep.Note, want) {
		t.Errorf("note %q; want %q", rep.Note, want)
	}
}
