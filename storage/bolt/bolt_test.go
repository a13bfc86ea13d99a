package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

func row(id string) *ledger.Row {
	return &ledger.Row{ID: id, Kind: ledger.KindReceipt, Status: ledger.Authorized, Principal: "p", IssuedAt: time.Now()}
}

func TestGroupCommitIsolatesAFailingWrite(t *testing.T) {
	var mu sync.Mutex
	var batches []int
	s, err := bolt.Open(filepath.Join(t.TempDir(), "l.db"), bolt.Config{OnCommit: func(n int, _ time.Duration) { mu.Lock(); batches = append(batches, n); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx ledger.Tx) error {
				id := string(rune('a'+i%26)) + time.Duration(i).String()
				if err := tx.CreateRow(row(id)); err != nil {
					return err
				}
				if i == 50 {
					return boom // after a write: that write must not persist
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i == 50) != errors.Is(err, boom) {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	err = s.View(ctx, func(tx ledger.Tx) error {
		rows, _, err := tx.List(ledger.Query{PageSize: 1000})
		if len(rows) != 99 {
			t.Errorf("%d rows stored, want 99", len(rows))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	mu.Lock()
	for _, n := range batches {
		total += n
	}
	mu.Unlock()
	if total != 99 {
		t.Fatalf("commits carried %d writes, want 99 (batches %v)", total, batches)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l.db")
	s, err := bolt.Open(p, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := bolt.Open(p, bolt.Config{OpenTimeout: 100 * time.Millisecond}); !errors.Is(err, bolt.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

func TestUpdateAfterCloseFails(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "l.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Update(context.Background(), func(ledger.Tx) error { return nil }); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("update after close: %v", err)
	}
}
