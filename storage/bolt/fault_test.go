package bolt_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/smalldisk"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestNoSpaceFailsTheBatchAtOnceAndRecovers: on a full disk every member
// of a batch fails with ledger.ErrNoSpace naming the file, each write runs
// once (no member is retried alone), the store reports itself unwritable,
// and once space is freed it takes writes again without reopening.
func TestNoSpaceFailsTheBatchAtOnceAndRecovers(t *testing.T) {
	dir := smalldisk.Mount(t, "8m")
	path := filepath.Join(dir, "l.db")
	var commits atomic.Int64
	s, err := bolt.Open(path, bolt.Config{OnCommit: func(int, time.Duration) { commits.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Writable(); err != nil {
		t.Fatalf("writable before the disk fills: %v", err)
	}
	filler := smalldisk.Fill(t, dir)
	commits.Store(0)

	// A first write holds the commit loop while the others queue, so they
	// share a batch.
	const writers = 32
	var runs atomic.Int64
	release := make(chan struct{})
	// Random bytes: they need the space whether they are stored as they
	// are or compressed.
	bundle := make([]byte, 256<<10)
	_, _ = rand.Read(bundle)
	write := func(id string, wait bool) error {
		return s.Update(ctx, func(tx ledger.Tx) error {
			runs.Add(1)
			if wait {
				<-release
			}
			return tx.PutEvidence(id, bundle)
		})
	}
	errs := make([]error, writers+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs[0] = write("blocker", true) }()
	for i := 1; i <= writers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = write("w"+strconv.Itoa(i), false) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first write never ran")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ledger.ErrNoSpace) || !strings.Contains(err.Error(), path) {
			t.Fatalf("write %d on a full disk: %v, want ErrNoSpace naming %s", i, err, path)
		}
	}
	if got := runs.Load(); got != writers+1 {
		t.Errorf("writes ran %d times, want %d: a batch that failed for lack of space was retried member by member", got, writers+1)
	}
	if commits.Load() != 0 {
		t.Fatalf("%d commits on a full disk", commits.Load())
	}
	if err := s.Writable(); !errors.Is(err, ledger.ErrNoSpace) {
		t.Fatalf("writable on a full disk: %v, want ErrNoSpace", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := write("after", false); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	if err := s.Writable(); err != nil {
		t.Fatalf("writable after a commit succeeded: %v", err)
	}
	err = s.View(ctx, func(tx ledger.Tx) error {
		if _, err := tx.Evidence("after"); err != nil {
			return err
		}
		if _, err := tx.Evidence("w1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a write refused for lack of space was stored: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUpdateRacingCloseReturns: Updates that race Close return (nil when
// they committed, ledger.ErrClosed when they did not) and never block.
func TestUpdateRacingCloseReturns(t *testing.T) {
	dir := t.TempDir()
	for trial := range 100 {
		s, err := bolt.Open(filepath.Join(dir, strconv.Itoa(trial)+".db"), bolt.Config{})
		if err != nil {
			t.Fatal(err)
		}
		// Writers call Update in a loop until it reports the store closed.
		const writers = 8
		var committed atomic.Int64
		done := make(chan error, writers)
		for range writers {
			go func() {
				for {
					err := s.Update(context.Background(), func(ledger.Tx) error { return nil })
					if err != nil {
						done <- err
						return
					}
					committed.Add(1)
				}
			}()
		}
		deadline := time.Now().Add(10 * time.Second)
		for committed.Load() < writers {
			if time.Now().After(deadline) {
				t.Fatal("writers made no progress")
			}
			time.Sleep(time.Millisecond)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(20 * time.Second)
		for range writers {
			select {
			case err := <-done:
				if !errors.Is(err, ledger.ErrClosed) {
					t.Fatalf("update racing close: %v", err)
				}
			case <-timeout:
				t.Fatalf("trial %d: an Update racing Close never returned", trial)
			}
		}
	}
}

// TestFreeListIsPersisted: the file records its free list, so opening it
// reads one page instead of walking the whole file.
func TestFreeListIsPersisted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := s.Update(context.Background(), func(tx ledger.Tx) error { return tx.CreateRow(row("r" + strconv.Itoa(i))) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt's two meta pages (page size from the first): a 16-byte page
	// header, then magic, version, page size, flags (4 bytes each), the root
	// bucket (16), the free list page id (8), the high water mark (8), the
	// transaction id (8). No free list is recorded as the page id 2^64-1.
	pageSize := int(binary.LittleEndian.Uint32(b[16+8:]))
	var txid, freelist uint64
	for _, off := range []int{0, pageSize} {
		m := b[off+16:]
		if id := binary.LittleEndian.Uint64(m[48:]); id >= txid {
			txid, freelist = id, binary.LittleEndian.Uint64(m[32:])
		}
	}
	if freelist == math.MaxUint64 {
		t.Fatal("the newest meta page records no free list: opening walks the whole file")
	}
}
