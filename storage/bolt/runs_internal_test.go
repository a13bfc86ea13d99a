package bolt

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestIndexRuns checks the runs of an index against a plain sorted list
// of its entries, through random inserts and deletes under three values
// (one a prefix of another's text): appends in time order, late entries,
// equal times, entries inserted twice and deleted twice, and keys of
// layout 5 (runs of one) among the runs. After every step each value's
// entries walked newest first from bounds at random entries, past them all
// and before them all equal the list's, every
// key heads a run of its value, and no run passes maxRunBytes.
func TestIndexRuns(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	values := []string{"a", "ab", "7"}
	want := map[string][]posting{}
	var clock uint64 = 1 << 40
	next := func() posting {
		switch r := rng.IntN(10); {
		case r < 6: // in order, often at the same time
			clock += uint64(rng.IntN(3)) * 1_000_000
		case r < 8: // late
			return posting{clock - uint64(rng.IntN(1<<30)), rng.Uint64N(1 << 20)}
		}
		return posting{clock, rng.Uint64N(1 << 20)}
	}
	check := func(b *bolt.Bucket, step int) {
		t.Helper()
		for _, v := range values {
			prefix := indexPrefix(v)
			ps := want[v]
			// Every bound: before each entry, past all, before all.
			bounds := [][]byte{append([]byte(v), 1), prefix}
			for range min(len(ps), 40) {
				p := ps[rng.IntN(len(ps))]
				bounds = append(bounds, p.key(prefix), p.key(prefix)[:len(prefix)+8])
			}
			for _, bound := range bounds {
				var wantBelow []posting
				for i := len(ps) - 1; i >= 0; i-- {
					if bytes.Compare(ps[i].key(prefix), bound) < 0 {
						wantBelow = append(wantBelow, ps[i])
					}
				}
				rc := &runCursor{c: b.Cursor(), prefix: prefix}
				var got []posting
				p, ok, err := rc.below(bound)
				for ; ok && err == nil; p, ok, err = rc.prev() {
					got = append(got, p)
				}
				if err != nil {
					t.Fatalf("step %d: %q below %x: %v", step, v, bound, err)
				}
				if !slices.Equal(got, wantBelow) {
					t.Fatalf("step %d: %q below %x: %d entries %v, want %d %v", step, v, bound, len(got), got, len(wantBelow), wantBelow)
				}
			}
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			prefix := k[:len(k)-entryKeyLen]
			first, ok := runHead(k, prefix)
			if !ok || !slices.Contains(values, string(prefix[:len(prefix)-1])) {
				t.Fatalf("step %d: key %x heads no run", step, k)
			}
			if len(v) > maxRunBytes {
				t.Fatalf("step %d: run %x holds %d bytes", step, k, len(v))
			}
			if _, err := decodeRun(first, v); err != nil {
				t.Fatalf("step %d: run %x: %v", step, k, err)
			}
		}
	}
	err = db.Update(func(btx *bolt.Tx) error {
		b, err := btx.CreateBucket([]byte("ix"))
		if err != nil {
			return err
		}
		for step := range 6000 {
			v := values[rng.IntN(len(values))]
			prefix := indexPrefix(v)
			ps := want[v]
			switch r := rng.IntN(20); {
			case r < 4 && len(ps) > 0: // delete one
				p := ps[rng.IntN(len(ps))]
				if err := deleteEntry(b, prefix, p); err != nil {
					return err
				}
				if rng.IntN(4) == 0 { // again: nothing more
					if err := deleteEntry(b, prefix, p); err != nil {
						return err
					}
				}
				want[v] = slices.DeleteFunc(ps, func(q posting) bool { return q == p })
			case r == 4: // a key of layout 5, where no run holds it
				p := next()
				if i, found := slices.BinarySearchFunc(ps, p, cmpPosting); !found && (i == 0 || i == len(ps)) {
					if err := b.Put(p.key(prefix), nil); err != nil {
						return err
					}
					want[v] = slices.Insert(ps, i, p)
				}
			default:
				p := next()
				if err := insertEntry(b, prefix, p); err != nil {
					return err
				}
				if rng.IntN(8) == 0 { // again: nothing more
					if err := insertEntry(b, prefix, p); err != nil {
						return err
					}
				}
				if i, found := slices.BinarySearchFunc(ps, p, cmpPosting); !found {
					want[v] = slices.Insert(ps, i, p)
				}
			}
			if step%500 == 499 {
				check(b, step)
			}
		}
		check(b, 6000)
		if n := b.Stats().KeyN; n*20 > len(want["a"])+len(want["ab"])+len(want["7"]) {
			t.Errorf("%d keys for %d entries: runs too short", n, len(want["a"])+len(want["ab"])+len(want["7"]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
