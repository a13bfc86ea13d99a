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

// Rows removed with their entries left, as a removal before prev could
// leave them: a listing that reaches one fails. DropLeftovers removes
// those entries and only those, moves a removed row's leaf index to the
// log's index by its id (read from its row number by id, or from the
// leaf), keeps one whose id it cannot read, and finds nothing more the
// second time.
func TestDropLeftovers(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows := manyRows(1200)
	update(t, s, func(tx ledger.Tx) error {
		for _, r := range rows {
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	// Three rows go, with their leaves at 7, 8 and 9: the first keeps its
	// number by id, the second's leaf names it, the third has neither.
	gone := []int{100, 200, 300}
	if err := s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{tx: btx, c: s.codec.Load()}
		for i, n := range gone {
			seq := seqKey(uint64(n + 1))
			if err := putRowLeaf(t.b(bRowLeaves), seq, uint64(7+i)); err != nil {
				return err
			}
			if i < 2 {
				if err := t.b(bLogLeaves).Put(u64(uint64(7+i)), storedLeaf(rows[n].ID, []byte("leaf"))); err != nil {
					return err
				}
			}
			if i > 0 {
				if _, err := idDelete(t.b(bRowSeq), 32, idKey(rows[n].ID)); err != nil {
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
			_, _, err := tx.List(ledger.Query{GrantID: rows[gone[0]].GrantID, PageSize: len(rows)})
			return err
		})
	}
	if err := list(); err == nil || !strings.Contains(err.Error(), "indexed but not stored") {
		t.Fatalf("listing a grant with a removed row's entry: %v", err)
	}

	dropped, err := s.DropLeftovers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Leftovers{string(bRowSeq): 1, string(bReqJWT): 3, string(bRowLeaves): 2}
	for _, n := range gone {
		for _, e := range indexEntries(rows[n]) {
			want[string(e.bucket)]++
		}
		want[string(bExpiry)]++
	}
	for _, b := range slices.Sorted(maps.Keys(want)) {
		if dropped[b] != want[b] {
			t.Errorf("removed %d entries from %s, want %d", dropped[b], b, want[b])
		}
	}
	if dropped.Total() != want.Total() {
		t.Errorf("removed %v, want %v", dropped, want)
	}
	if err := list(); err != nil {
		t.Errorf("listing the grant after: %v", err)
	}
	var left []*ledger.Row
	var seqs []uint64
	for i, r := range rows {
		if !slices.Contains(gone, i) {
			left, seqs = append(left, r), append(seqs, uint64(i+1))
		}
	}
	checkIndexes(t, s, left, seqs)
	if err := s.View(t.Context(), func(ltx ledger.Tx) error {
		t2 := ltx.(*tx)
		for i, n := range gone[:2] {
			if idx, err := t2.LeafIndex(rows[n].ID); err != nil || idx != int64(7+i) {
				t.Errorf("removed row %d: leaf index %d, %v; want %d", n, idx, err, 7+i)
			}
		}
		if v, err := rowLeaf(t2.b(bRowLeaves), seqKey(uint64(gone[2]+1))); err != nil || v == nil {
			t.Errorf("the leaf index of a removed row whose id is not known was not kept: %x, %v", v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if again, err := s.DropLeftovers(t.Context()); err != nil || again.Total() != 0 {
		t.Errorf("a second pass removed %v, %v", again, err)
	}
}
