package bolt

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// A removed row as a removal before prev could leave it: its row gone,
// its entries left, with its leaf index at leaf. byID keeps its number by
// id; ref, when not empty, is the ref of the leaf the file holds; logged,
// when not zero, is a leaf the log's index by its id already names.
type goneRow struct {
	n      int
	leaf   uint64
	byID   bool
	ref    string
	logged uint64
	moved  bool // DropLeftovers moves its leaf index to the log's index
	owner  int  // by the id of this row (0: its own)
	twoIDs bool // a second row number by id names it too
}

// Rows removed with their entries left: a listing that reaches one
// fails. DropLeftovers removes those entries and only those, and moves a
// removed row's leaf index to the log's index by its id (the leaf's ref,
// else its row number by id) when the id names no stored row, the log's
// index by it no other leaf and no other leaf index moves to it; it
// keeps the rest where they are, and decides the same the second time,
// and after the leaves are pruned.
func TestDropLeftovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // the first store, closed again harmlessly
	rows := manyRows(1200)
	update(t, s, func(tx ledger.Tx) error {
		for _, r := range rows {
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	// The rows' numbers by id and request JWTs in their buckets, where
	// an earlier version's removal left them.
	s = reopenSettled(t, s, path)
	gone := []goneRow{
		{n: 100, leaf: 7, byID: true, ref: rows[100].ID, moved: true},
		{n: 200, leaf: 8, ref: rows[200].ID, moved: true},
		{n: 300, leaf: 9}, // no id known
		{n: 400, leaf: 10, byID: true, moved: true},       // its leaf pruned from the file
		{n: 500, leaf: 11, byID: true, ref: rows[501].ID}, // the leaf's id, a stored row's, wins
		{n: 600, leaf: 12, ref: rows[600].ID, logged: 99}, // the log's index names another leaf
		{n: 700, leaf: 13, ref: rows[701].ID},             // the leaf's id is a stored row's
		{n: 800, leaf: 14, byID: true, ref: rows[900].ID}, // two leaves of one id: the row numbered last moves
		{n: 900, leaf: 15, ref: rows[900].ID, moved: true},
		{n: 1000, leaf: 16, byID: true}, // its leaf pruned; the leaf of the row after names it
		{n: 1100, leaf: 17, ref: rows[1000].ID, moved: true, owner: 1000},
		{n: 1150, leaf: 18, byID: true, twoIDs: true}, // its leaf pruned, two ids for it
	}
	if err := s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{tx: btx, c: s.codec.Load()}
		for _, g := range gone {
			seq := seqKey(uint64(g.n + 1))
			if err := putRowLeaf(t.b(bRowLeaves), seq, g.leaf); err != nil {
				return err
			}
			if g.ref != "" {
				if err := t.b(bLogLeaves).Put(u64(g.leaf), storedLeaf(g.ref, []byte("leaf"))); err != nil {
					return err
				}
			}
			if g.logged != 0 {
				if err := t.b(bLogIndex).Put(idKey(rows[g.n].ID), u64(g.logged)); err != nil {
					return err
				}
			}
			if !g.byID {
				if _, err := idDelete(t.b(bRowSeq), 32, idKey(rows[g.n].ID)); err != nil {
					return err
				}
			}
			if g.twoIDs {
				if err := idPut(t.b(bRowSeq), 32, idKey(strings.Repeat("ef", 32)), seq); err != nil {
					return err
				}
			}
			if err := t.b(bRowData).Delete(seq); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	list := func() error {
		return s.View(t.Context(), func(tx ledger.Tx) error {
			_, _, err := tx.List(ledger.Query{GrantID: rows[gone[0].n].GrantID, PageSize: len(rows)})
			return err
		})
	}
	if err := list(); err == nil || !strings.Contains(err.Error(), "indexed but not stored") {
		t.Fatalf("listing a grant with a removed row's entry: %v", err)
	}

	got, err := s.DropLeftovers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Leftovers{Removed: map[string]int{string(bReqJWT): len(gone)}}
	for _, g := range gone {
		for _, e := range indexEntries(rows[g.n]) {
			want.Removed[string(e.bucket)]++
		}
		want.Removed[string(bExpiry)]++
		if g.byID {
			want.Removed[string(bRowSeq)]++
		}
		if g.twoIDs {
			want.Removed[string(bRowSeq)]++
		}
		if g.moved {
			want.Moved++
		} else {
			want.Kept++
		}
	}
	if !maps.Equal(got.Removed, want.Removed) || got.Moved != want.Moved || got.Kept != want.Kept {
		t.Errorf("DropLeftovers did %+v, want %+v", got, want)
	}
	if err := list(); err != nil {
		t.Errorf("listing the grant after: %v", err)
	}
	var left []*ledger.Row
	var seqs []uint64
	for i, r := range rows {
		if !slices.ContainsFunc(gone, func(g goneRow) bool { return g.n == i }) {
			left, seqs = append(left, r), append(seqs, uint64(i+1))
		}
	}
	checkIndexes(t, s, left, seqs, len(left))
	if err := s.View(t.Context(), func(ltx ledger.Tx) error {
		t2 := ltx.(*tx)
		for _, g := range gone {
			kept, err := rowLeaf(t2.b(bRowLeaves), seqKey(uint64(g.n+1)))
			if err != nil {
				return err
			}
			if g.moved {
				owner := g.n
				if g.owner != 0 {
					owner = g.owner
				}
				if idx, err := t2.LeafIndex(rows[owner].ID); err != nil || idx != int64(g.leaf) {
					t.Errorf("removed row %d: leaf index %d, %v; want %d", owner, idx, err, g.leaf)
				}
				if kept != nil {
					t.Errorf("removed row %d: its leaf index is still among the rows'", g.n)
				}
				continue
			}
			if kept == nil {
				t.Errorf("removed row %d: its leaf index was not kept", g.n)
			}
			if g.logged != 0 {
				if v := t2.get(bLogIndex, idKey(rows[g.n].ID)); string(v) != string(u64(g.logged)) {
					t.Errorf("removed row %d: the log's index by its id holds %x, want leaf %d", g.n, v, g.logged)
				}
			}
		}
		// The stored rows whose ids two leaves named keep their own.
		for _, n := range []int{501, 701} {
			if _, err := t2.LeafIndex(rows[n].ID); err == nil {
				t.Errorf("stored row %d was given a leaf", n)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	laterPass := func(what string) {
		t.Helper()
		again, err := s.DropLeftovers(t.Context())
		if err != nil || again.Total() != 0 || again.Moved != 0 || again.Kept != want.Kept {
			t.Errorf("%s did %+v, %v; want nothing removed or moved and %d kept", what, again, err, want.Kept)
		}
	}
	laterPass("a second pass")
	// With the leaves pruned, as the log does once they are published.
	if err := s.db.Update(func(btx *bolt.Tx) error {
		for _, g := range gone {
			if err := btx.Bucket(bLogLeaves).Delete(u64(g.leaf)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	laterPass("a pass after the leaves were pruned")
}
