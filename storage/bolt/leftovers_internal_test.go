package bolt

import (
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// Entries naming a row the file does not store, as a removal before
// prev could leave, make a listing that reaches one fail; DropLeftovers
// removes them, and only them, and finds none the second time.
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
	// A number past every row's, inside the grant's and time index's
	// runs, with a leaf index, a row id and a request JWT hash naming it.
	gone := seqKey(5000)
	mid := rows[600]
	if err := s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{tx: btx, c: s.codec.Load()}
		at := indexPosting(mid.IssuedAt, gone)
		for _, e := range []struct {
			bucket, prefix []byte
			p              posting
		}{
			{ixGrant, indexPrefix(mid.GrantID), at},
			{ixTime, indexPrefix(""), at},
			{bRowLeaves, nil, posting{5000, 77}},
		} {
			if err := insertEntry(t.b(e.bucket), e.prefix, e.p); err != nil {
				return err
			}
		}
		if err := idPut(t.b(bRowSeq), 32, idKey(strings.Repeat("ab", 32)), gone); err != nil {
			return err
		}
		return idPut(t.b(bReqJWT), reqKeyLen, reqKeys(strings.Repeat("cd", 32))[0], gone)
	}); err != nil {
		t.Fatal(err)
	}
	list := func() error {
		return s.View(t.Context(), func(tx ledger.Tx) error {
			_, _, err := tx.List(ledger.Query{GrantID: mid.GrantID, PageSize: len(rows)})
			return err
		})
	}
	if err := list(); err == nil || !strings.Contains(err.Error(), "indexed but not stored") {
		t.Fatalf("listing the grant with a leftover entry: %v", err)
	}

	dropped, err := s.DropLeftovers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Leftovers{string(ixGrant): 1, string(ixTime): 1, string(bRowLeaves): 1, string(bRowSeq): 1, string(bReqJWT): 1}
	if len(dropped) != len(want) || dropped.Total() != want.Total() {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	for b, n := range want {
		if dropped[b] != n {
			t.Errorf("dropped %d from %s, want %d", dropped[b], b, n)
		}
	}
	if err := list(); err != nil {
		t.Errorf("listing the grant after: %v", err)
	}
	seqs := make([]uint64, len(rows))
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	checkIndexes(t, s, rows, seqs)
	if again, err := s.DropLeftovers(t.Context()); err != nil || again.Total() != 0 {
		t.Errorf("a second pass dropped %v, %v", again, err)
	}
}
