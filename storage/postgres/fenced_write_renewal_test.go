package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestSlowFencedWriteKeepsItsHoldersLease: a fenced write that stays in
// its transaction longer than the lease lasts (4 s under a 2 s ttl, as a
// sweep's write waiting for a grant's hold may) does not lock the lease's
// row meanwhile, so its holder's renewals go through: the holder keeps the
// lease, and the write commits under it.
func TestSlowFencedWriteKeepsItsHoldersLease(t *testing.T) {
	w := newWorld(t)
	store := open(t, postgres.Config{DSN: w.dsn, CommitTimeout: 10 * time.Second})
	logs := &syncbuf.Buffer{}
	const ttl = 2 * time.Second
	l := w.ledger(t, store, ledger.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Leases: ledger.LeaseConfig{Holder: "a", TTL: ttl}})
	const name = "slow-writer"
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	writeErr := make(chan error, 1)
	jobLost := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- l.RunUnderLease(ctx, name, func(jctx context.Context) error {
			context.AfterFunc(jctx, func() {
				if ctx.Err() == nil {
					close(jobLost)
				}
			})
			writeErr <- store.Update(jctx, func(tx ledger.Tx) error {
				// A write that takes 4 s inside its transaction, the
				// database answering throughout.
				<-time.After(2 * ttl)
				return tx.PutDrill("slow", []byte(`{}`))
			})
			<-jctx.Done()
			return nil
		})
	}()
	select {
	case <-jobLost:
		t.Fatalf("the holder was told its lease was lost while its own fenced write was in its transaction; log:\n%s", logs.String())
	case err := <-writeErr:
		if err != nil {
			t.Fatalf("the slow fenced write: %v; log:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the slow fenced write did not return")
	}
	if _, held := l.LeaseHeld(name); !held {
		t.Errorf("the holder no longer holds %s after its write committed; log:\n%s", name, logs.String())
	}
	if !sqlValue[bool](t, w.dsn, "SELECT expires_at > clock_timestamp() FROM leases WHERE name = $1 AND holder = 'a'", name) {
		t.Error("the lease is not held by the database's clock after the write committed")
	}
	err := store.View(t.Context(), func(tx ledger.Tx) error { _, err := tx.Drill("slow"); return err })
	if err != nil {
		t.Errorf("the slow fenced write's drill: %v", err)
	}
	if strings.Contains(logs.String(), "lease lost") {
		t.Errorf("lease lost logged:\n%s", logs.String())
	}
	stop()
	<-ran
}

// TestFencedWriteTakenOverMidwayCommitsNothing: the lease check of a
// fenced write comes after its writes, so a takeover while the write is
// in its transaction is found there: the write fails with ErrLeaseLost and
// nothing of it commits.
func TestFencedWriteTakenOverMidwayCommitsNothing(t *testing.T) {
	dsn := migrated(t)
	s := open(t, postgres.Config{DSN: dsn})
	const name = "singleton"
	token, err := s.AcquireLease(t.Context(), name, "holder-a", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	inside, finish := make(chan struct{}), make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(finish) }) }
	t.Cleanup(end) // the store closes after the write ends
	done := make(chan error, 1)
	go func() {
		ctx := ledger.WithFence(t.Context(), ledger.Fence{Lease: name, Token: token})
		done <- s.Update(ctx, func(tx ledger.Tx) error {
			if err := tx.PutDrill("by-holder-a", []byte("a")); err != nil {
				return err
			}
			close(inside)
			<-finish
			return nil
		})
	}()
	<-inside
	var taken uint64
	poll(t, "holder-b takes the expired lease while holder-a's write is open", 10*time.Second, func() bool {
		taken, err = s.AcquireLease(t.Context(), name, "holder-b", time.Minute)
		return err == nil
	})
	if taken <= token {
		t.Errorf("token after the takeover %d, want above %d", taken, token)
	}
	end()
	if err := <-done; !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("fenced Update whose lease was taken over: %v, want ErrLeaseLost", err)
	}
	err = s.View(t.Context(), func(tx ledger.Tx) error { _, err := tx.Drill("by-holder-a"); return err })
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the drill of the write that lost its lease: %v, want ErrNotFound", err)
	}
}
