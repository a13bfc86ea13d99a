package bolt

import (
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The pool's bitmap across entry boundaries: the count, first and last,
// the walk, point tests, and an entry deleted with its last bit.
func TestPoolBitmap(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "p.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(btx *bolt.Tx) error {
		b, err := btx.CreateBucket(bDrillPool)
		if err != nil {
			return err
		}
		pool := &tx{tx: btx}
		check := func(what string, want []uint64) {
			t.Helper()
			n, first, last, err := pool.DrillPool()
			if err != nil {
				t.Fatal(err)
			}
			var walked []uint64
			if err := pool.DrillPoolPositions(func(p uint64) { walked = append(walked, p) }); err != nil {
				t.Fatal(err)
			}
			if n != len(want) || !slices.Equal(walked, want) || (n > 0 && (first != want[0] || last != want[n-1])) {
				t.Fatalf("%s: count %d, first %d, last %d, walk %v; want %v", what, n, first, last, walked, want)
			}
			for p := range uint64(4 * poolChunk) {
				if got := poolHas(b, p); got != slices.Contains(want, p) {
					t.Fatalf("%s: poolHas(%d) = %v", what, p, got)
				}
			}
		}
		set := []uint64{1, 7, 8, poolChunk - 1, poolChunk, 2*poolChunk - 1, 3*poolChunk + 5}
		for _, n := range set {
			if err := setPoolBit(b, n, true); err != nil {
				return err
			}
		}
		check("set", set)
		if err := setPoolBit(b, 8, true); err != nil { // again: no change
			return err
		}
		for _, n := range []uint64{poolChunk, 2*poolChunk - 1, 2 * poolChunk} { // the second entry emptied; 2*poolChunk was never set
			if err := setPoolBit(b, n, false); err != nil {
				return err
			}
		}
		check("cleared", []uint64{1, 7, 8, poolChunk - 1, 3*poolChunk + 5})
		if k, _ := poolKey(poolChunk); b.Get(k) != nil {
			t.Error("an entry with no bit set is still stored")
		}
		if n := entries(b); n != 2 {
			t.Errorf("%d entries, want 2", n)
		}
		for _, n := range []uint64{1, 7, 8, poolChunk - 1, 3*poolChunk + 5} {
			if err := setPoolBit(b, n, false); err != nil {
				return err
			}
		}
		if n, _, _, err := pool.DrillPool(); n != 0 || err != nil || entries(b) != 0 {
			t.Errorf("emptied pool: count %d, %d entries, %v", n, entries(b), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// entries counts a bucket's keys (Stats does not see a write
// transaction's changes).
func entries(b *bolt.Bucket) int {
	n := 0
	_ = b.ForEach(func(_, _ []byte) error { n++; return nil })
	return n
}
