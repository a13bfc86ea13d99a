package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// TestIDRuns holds idPut, idGet, idDelete and idEntries to a map, through
// random puts and deletes of keys of the bucket's width and of other
// lengths, in transactions of random sizes, for both widths.
func TestIDRuns(t *testing.T) {
	for _, w := range []int{32, reqKeyLen} {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "runs.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(w), 9))
		want := map[string][]byte{}
		var keys []string
		newKey := func() []byte {
			n := w
			switch rng.IntN(20) {
			case 0:
				n = 1 + rng.IntN(40) // another length: kept alone
			case 1:
				if len(keys) > 0 { // next to a key already there
					k := []byte(keys[rng.IntN(len(keys))])
					k[len(k)-1]++
					return k
				}
			}
			k := make([]byte, n)
			for i := range k {
				k[i] = byte(rng.IntN(4) * 85) // few values: near keys
			}
			if rng.IntN(2) == 0 {
				for i := range k {
					k[i] = byte(rng.Uint32())
				}
			}
			return k
		}
		for round := range 300 {
			err := db.Update(func(btx *bolt.Tx) error {
				b, err := btx.CreateBucketIfNotExists([]byte("m"))
				if err != nil {
					return err
				}
				for range 1 + rng.IntN(40) {
					switch {
					case len(keys) > 0 && rng.IntN(4) == 0:
						i := rng.IntN(len(keys))
						k := keys[i]
						found, err := idDelete(b, w, []byte(k))
						if err != nil {
							return err
						}
						if _, ok := want[k]; found != ok {
							t.Fatalf("width %d round %d: delete %x found %v, want %v", w, round, k, found, ok)
						}
						delete(want, k)
						keys = slices.Delete(keys, i, i+1)
					default:
						k := newKey()
						seq := binary.BigEndian.AppendUint64(nil, rng.Uint64())
						if err := idPut(b, w, k, seq); err != nil {
							return err
						}
						if _, ok := want[string(k)]; !ok {
							keys = append(keys, string(k))
						}
						want[string(k)] = seq
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if round%30 == 29 {
				checkIDRuns(t, db, w, want, rng)
			}
		}
		checkIDRuns(t, db, w, want, rng)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func checkIDRuns(t *testing.T, db *bolt.DB, w int, want map[string][]byte, rng *rand.Rand) {
	t.Helper()
	sorted := slices.Sorted(maps.Keys(want))
	err := db.View(func(btx *bolt.Tx) error {
		b := btx.Bucket([]byte("m"))
		runs := 0
		if err := b.ForEach(func(k, v []byte) error {
			if len(k)+len(v) > maxIDRunBytes {
				t.Errorf("width %d: run %x holds %d bytes, over %d", w, k, len(k)+len(v), maxIDRunBytes)
			}
			if len(k) != w && len(v) != 8 {
				t.Errorf("width %d: key %x of another length holds %d bytes", w, k, len(v))
			}
			runs++
			return nil
		}); err != nil {
			return err
		}
		if len(want) > 40 && runs*3 > len(want) {
			t.Errorf("width %d: %d keys in %d runs: not run", w, len(want), runs)
		}
		for k, seq := range want {
			if got := idGet(b, w, []byte(k)); !bytes.Equal(got, seq) {
				t.Fatalf("width %d: get %x = %x, want %x", w, k, got, seq)
			}
			gone := []byte(k + "\x00")
			if _, ok := want[string(gone)]; !ok && idGet(b, w, gone) != nil {
				t.Fatalf("width %d: get %x found a key never put", w, gone)
			}
		}
		// In order, from the start and from random points.
		for range 20 {
			var from []byte
			if rng.IntN(4) > 0 && len(sorted) > 0 {
				from = []byte(sorted[rng.IntN(len(sorted))])
				if rng.IntN(2) == 0 {
					from = from[:rng.IntN(len(from)+1)] // a prefix, as seekKey gives
				}
			}
			var got []string
			for k, v := range idEntries(b, w, from) {
				if !bytes.Equal(v, want[string(k)]) {
					t.Fatalf("width %d: entry %x = %x, want %x", w, k, v, want[string(k)])
				}
				got = append(got, string(k))
			}
			i, _ := slices.BinarySearch(sorted, string(from))
			if !slices.Equal(got, sorted[i:]) {
				t.Fatalf("width %d: from %x: %d keys in order, want %d", w, from, len(got), len(sorted[i:]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayout8EntriesJoinRuns: a file whose row numbers and request JWTs
// are under a key each (layout 8) is marked with this layout at open, reads every
// row by id, by request JWT and in id order, and the rows added after
// join runs; rows removed leave the others found.
func TestLayout8EntriesJoinRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return "row " + strconv.Itoa(i) }
	var names []string
	for i := range 300 {
		names = append(names, name(i))
	}
	rows := createRows(t, s, names[:100]...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	editFile(t, path, func(btx *bolt.Tx) error {
		if n, err := Layout8IDs(btx); err != nil || n != 200 {
			return fmt.Errorf("%d entries out of runs (%v), want 200", n, err)
		}
		return btx.Bucket(bMeta).Put(kLayout, u64(8))
	})
	if s, err = Open(path, Config{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows = append(rows, createRows(t, s, names[100:]...)...)
	// The rows added leave their keys pending; written into the
	// buckets, they join the runs.
	s = reopenSettled(t, s, path)
	heads, entries := 0, 0
	if err := s.db.View(func(btx *bolt.Tx) error {
		if v := btx.Bucket(bMeta).Get(kLayout); !bytes.Equal(v, u64(layout)) {
			t.Errorf("layout mark %x, want %d", v, layout)
		}
		heads = btx.Bucket(bRowSeq).Stats().KeyN
		for range idEntries(btx.Bucket(bRowSeq), 32, nil) {
			entries++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if entries != 300 || heads > 150 {
		t.Errorf("%d row numbers under %d keys, want 300 under fewer than 150", entries, heads)
	}
	gone := map[string]bool{}
	update(t, s, func(tx ledger.Tx) error {
		for i := 0; i < len(rows); i += 7 {
			if err := tx.RemoveRow(rows[i], ledger.Tombstone{}); err != nil {
				return err
			}
			gone[rows[i].ID] = true
		}
		return nil
	})
	var ids []string
	if err := s.View(context.Background(), func(tx ledger.Tx) error {
		for _, r := range rows {
			got, err := tx.Row(r.ID)
			switch {
			case gone[r.ID] && !errors.Is(err, ledger.ErrNotFound):
				return fmt.Errorf("removed row %s: %v, want not found", r.ID, err)
			case !gone[r.ID] && (err != nil || got.ID != r.ID):
				return fmt.Errorf("row %s: %v", r.ID, err)
			}
			first, err := tx.RowByRequestJWT(r.RequestJWTSHA256)
			if err != nil || (first == r.ID) == gone[r.ID] {
				return fmt.Errorf("request JWT of row %s: %q, %v", r.ID, first, err)
			}
			if !gone[r.ID] {
				ids = append(ids, r.ID)
			}
		}
		var listed []string
		for after := ""; ; {
			page, next, err := tx.RowsByID(after, 17)
			if err != nil {
				return err
			}
			for _, r := range page {
				listed = append(listed, r.ID)
			}
			if next == "" {
				break
			}
			after = next
		}
		slices.Sort(ids)
		if !slices.Equal(listed, ids) {
			return fmt.Errorf("RowsByID listed %d rows, want the %d stored in id order", len(listed), len(ids))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// editFile runs fn in a write transaction on the closed file at path, as
// bbolt alone opens it; an error fails t.
func editFile(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(fn)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}
