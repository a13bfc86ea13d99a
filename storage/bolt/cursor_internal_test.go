package bolt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// keyN is the i-th key of thousandKeys' bucket.
func keyN(i int) []byte { return fmt.Appendf(nil, "k%06d", i) }

// thousandKeys is a new bbolt file with bucket name holding keyN(0) to
// keyN(999), 100 bytes each: about 30 leaves.
func thousandKeys(t *testing.T) (db *bolt.DB, name []byte) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "p.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	name = []byte("b")
	if err := db.Update(func(btx *bolt.Tx) error {
		b, err := btx.CreateBucket(name)
		if err != nil {
			return err
		}
		for i := range 1000 {
			if err := b.Put(keyN(i), make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return db, name
}

// prev steps back over leaves a write transaction emptied, at the
// bucket's start and in its middle, where bbolt's Prev stops.
func TestPrevStepsOverEmptiedLeaves(t *testing.T) {
	db, name := thousandKeys(t)
	defer db.Close()
	if err := db.Update(func(btx *bolt.Tx) error {
		b := btx.Bucket(name)
		// Whole leaves of about 35 keys: the first ones, and several in
		// the middle.
		for _, r := range [][2]int{{0, 120}, {300, 500}} {
			for i := r[0]; i < r[1]; i++ {
				if err := b.Delete(keyN(i)); err != nil {
					return err
				}
			}
		}
		var left [][]byte
		for k, _ := b.Cursor().First(); k != nil; k, _ = b.Cursor().Seek(append(bytes.Clone(k), 0)) {
			left = append(left, bytes.Clone(k))
		}
		if len(left) != 1000-320 {
			t.Fatalf("%d keys left, want %d", len(left), 1000-320)
		}
		misses := 0
		c := b.Cursor()
		for i, k := range left {
			c.Seek(k)
			if raw, _ := b.Cursor().Seek(k); raw == nil {
				t.Fatalf("%s not found", k)
			}
			raw := b.Cursor()
			raw.Seek(k)
			rk, _ := raw.Prev()
			got, _ := prev(c, k)
			var want []byte
			if i > 0 {
				want = left[i-1]
			}
			if !bytes.Equal(got, want) {
				t.Errorf("prev from %s: %q, want %q", k, got, want)
			}
			if !bytes.Equal(rk, want) {
				misses++
			}
		}
		// All of them, newest first, through one cursor.
		var back [][]byte
		for k, _ := c.Last(); k != nil; k, _ = prev(c, k) {
			back = append(back, bytes.Clone(k))
		}
		slices.Reverse(back)
		if !slices.EqualFunc(back, left, bytes.Equal) {
			t.Errorf("walking back read %d keys, want the %d there", len(back), len(left))
		}
		if misses == 0 {
			t.Error("bbolt's Prev found every key before an emptied leaf: the test no longer empties one, or bbolt now steps over them and prev's second look can go")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// manyRows are n rows with index values shared among many of them, a
// quarter issued up to an hour late, up to three targets each, and some
// request JWT hashes sharing their short key with the row before's.
func manyRows(n int) []*ledger.Row {
	rng := rand.New(rand.NewPCG(7, 7))
	at := time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC)
	var out []*ledger.Row
	for i := range n {
		id := sha256.Sum256(fmt.Appendf(nil, "row %d", i))
		req := sha256.Sum256(fmt.Appendf(nil, "request %d", i))
		if i%97 == 3 && i > 3 {
			before := sha256.Sum256(fmt.Appendf(nil, "request %d", i-1))
			copy(req[:reqKeyLen], before[:reqKeyLen])
		}
		issued := at.Add(time.Duration(i) * time.Millisecond)
		if rng.IntN(4) == 0 {
			issued = issued.Add(-time.Duration(rng.IntN(3600)) * time.Second)
		}
		r := &ledger.Row{ID: hex.EncodeToString(id[:]), Kind: ledger.KindReceipt, Status: ledger.Authorized,
			Principal: fmt.Sprint("p", i%3), GrantID: fmt.Sprint("g", i%2), IssuedAt: issued,
			RetainUntil: issued.Add(time.Duration(i%5+1) * 24 * time.Hour), RequestJWTSHA256: hex.EncodeToString(req[:])}
		for j := range i % 4 {
			r.Actions = append(r.Actions, verifier.RowAction{Tool: "t", Target: fmt.Sprint("o", (i+j)%3)})
		}
		out = append(out, r)
	}
	return out
}

// checkIndexes fails t unless each index of s holds exactly the entries
// of rows (row i numbered seqs[i]), each row's id and request JWT lead to
// it, and the row numbers by id are ids in all.
func checkIndexes(t *testing.T, s *Store, rows []*ledger.Row, seqs []uint64, ids int) {
	t.Helper()
	want := map[string][]string{}
	for i, r := range rows {
		seq := seqKey(seqs[i])
		for _, e := range indexEntries(r) {
			want[string(e.bucket)] = append(want[string(e.bucket)], string(indexPosting(r.IssuedAt, seq).key(indexPrefix(e.value))))
		}
		want[string(bExpiry)] = append(want[string(bExpiry)], string(indexPosting(r.RetainUntil, seq).key(nil)))
	}
	if err := s.db.View(func(btx *bolt.Tx) error {
		for _, n := range indexBuckets {
			var got []string
			if err := btx.Bucket(n).ForEach(func(k, v []byte) error {
				for ek, err := range IndexRunKeys(k[:len(k)-entryKeyLen], k, v) {
					if err != nil {
						return err
					}
					got = append(got, string(ek))
				}
				return nil
			}); err != nil {
				return err
			}
			w := slices.Clone(want[string(n)])
			slices.Sort(w)
			if !slices.Equal(got, slices.Compact(w)) {
				t.Errorf("index %s: %d entries, want %d", n, len(got), len(w))
			}
		}
		n := 0
		for range (&tx{tx: btx, ids: allIDs(s.pending)}).idEntries(bRowSeq, nil) {
			n++
		}
		if n != ids {
			t.Errorf("%d row numbers by id, want %d", n, ids)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		for i, r := range rows {
			if got, err := tx.RowByRequestJWT(r.RequestJWTSHA256); err != nil || got != r.ID {
				t.Errorf("row %d: its request JWT gives %q, %v", i, got, err)
			}
			if _, err := tx.Row(r.ID); err != nil {
				t.Errorf("row %d: %v", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Thousands of rows created in one commit, which inserts through the
// commit's kept cursors and splits index and id runs as it goes, leave
// the indexes and id buckets as one row a commit does.
func TestManyRowsInOneCommit(t *testing.T) {
	rows := manyRows(4000)
	one, err := Open(filepath.Join(t.TempDir(), "one.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	each, err := Open(filepath.Join(t.TempDir(), "each.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer each.Close()
	update(t, one, func(tx ledger.Tx) error {
		for _, r := range rows {
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	for _, r := range rows {
		update(t, each, func(tx ledger.Tx) error { return tx.CreateRow(r) })
	}
	seqs := make([]uint64, len(rows))
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	checkIndexes(t, one, rows, seqs, len(rows))
	names := append(slices.Clone(indexBuckets), bRowSeq, bReqJWT)
	dump := func(s *Store) map[string]string {
		m := map[string]string{}
		if err := s.db.View(func(btx *bolt.Tx) error {
			for _, n := range names {
				if err := btx.Bucket(n).ForEach(func(k, v []byte) error {
					m[string(n)+"/"+string(k)] = string(v)
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if a, b := dump(one), dump(each); !maps.Equal(a, b) {
		t.Errorf("the indexes and id buckets differ: %d keys after one commit, %d after one a row", len(a), len(b))
	}
}

// Removing most of a file's rows in one transaction, as a sweep of a
// large backlog does, empties whole leaves of the id and index buckets
// before the commit rebalances them: each later row is still found, and
// its entries removed.
func TestRemovingMostRowsInOneCommit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows := manyRows(6000)
	for i := 0; i < len(rows); i += 500 {
		update(t, s, func(tx ledger.Tx) error {
			for _, r := range rows[i : i+500] {
				if err := tx.CreateRow(r); err != nil {
					return err
				}
			}
			return nil
		})
	}
	const removed = 5900
	update(t, s, func(tx ledger.Tx) error {
		for _, r := range rows[:removed] {
			if err := tx.RemoveRow(r, ledger.Tombstone{ID: r.ID}); err != nil {
				return err
			}
		}
		return nil
	})
	seqs := make([]uint64, len(rows)-removed)
	for i := range seqs {
		seqs[i] = uint64(removed + i + 1)
	}
	checkIndexes(t, s, rows[removed:], seqs, len(seqs))
}

// within runs f and fails t if it has not returned in a minute (it is
// left running: a cursor that loops cannot be stopped).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return in a minute", what)
	}
}

// last finds nothing in a bucket of several leaves whose every key the
// transaction deleted, where bbolt's Last loops, and the one key left
// when one is.
func TestLastWhenEveryLeafIsEmptied(t *testing.T) {
	db, name := thousandKeys(t)
	for _, keep := range []int{-1, 0, 500, 999} {
		within(t, fmt.Sprintf("last with key %d left", keep), func() {
			err := db.Update(func(btx *bolt.Tx) error {
				b := btx.Bucket(name)
				for i := range 1000 {
					if i != keep {
						if err := b.Delete(keyN(i)); err != nil {
							return err
						}
					}
				}
				k, _ := last(b.Cursor())
				var want []byte
				if keep >= 0 {
					want = keyN(keep)
				}
				if !bytes.Equal(k, want) {
					t.Errorf("key %d left: last gave %q, want %q", keep, k, want)
				}
				return errors.New("rolled back")
			})
			if err == nil || err.Error() != "rolled back" {
				t.Errorf("key %d left: %v", keep, err)
			}
		})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A commit that removes every row, as a sweep of the last rows can, and
// then writes one, as a write in the same group commit does, returns.
func TestRemovingEveryRowThenWriting(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	rows := manyRows(3001)
	update(t, s, func(tx ledger.Tx) error {
		for _, r := range rows[:3000] {
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	within(t, "the commit", func() {
		update(t, s, func(tx ledger.Tx) error {
			for _, r := range rows[:3000] {
				if err := tx.RemoveRow(r, ledger.Tombstone{ID: r.ID}); err != nil {
					return err
				}
			}
			return tx.CreateRow(rows[3000])
		})
	})
	defer s.Close()
	checkIndexes(t, s, rows[3000:], []uint64{3001}, 1)
}
