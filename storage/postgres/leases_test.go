package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestAcquireLeaseWaitsForALockedRowOnlySoLong: another transaction holds
// the lease's row (the fenced write of a holder that went quiet).
// AcquireLease waits for it only so long, then answers unavailable, so
// that the runner tries again; and no statement of it is left waiting for
// the row, to take the lease once the row is free.
func TestAcquireLeaseWaitsForALockedRowOnlySoLong(t *testing.T) {
	dsn := migrated(t)
	s := open(t, postgres.Config{DSN: dsn, CommitTimeout: time.Second})
	const lease, ttl = "test-singleton", time.Second
	token, err := s.AcquireLease(t.Context(), lease, "holder-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(t.Context(), lease, "holder-a", token); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	lock, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(t.Context(), "SELECT FROM leases WHERE name = $1 FOR UPDATE", lease); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := s.AcquireLease(t.Context(), lease, "holder-b", ttl)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AcquireLease still waits for the locked row after 10 s")
	}
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("AcquireLease behind a locked row: %v, want an error wrapping ledger.ErrUnavailable", err)
	}
	if n := sqlValue[int64](t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"); n != 0 {
		t.Errorf("%d statements still wait for a lock after AcquireLease returned", n)
	}
	if err := lock.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Nothing took the lease meanwhile: the next holder's token is the
	// next one.
	got, err := s.AcquireLease(t.Context(), lease, "holder-c", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got != token+1 {
		t.Errorf("the next holder's token is %d, want %d", got, token+1)
	}
}
