package bolt

import (
	"context"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// pruneRoom is what a write transaction's PruneRoom says.
func pruneRoom(t *testing.T, s *Store) int64 {
	t.Helper()
	var room int64
	if err := s.Update(context.Background(), func(tx ledger.Tx) error {
		var err error
		room, err = tx.(ledger.LogPruner).PruneRoom()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return room
}

// TestPruneRoomFollowsTheFreePages: a file with few free pages has room
// for whole tiles; once pruneFreePages pages are free it has none, until
// writes reuse them.
func TestPruneRoomFollowsTheFreePages(t *testing.T) {
	s := openNumbers(t)
	room := pruneRoom(t, s)
	if room <= 0 || room%tileLeaves != 0 || room > pruneFreePages*leavesPerFreePage {
		t.Fatalf("room %d in a new file, want whole tiles up to %d leaves", room, pruneFreePages*leavesPerFreePage)
	}
	// Free more than pruneFreePages pages: values of a page each, written,
	// then deleted.
	value := make([]byte, 4000)
	for _, fill := range []bool{true, false} {
		err := s.db.Update(func(btx *bolt.Tx) error {
			b, err := btx.CreateBucketIfNotExists([]byte("scratch"))
			if err != nil {
				return err
			}
			for i := range pruneFreePages + 500 {
				k := []byte(fmt.Sprintf("%08d", i))
				if fill {
					err = b.Put(k, value)
				} else {
					err = b.Delete(k)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if room := pruneRoom(t, s); room != 0 {
		t.Fatalf("room %d with %d free pages, want none", room, s.db.Stats().FreePageN)
	}
	// Writes reuse the pages: room again.
	err := s.db.Update(func(btx *bolt.Tx) error {
		b := btx.Bucket([]byte("scratch"))
		for i := range pruneFreePages {
			if err := b.Put([]byte(fmt.Sprintf("again %08d", i)), value); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if room := pruneRoom(t, s); room <= 0 {
		t.Fatalf("room %d once writes reused the free pages (%d free), want some", room, s.db.Stats().FreePageN)
	}
}
