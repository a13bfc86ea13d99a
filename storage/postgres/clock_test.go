package postgres_test

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestSweepChecksTheDatabaseClock: a ledger on PostgreSQL checks its clock
// against the database server's (now()) before a sweep deletes anything.
// Its clock 19 months ahead, the sweep removes nothing; right, it removes
// the due row. Once the store is closed, the clock cannot be read and the
// sweep deletes nothing.
func TestSweepChecksTheDatabaseClock(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	store := open(t, postgres.Config{DSN: w.dsn})
	real := time.Now().UTC().Truncate(time.Second)
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	set(real)

	got, err := store.ServerTime(ctx)
	if err != nil || got.Sub(real).Abs() > time.Minute {
		t.Fatalf("ServerTime = %v, %v; want about %v", got, err, real)
	}

	l := w.ledger(t, store, ledger.Config{Now: func() time.Time { return *now.Load() }, Logger: slog.New(slog.DiscardHandler),
		ReferenceClocks: []ledger.ReferenceClock{{Name: "the PostgreSQL row store", Now: store.ServerTime}}})
	set(real.AddDate(0, -19, 0)) // recorded 19 months ago: due a month ago
	due, _, err := l.AppendReceipt(ctx, input(w.sc.Mint(pacttest.Spec{Target: "PG-1", At: *now.Load()})))
	if err != nil {
		t.Fatal(err)
	}
	set(real)
	fresh, _, err := l.AppendReceipt(ctx, input(w.sc.Mint(pacttest.Spec{Target: "PG-2", At: real})))
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.DrainOutbox(ctx, l); err != nil {
		t.Fatal(err)
	}

	set(real.AddDate(0, 19, 0))
	if res, err := l.Sweep(ctx, false); !errors.Is(err, ledger.ErrClockAhead) {
		t.Fatalf("sweep at a clock 19 months ahead of the database's: %+v, %v; want ErrClockAhead", res, err)
	}
	set(real)
	for _, id := range []string{due.ID, fresh.ID} {
		if _, err := l.Get(ctx, id); err != nil {
			t.Fatalf("row %s after the refused sweep: %v", id, err)
		}
	}
	res, err := l.Sweep(ctx, false)
	if err != nil || len(res.Swept) != 1 || res.Swept[0].RowID != due.ID {
		t.Fatalf("sweep at the database's time: %+v, %v; want row %s swept", res, err, due.ID)
	}

	_ = store.Close()
	if _, err := l.Sweep(ctx, true); !errors.Is(err, ledger.ErrClockUnread) {
		t.Fatalf("sweep with the database closed: %v; want ErrClockUnread", err)
	}
}
