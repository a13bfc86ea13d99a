package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// A lease holder's fenced write commits in a transaction of its own, never
// in a batch with other writes: its check of the lease locks the lease's
// row until COMMIT, and a batch-mate that takes long (a write waiting on
// another replica's uncommitted row) would hold its holder's renewals
// off past the lease's life. The fenced write queued beside a write that
// is still running has committed.
func TestAFencedWriteCommitsApartFromItsBatch(t *testing.T) {
	w := newWorld(t)
	store := open(t, postgres.Config{DSN: w.dsn, CommitTimeout: time.Minute, Committers: 1})
	l := w.ledger(t, store, ledger.Config{Logger: slog.New(slog.DiscardHandler), Leases: ledger.LeaseConfig{Holder: "a", TTL: time.Minute}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	slowDone := make(chan error, 1)
	hold := make(chan struct{})
	defer func() {
		close(hold)
		<-slowDone
	}()
	err := l.RunUnderLease(ctx, "fenced-alone", func(jctx context.Context) error {
		// Hold the one committer, so that the next two writes are
		// queued for one batch.
		inside, release := make(chan struct{}), make(chan struct{})
		go func() {
			_ = store.Update(ctx, func(tx ledger.Tx) error { close(inside); <-release; return tx.PutDrill("blocker", []byte(`{}`)) })
		}()
		<-inside
		fenced := make(chan error, 1)
		go func() {
			fenced <- store.Update(jctx, func(tx ledger.Tx) error { return tx.PutDrill("fenced", []byte(`{}`)) })
		}()
		if err := waitQueued(ctx, store, 1); err != nil {
			return err
		}
		go func() {
			slowDone <- store.Update(ctx, func(tx ledger.Tx) error {
				select {
				case <-hold:
				case <-ctx.Done():
				}
				return tx.PutDrill("slow", []byte(`{}`))
			})
		}()
		if err := waitQueued(ctx, store, 2); err != nil {
			return err
		}
		close(release)
		// The fenced write takes milliseconds alone; batched with the slow
		// write it would wait for it, which waits for the test.
		waited := time.NewTimer(30 * time.Second)
		defer waited.Stop()
		select {
		case err := <-fenced:
			return err
		case <-waited.C:
			return errors.New("it waited 30 s for the write batched beside it, which had not ended")
		}
	})
	if err != nil {
		t.Fatalf("the fenced write: %v", err)
	}
	select {
	case err := <-slowDone:
		slowDone <- err
		t.Fatalf("the slow write ended before it was let go: %v", err)
	default:
	}
}

// waitQueued polls until n writes wait for a committer.
func waitQueued(ctx context.Context, s *postgres.Store, n int) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for postgres.Waiting(s) < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d writes queued, want %d", postgres.Waiting(s), n)
		case <-tick.C:
		}
	}
	return nil
}
