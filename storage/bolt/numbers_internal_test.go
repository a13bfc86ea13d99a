package bolt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

func numbersRow(name string) *ledger.Row {
	sum := sha256.Sum256([]byte(name))
	req := sha256.Sum256([]byte("request JWT of " + name))
	return &ledger.Row{ID: hex.EncodeToString(sum[:]), Kind: ledger.KindReceipt, Status: ledger.Authorized, Principal: "p",
		IssuedAt: time.Unix(1_700_000_000, 0), RequestJWTSHA256: hex.EncodeToString(req[:])}
}

func openNumbers(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// queueBehind blocks the commit loop in a write of its own, queues each of
// fns in order behind it (so that they make one batch), then lets the
// loop go on; it returns the queued writes' errors.
//
// The writes are put on the commit loop's channel by this goroutine, one
// after the other, not counted there as each Update's goroutine gets to
// it: the store queues steps of its own too (the key filter's build,
// which the first commit starts, queues two when its goroutine gets to
// them), and one of those waiting there would pass for a queued write and
// let a later write overtake an earlier one.
func queueBehind(t *testing.T, s *Store, fns ...func(ledger.Tx) error) []error {
	t.Helper()
	return queueBehindWrite(t, s, func(ledger.Tx) error { return nil }, fns...)
}

// queueBehindWrite is queueBehind with first the blocking write's own
// work, done before it blocks.
func queueBehindWrite(t *testing.T, s *Store, first func(ledger.Tx) error, fns ...func(ledger.Tx) error) []error {
	t.Helper()
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	blocker := make(chan error, 1)
	go func() {
		blocker <- s.Update(ctx, func(tx ledger.Tx) error {
			err := first(tx)
			close(entered)
			<-release
			return err
		})
	}()
	<-entered
	reqs := make([]*request, len(fns))
	for i, fn := range fns {
		reqs[i] = &request{fn: fn, err: make(chan error, 1)}
		select {
		case s.reqs <- reqs[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d was not queued", i)
		}
	}
	close(release)
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	out := make([]error, len(fns))
	for i, r := range reqs {
		out[i] = <-r.err
	}
	return out
}

// A batch that fails leaves nothing in the commit loop's memory of row
// numbers: the rows it created are not in the file, and the members
// retried alone number their rows anew.
func TestFailedBatchLeavesNoRowNumbers(t *testing.T) {
	s := openNumbers(t)
	q, x := numbersRow("q"), numbersRow("x")
	boom := errors.New("boom")
	calls := 0
	errs := queueBehind(t, s,
		func(tx ledger.Tx) error { // creates q in the batch only, not when retried alone
			calls++
			if calls == 1 {
				return tx.CreateRow(q)
			}
			return nil
		},
		func(tx ledger.Tx) error { return tx.CreateRow(x) },
		func(ledger.Tx) error { return boom },
	)
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], boom) {
		t.Fatalf("writes: %v", errs)
	}
	if calls != 2 {
		t.Fatalf("the first write ran %d times, want 2 (in the batch, then alone)", calls)
	}
	err := s.Update(context.Background(), func(tx ledger.Tx) error {
		if r, err := tx.Row(q.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("the row created by the failed batch only: %v, %v; want not found", r, err)
		}
		if r, err := tx.Row(x.ID); err != nil || r.ID != x.ID {
			t.Errorf("the row created again alone: %v, %v", r, err)
		}
		if id, err := tx.RowByRequestJWT(q.RequestJWTSHA256); err != nil || id != "" {
			t.Errorf("q's request JWT: %q, %v; want none", id, err)
		}
		if id, err := tx.RowByRequestJWT(x.RequestJWTSHA256); err != nil || id != x.ID {
			t.Errorf("x's request JWT: %q, %v", id, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A row removed is gone for the next write, though the commit loop
// created it a moment before; one created and removed in the same batch is
// gone within it; and a row created earlier in the batch is found by the
// writes after it.
func TestRemovedRowIsForgotten(t *testing.T) {
	s := openNumbers(t)
	ctx := context.Background()
	a, b := numbersRow("a"), numbersRow("b")
	if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.CreateRow(a) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx ledger.Tx) error {
		if r, err := tx.Row(a.ID); err != nil || r.ID != a.ID {
			t.Errorf("row a, the write after it was created: %v, %v", r, err)
		}
		return tx.RemoveRow(a, ledger.Tombstone{ID: a.ID})
	}); err != nil {
		t.Fatal(err)
	}
	errs := queueBehind(t, s,
		func(tx ledger.Tx) error {
			if r, err := tx.Row(a.ID); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("row a after its removal: %v, %v; want not found", r, err)
			}
			if id, err := tx.RowByRequestJWT(a.RequestJWTSHA256); err != nil || id != "" {
				t.Errorf("a's request JWT after its removal: %q, %v; want none", id, err)
			}
			return tx.CreateRow(b)
		},
		func(tx ledger.Tx) error {
			if r, err := tx.Row(b.ID); err != nil || r.ID != b.ID {
				t.Errorf("row b, created earlier in the batch: %v, %v", r, err)
			}
			if id, err := tx.RowByRequestJWT(b.RequestJWTSHA256); err != nil || id != b.ID {
				t.Errorf("b's request JWT, earlier in the batch: %q, %v", id, err)
			}
			if err := tx.RemoveRow(b, ledger.Tombstone{ID: b.ID}); err != nil {
				return err
			}
			if r, err := tx.Row(b.ID); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("row b, removed in this write: %v, %v; want not found", r, err)
			}
			return nil
		},
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := s.Update(ctx, func(tx ledger.Tx) error {
		if r, err := tx.Row(b.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("row b after the batch that created and removed it: %v, %v; want not found", r, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
