package bolt

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestIndexRuns checks the runs of two indexes against plain sorted lists
// of their entries, through random inserts and deletes: one index under
// three values (one a prefix of another's text), one under no prefix (as
// the expiry index). Appends in time order, late entries, equal times,
// entries inserted twice and deleted twice, and keys of layout 5 (runs of
// one) among the runs. After every few hundred steps each prefix's
// entries, walked newest first below and oldest first above bounds at
// random entries, past them all and before them all, equal the list's;
// every key heads a run of its prefix; no run passes maxRunBytes.
func TestIndexRuns(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	type index struct {
		name     string
		prefixes [][]byte
	}
	indexes := []index{
		{"ix", [][]byte{indexPrefix("a"), indexPrefix("ab"), indexPrefix("7")}},
		{"exp", [][]byte{nil}},
	}
	want := map[string][]posting{} // index name and prefix -> entries in key order
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
	walk := func(b *bolt.Bucket, prefix, bound []byte, down bool) ([]posting, error) {
		rc := &runCursor{c: b.Cursor(), prefix: prefix}
		step, start := rc.next, rc.above
		if down {
			step, start = rc.prev, rc.below
		}
		var got []posting
		p, ok, err := start(bound)
		for ; ok && err == nil; p, ok, err = step() {
			got = append(got, p)
		}
		return got, err
	}
	check := func(b *bolt.Bucket, ix index, step int) {
		t.Helper()
		for _, prefix := range ix.prefixes {
			ps := want[ix.name+string(prefix)]
			bounds := [][]byte{append(bytes.TrimSuffix(slices.Clone(prefix), []byte{0}), 1), prefix}
			for range min(len(ps), 40) {
				k := ps[rng.IntN(len(ps))].key(prefix)
				bounds = append(bounds, k, k[:len(prefix)+8])
			}
			for _, bound := range bounds {
				var below, above []posting
				for i := len(ps) - 1; i >= 0; i-- {
					if bytes.Compare(ps[i].key(prefix), bound) < 0 {
						below = append(below, ps[i])
					}
				}
				for _, p := range ps {
					if bytes.Compare(p.key(prefix), bound) > 0 {
						above = append(above, p)
					}
				}
				for _, w := range []struct {
					down bool
					want []posting
				}{{true, below}, {false, above}} {
					if len(bound) != len(prefix)+entryKeyLen && !w.down {
						continue // walks up start from an entry's key
					}
					got, err := walk(b, prefix, bound, w.down)
					if err != nil {
						t.Fatalf("step %d: %s %q from %x (down %v): %v", step, ix.name, prefix, bound, w.down, err)
					}
					if !slices.Equal(got, w.want) {
						t.Fatalf("step %d: %s %q from %x (down %v): %d entries %v, want %d %v", step, ix.name, prefix, bound, w.down, len(got), got, len(w.want), w.want)
					}
				}
			}
			if got, err := walk(b, prefix, nil, false); err != nil || !slices.Equal(got, ps) {
				t.Fatalf("step %d: %s %q from the start: %d entries, %v; want %d", step, ix.name, prefix, len(got), err, len(ps))
			}
		}
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			prefix := k[:len(k)-entryKeyLen]
			first, ok := runHead(k, prefix)
			if !ok || !slices.ContainsFunc(ix.prefixes, func(p []byte) bool { return bytes.Equal(p, prefix) }) {
				t.Fatalf("step %d: %s: key %x heads no run", step, ix.name, k)
			}
			if len(v) > maxRunBytes {
				t.Fatalf("step %d: %s: run %x holds %d bytes", step, ix.name, k, len(v))
			}
			if _, err := decodeRun(first, v); err != nil {
				t.Fatalf("step %d: %s: run %x: %v", step, ix.name, k, err)
			}
		}
	}
	err = db.Update(func(btx *bolt.Tx) error {
		for _, ix := range indexes {
			b, err := btx.CreateBucket([]byte(ix.name))
			if err != nil {
				return err
			}
			entries := 0
			for step := range 4000 {
				prefix := ix.prefixes[rng.IntN(len(ix.prefixes))]
				at := ix.name + string(prefix)
				ps := want[at]
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
					want[at] = slices.DeleteFunc(ps, func(q posting) bool { return q == p })
				case r == 4: // a key of layout 5, where no run holds it
					p := next()
					if i, found := slices.BinarySearchFunc(ps, p, cmpPosting); !found && (i == 0 || i == len(ps)) {
						if err := b.Put(p.key(prefix), nil); err != nil {
							return err
						}
						want[at] = slices.Insert(ps, i, p)
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
						want[at] = slices.Insert(ps, i, p)
					}
				}
				if step%500 == 499 {
					check(b, ix, step)
				}
			}
			check(b, ix, 4000)
			for _, prefix := range ix.prefixes {
				entries += len(want[ix.name+string(prefix)])
			}
			if n := b.Stats().KeyN; n*20 > entries {
				t.Errorf("%s: %d keys for %d entries: runs too short", ix.name, n, entries)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRowLeaves: leaf indexes of rows in runs. Set in commit order with
// gaps (rows without a leaf yet, leaves of disputes between), set again
// (the same, or another index), taken out; every lookup answers as a map
// does, and the runs stay few.
func TestRowLeaves(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "l.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[uint64]uint64{}
	err = db.Update(func(btx *bolt.Tx) error {
		b, err := btx.CreateBucket(bRowLeaves)
		if err != nil {
			return err
		}
		leaf := uint64(0)
		for row := uint64(1); row <= 3000; row++ {
			if rng.IntN(10) == 0 {
				continue // no leaf yet
			}
			if rng.IntN(10) == 0 {
				leaf++ // a dispute's leaf
			}
			if err := putRowLeaf(b, seqKey(row), leaf); err != nil {
				return err
			}
			want[row] = leaf
			leaf++
		}
		for range 200 {
			row := 1 + rng.Uint64N(3000)
			switch rng.IntN(3) {
			case 0: // the same again
				if l, ok := want[row]; ok {
					if err := putRowLeaf(b, seqKey(row), l); err != nil {
						return err
					}
				}
			case 1: // another index
				if err := putRowLeaf(b, seqKey(row), 1_000_000+row); err != nil {
					return err
				}
				want[row] = 1_000_000 + row
			default:
				v, err := takeRowLeaf(b, seqKey(row))
				if err != nil {
					return err
				}
				l, ok := want[row]
				if (v != nil) != ok || (ok && binary.BigEndian.Uint64(v) != l) {
					t.Fatalf("take row %d: %x, want %d (%v)", row, v, l, ok)
				}
				delete(want, row)
			}
		}
		for row := uint64(0); row <= 3001; row++ {
			v, err := rowLeaf(b, seqKey(row))
			if err != nil {
				return err
			}
			l, ok := want[row]
			if (v != nil) != ok || (ok && binary.BigEndian.Uint64(v) != l) {
				t.Fatalf("row %d: leaf %x, want %d (%v)", row, v, l, ok)
			}
		}
		if n := b.Stats().KeyN; n*50 > len(want) {
			t.Errorf("%d keys for %d leaf indexes: runs too short", n, len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
