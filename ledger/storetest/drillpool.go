package storetest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// poolView is what the drill pool holds: its count, first and last
// positions, and each position with its row's id.
type poolView struct {
	n           int
	first, last uint64
	ids         map[uint64]string
}

func readPool(t *testing.T, s ledger.Store) poolView {
	t.Helper()
	var v poolView
	view(t, s, func(tx ledger.Tx) error {
		var err error
		if v.n, v.first, v.last, err = tx.DrillPool(); err != nil {
			return err
		}
		var positions []uint64
		if err := tx.DrillPoolPositions(func(p uint64) { positions = append(positions, p) }); err != nil {
			return err
		}
		if !slices.IsSorted(positions) || len(slices.Compact(slices.Clone(positions))) != len(positions) {
			return fmt.Errorf("positions not ascending and distinct: %v", positions)
		}
		if len(positions) != v.n {
			return fmt.Errorf("DrillPool counts %d rows, the walk %d", v.n, len(positions))
		}
		if v.n > 0 && (positions[0] != v.first || positions[len(positions)-1] != v.last) {
			return fmt.Errorf("DrillPool gives positions %d to %d, the walk %d to %d", v.first, v.last, positions[0], positions[len(positions)-1])
		}
		// Positions that hold no row are left out of the answer.
		probe := append(slices.Clone(positions), v.last+1, v.last+1000)
		if v.first > 1 {
			probe = append(probe, v.first-1)
		}
		rows, err := tx.DrillPoolRows(probe)
		if err != nil {
			return err
		}
		if len(rows) != len(positions) {
			return fmt.Errorf("DrillPoolRows found %d rows at %d positions and 2 or 3 empty ones, want %d", len(rows), len(probe), len(positions))
		}
		v.ids = map[uint64]string{}
		for p, r := range rows {
			v.ids[p] = r.ID
		}
		return nil
	})
	return v
}

