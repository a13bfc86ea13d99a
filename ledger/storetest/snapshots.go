package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pactledger/pactledger/ledger"
)

// testSnapshotLinks: SnapshotInUse says whether a stored row names a
// snapshot, as its brand key's or its agent's. CreateRow links a row to
// what it names (within its own transaction already), RemoveRow unlinks
// it, a row naming one snapshot twice is one link, a create that fails
// links nothing, rows written at once by many writers are all linked, and
// the links survive a restart.
func testSnapshotLinks(t *testing.T, open opener) {
	dir := t.TempDir()
	s := open.start(t, dir)
	rows := fixtureRows(4)
	a, b, c, d := rows[0], rows[1], rows[2], rows[3]
	shared, onlyA, twice, failed := hexID("snapshot shared"), hexID("snapshot only a"), hexID("snapshot named twice"), hexID("snapshot of a failed create")
	a.BrandKey.JWKSSnapshot, a.Agent.JWKSSnapshot = shared, onlyA
	b.BrandKey.JWKSSnapshot = shared
	c.BrandKey.JWKSSnapshot, c.Agent.JWKSSnapshot = twice, twice
	// d names none.

	inUse := func(want map[string]bool, what string) {
		t.Helper()
		for _, read := range []struct {
			name string
			run  func(*testing.T, ledger.Store, func(ledger.Tx) error)
		}{{"View", view}, {"Update", update}} {
			read.run(t, s, func(tx ledger.Tx) error {
				for id, w := range want {
					got, err := tx.SnapshotInUse(id)
					if err != nil {
						return fmt.Errorf("SnapshotInUse(%s): %w", id, err)
					}
					if got != w {
						t.Errorf("%s: SnapshotInUse(%s) in %s = %v, want %v", what, id[:8], read.name, got, w)
					}
				}
				return nil
			})
		}
	}
	inUse(map[string]bool{shared: false, onlyA: false, twice: false}, "before any row")

	update(t, s, func(tx ledger.Tx) error {
		if err := tx.CreateRow(a); err != nil {
			return err
		}
		for id, want := range map[string]bool{shared: true, onlyA: true, twice: false} {
			if got, err := tx.SnapshotInUse(id); err != nil || got != want {
				t.Errorf("SnapshotInUse(%s) in the transaction that created a: %v, %v; want %v", id[:8], got, err, want)
			}
		}
		for _, r := range []*ledger.Row{b, c, d} {
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	all := map[string]bool{shared: true, onlyA: true, twice: true, failed: false, hexID("never named"): false}
	inUse(all, "after creating a, b, c and d")

	dup := *b
	dup.BrandKey.JWKSSnapshot = failed
	err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(&dup) })
	if err == nil {
		t.Fatalf("CreateRow of an id already stored: no error")
	}
	inUse(all, "after a create that failed")

	remove := func(r *ledger.Row) {
		t.Helper()
		update(t, s, func(tx ledger.Tx) error { return tx.RemoveRow(r, tombstoneOf(r)) })
	}
	remove(a)
	inUse(map[string]bool{shared: true, onlyA: false, twice: true}, "after removing a (b still names the shared one)")
	remove(c)
	inUse(map[string]bool{shared: true, twice: false}, "after removing c (it named one snapshot twice)")

	// Many writers at once, each a row naming one snapshot.
	many := fixtureRows(4 + writers)[4:]
	crowd := hexID("snapshot of many")
	errs := make([]error, len(many))
	var wg sync.WaitGroup
	for i, r := range many {
		r.BrandKey.JWKSSnapshot = crowd
		wg.Go(func() { errs[i] = s.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(r) }) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, r := range many[1:] {
		remove(r)
	}
	inUse(map[string]bool{crowd: true}, fmt.Sprintf("after %d writers at once and removing all but one", len(many)))

	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	s = open.start(t, dir)
	inUse(map[string]bool{shared: true, twice: false, crowd: true}, "after a restart")
	remove(many[0])
	remove(b)
	inUse(map[string]bool{shared: false, crowd: false}, "after removing the last rows naming them")
}
