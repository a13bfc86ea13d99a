package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestAccessReadsOfAReplicaWhoseClockIsBehindAreRefused: replica B's clock
// is 13 months behind the database server's. Were its reads recorded,
// they would be stamped 13 months ago, and replica A, whose clock is
// right, would prune them at once, their batches put. B's access log
// checks its clock against the database's, as its writes do: each read
// is refused (UNAVAILABLE to the reader), nothing is recorded, and A's
// prune removes none of the reads recorded.
func TestAccessReadsOfAReplicaWhoseClockIsBehindAreRefused(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	a, b := open(t, postgres.Config{DSN: w.dsn}), open(t, postgres.Config{DSN: w.dsn})
	now := time.Now().UTC()
	behind := now.AddDate(0, -13, 0)
	keep := retention.Period{Months: 12}

	lb := w.ledger(t, b, ledger.Config{Now: func() time.Time { return behind }, Logger: slog.New(slog.DiscardHandler),
		ReferenceClocks: []ledger.ReferenceClock{{Name: "the PostgreSQL row store", Now: b.ServerTime}}})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lb.RunClockWatch(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("clock watch: %v", err)
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); len(lb.ClockStates()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("replica B's clock watch read no reference clock in 30s")
		}
		select {
		case <-done:
			t.Fatal("the clock watch stopped")
		case <-time.After(10 * time.Millisecond):
		}
	}

	logA := ledger.NewAccessLog(a, ledger.AccessLogConfig{Retention: keep, Now: func() time.Time { return now }})
	logB := ledger.NewAccessLog(b, ledger.AccessLogConfig{Retention: keep, Now: func() time.Time { return behind }, CheckRecordClock: lb.CheckReadClock})
	read := func(l *ledger.AccessLog, key string) error {
		if err := l.Record(ctx, ledger.Access{Key: key, Roles: []string{"support"}, RPC: "GetRow", Row: "r1", RowPrincipal: "acct-48213", Rows: 1, Result: "ok"}); err != nil {
			return err
		}
		return l.Flush(ctx)
	}
	if err := read(logA, "support-a-before"); err != nil {
		t.Fatal(err)
	}
	err := read(logB, "support-b-on-replica-with-clock-behind")
	var off *ledger.ClockOffError
	if !errors.As(err, &off) || !errors.Is(err, ledger.ErrUnavailable) || off.Off > -13*28*24*time.Hour {
		t.Fatalf("a read on replica B, its clock 13 months behind the database's: %v; want a *ClockOffError saying so", err)
	}
	if err := read(logA, "support-a-after"); err != nil {
		t.Fatal(err)
	}
	// The uploader puts the batches (takes them off the outbox as it does).
	if err := a.Update(ctx, func(tx ledger.Tx) error {
		q, err := tx.Outbox(100)
		if err != nil {
			return err
		}
		for _, e := range q {
			if _, err := tx.Dequeue(e.Seq); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := logA.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("replica A's prune: removed %d, %v; want none due", n, err)
	}
	page, err := logA.List(ctx, ledger.AccessQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range page.Records {
		keys = append(keys, r.Key)
	}
	if len(keys) != 2 || keys[0] != "support-a-before" || keys[1] != "support-a-after" {
		t.Fatalf("records %v; want replica A's two reads, and none of replica B's", keys)
	}
}
