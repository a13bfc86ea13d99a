package bolt

import (
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// freePages lists the file's free pages, lowest first.
func freePages(t *testing.T, db *bolt.DB) []int {
	t.Helper()
	var ids []int
	if err := db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if p.Type == "free" {
				ids = append(ids, id)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestCommitsTakeTheLowestFreePages: a commit's pages come from the
// lowest free pages of the file, so on a file with many free pages (a
// sweep, dropped bundles and tiles) they lie together, not anywhere in
// it: a disk syncs pages close together faster than pages scattered over
// a large file.
func TestCommitsTakeTheLowestFreePages(t *testing.T) {
	db, err := openDB(filepath.Join(t.TempDir(), "f.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	val := make([]byte, 200)
	update := func(fn func(tx *bolt.Tx) error) {
		t.Helper()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	// Two buckets written in turns, so that their pages alternate in the
	// file; deleting one leaves free pages scattered among the other's.
	for round := range 200 {
		for _, name := range []string{"kept", "dropped"} {
			update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte(name))
				if err != nil {
					return err
				}
				for i := range 40 {
					if err := b.Put(key(round*40+i), val); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("dropped")) })
	// A commit with no reader open releases the pages the last one freed.
	update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
	before := freePages(t, db)
	if len(before) < 200 {
		t.Fatalf("%d free pages after the delete, want hundreds", len(before))
	}
	update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("other"))
		for i := range 100 {
			if err := b.Put(key(i), val); err != nil {
				return err
			}
		}
		return nil
	})
	after := freePages(t, db)
	var taken []int
	for _, id := range before {
		if !slices.Contains(after, id) {
			taken = append(taken, id)
		}
	}
	if len(taken) < 3 {
		t.Fatalf("the write took %d of the free pages, want several", len(taken))
	}
	lowest := before[len(before)/10]
	for _, id := range taken {
		if id > lowest {
			t.Fatalf("the write took free page %d, above the lowest tenth of the %d free pages (up to %d): pages taken %v", id, len(before), lowest, taken)
		}
	}
}