// checkMembers fails t unless DrillPoolMembers, asked of every row of
// rows and of an id no row holds, gives the position v holds each pooled
// one at, and nothing for the others.
func checkMembers(t *testing.T, s ledger.Store, v poolView, rows []*ledger.Row) {
	t.Helper()
	ids := []string{fmt.Sprintf("%064x", 7)}
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	var got map[string]uint64
	view(t, s, func(tx ledger.Tx) error {
		var err error
		got, err = tx.DrillPoolMembers(ids)
		return err
	})
	want := map[string]uint64{}
	for p, id := range v.ids {
		if slices.Contains(ids, id) {
			want[id] = p
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("DrillPoolMembers of %d ids: %v, want %v", len(ids), got, want)
	}
}

func drillableIDs(rows []*ledger.Row) []string {
	var ids []string
	for _, r := range rows {
		if ledger.Drillable(r) {
			ids = append(ids, r.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

func (v poolView) sortedIDs() []string {
	var ids []string
	for _, id := range v.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// The drill pool holds exactly the rows ledger.Drillable holds for, each
// at a position of its own that no later row takes, and loses a row when
// it is removed; ledger.SampleDrillPool draws from it uniformly, by probes
// when the positions are dense and by one walk when they are sparse.
func testDrillPool(t *testing.T, open opener) {
	s := open.fresh(t)
	if v := readPool(t, s); v.n != 0 {
		t.Fatalf("empty store: pool of %d rows", v.n)
	}
	rows := fixtureRows(40) // every status and class: duplicates and read-only rows among them
	refusal := fixtureRows(41)[40]
	refusal.Kind, refusal.Class, refusal.Status = ledger.KindRefusal, retention.Refused, ledger.Unauthorized
	notKept := fixtureRows(42)[41]
	notKept.Class, notKept.Status, notKept.EvidenceNotKept = retention.MoneyMoved, ledger.Authorized, "not kept"
	rows = append(rows, refusal, notKept)
	createRows(t, s, rows)
	v := readPool(t, s)
	if got, want := v.sortedIDs(), drillableIDs(rows); !slices.Equal(got, want) {
		t.Fatalf("pool holds %d rows %v, want the %d drillable ones %v", len(got), got, len(want), want)
	}
	if slices.Contains(v.sortedIDs(), refusal.ID) || slices.Contains(v.sortedIDs(), notKept.ID) {
		t.Fatal("a refusal or a row without its evidence is in the pool")
	}
	checkMembers(t, s, v, rows)

	// Removing a pooled row takes it out; a later row gets a new position.
	var gone *ledger.Row
	for _, r := range rows {
		if ledger.Drillable(r) {
			gone = r
			break
		}
	}
	update(t, s, func(tx ledger.Tx) error { return tx.RemoveRow(gone, ledger.Tombstone{ID: gone.ID}) })
	late := fixtureRows(43)[42]
	late.Status, late.Class = ledger.Authorized, retention.MoneyMoved
	createRows(t, s, []*ledger.Row{late})
	after := readPool(t, s)
	if after.n != v.n || slices.Contains(after.sortedIDs(), gone.ID) || !slices.Contains(after.sortedIDs(), late.ID) {
		t.Fatalf("after removing %s and adding %s: pool %v", gone.ID[:8], late.ID[:8], after.sortedIDs())
	}
	for p, id := range after.ids {
		if id == late.ID {
			if _, taken := v.ids[p]; taken {
				t.Fatalf("the new row took position %d, held before by %s", p, v.ids[p][:8])
			}
		}
	}
	checkMembers(t, s, after, append(rows, late))

	// In a write transaction, a row created in it is a member at once,
	// and one removed in it is not.
	again := fixtureRows(44)[43]
	again.Status, again.Class = ledger.Authorized, retention.MoneyMoved
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.CreateRow(again); err != nil {
			return err
		}
		if err := tx.RemoveRow(late, ledger.Tombstone{ID: late.ID}); err != nil {
			return err
		}
		got, err := tx.DrillPoolMembers([]string{again.ID, late.ID})
		if err != nil {
			return err
		}
		if _, ok := got[again.ID]; !ok || len(got) != 1 {
			return fmt.Errorf("DrillPoolMembers of a row created and one removed in the transaction: %v, want the created one alone", got)
		}
		return nil
	})

	t.Run("sample", func(t *testing.T) { testSample(t, open) })
}

// walkCounter counts walks of the pool's positions.
type walkCounter struct {
	ledger.Rows
	walks int
}

func (w *walkCounter) DrillPoolPositions(fn func(uint64)) error {
	w.walks++
	return w.Rows.DrillPoolPositions(fn)
}

func testSample(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(100)
	var pooled []*ledger.Row
	for _, r := range rows {
		r.Status, r.Class = ledger.Authorized, retention.MoneyMoved
		pooled = append(pooled, r)
	}
	createRows(t, s, rows)
	rng := rand.New(rand.NewPCG(7, 11))
	sample := func(n int) ([]*ledger.Row, int, int) {
		t.Helper()
		var got []*ledger.Row
		var count int
		w := &walkCounter{}
		view(t, s, func(tx ledger.Tx) error {
			w.Rows = tx
			var err error
			got, count, err = ledger.SampleDrillPool(w, n, rng.IntN)
			return err
		})
		ids := map[string]bool{}
		for _, r := range got {
			if ids[r.ID] || !ledger.Drillable(r) {
				t.Fatalf("sample of %d: row %s twice or not drillable", n, r.ID[:8])
			}
			ids[r.ID] = true
		}
		return got, count, w.walks
	}
	uniform := func(name string, rows []*ledger.Row, n, runs int, wantWalks bool) {
		t.Helper()
		counts := map[string]int{}
		for range runs {
			got, count, walks := sample(n)
			if count != len(rows) || len(got) != min(n, count) {
				t.Fatalf("%s: %d rows of a pool of %d, want %d of %d", name, len(got), count, min(n, count), len(rows))
			}
			if (walks > 0) != wantWalks {
				t.Fatalf("%s: %d walks of the pool, want walks: %v", name, walks, wantWalks)
			}
			for _, r := range got {
				counts[r.ID]++
			}
		}
		// Each row expects runs*n/len(rows) picks (100 and 240 here); a
		// uniform sampler stays within half of that to twice that (5
		// standard deviations and more).
		want := float64(runs*n) / float64(len(rows))
		for _, r := range rows {
			if c := float64(counts[r.ID]); c < want/2 || c > want*2 {
				t.Fatalf("%s: row %s picked %v times, want about %.0f", name, r.ID[:8], c, want)
			}
		}
	}
	if got, count, _ := sample(0); len(got) != 0 || count != len(pooled) {
		t.Fatalf("sample of 0: %d rows, count %d", len(got), count)
	}
	if got, _, _ := sample(len(pooled) + 5); len(got) != len(pooled) {
		t.Fatalf("sample beyond the pool: %d rows of %d", len(got), len(pooled))
	}
	// Dense: probes alone, no walk.
	uniform("dense pool", pooled, 10, 1000, false)

	// Sparse: keep one row in 20, spread out.
	var kept, removed []*ledger.Row
	for i, r := range pooled {
		if i%20 == 3 {
			kept = append(kept, r)
		} else {
			removed = append(removed, r)
		}
	}
	update(t, s, func(tx ledger.Tx) error {
		for _, r := range removed {
			if err := tx.RemoveRow(r, ledger.Tombstone{ID: r.ID}); err != nil {
				return err
			}
		}
		return nil
	})
	uniform("sparse pool", kept, 3, 400, true)
}
