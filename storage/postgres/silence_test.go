package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// Tests of a database that stops answering while the sockets stay open (a
// network partition, a host that froze): each end must find out within
// the store's timeouts, not the operating system's.

// silentStore opens a store with cfg through a proxy to a migrated
// database (CommitTimeout 1 s unless cfg sets one), and returns it, the
// proxy and the database's own DSN.
func silentStore(t *testing.T, cfg postgres.Config) (*postgres.Store, *silencer, string) {
	t.Helper()
	dsn := migrated(t)
	p := newSilencer(t, dsn)
	cfg.DSN = p.dsn(t, dsn)
	if cfg.CommitTimeout == 0 {
		cfg.CommitTimeout = time.Second
	}
	s := open(t, cfg)
	t.Cleanup(p.close) // before the store closes
	return s, p, dsn
}

// TestWriteOutOfTimeIsUnavailable: a write whose CommitTimeout runs out
// before its COMMIT, the database having gone silent, fails with an error
// wrapping ledger.ErrUnavailable (the API's UNAVAILABLE, which writers
// retry), not with the deadline of a context the caller never set.
func TestWriteOutOfTimeIsUnavailable(t *testing.T) {
	s, p, _ := silentStore(t, postgres.Config{})
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(row("before the silence")) }); err != nil {
		t.Fatal(err)
	}
	p.silence()
	err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(row("during the silence")) })
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a write while the database is silent: %v, want an error wrapping ledger.ErrUnavailable", err)
	}
}

// TestCommitAnswerLost: the answer to a batch's COMMIT is lost and the
// database goes silent. Every write of the batch and of those after it
// fails as unavailable, none is acknowledged without being stored, and
// none runs again on its own once its COMMIT went out.
func TestCommitAnswerLost(t *testing.T) {
	s, p, dsn := silentStore(t, postgres.Config{Committers: 1})
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(row("warm")) }); err != nil {
		t.Fatal(err)
	}
	p.loseReplyWith([]byte("C\x00\x00\x00\x0bCOMMIT\x00")) // CommandComplete "COMMIT"
	var wg sync.WaitGroup
	errs := make([]error, 8)
	runs := make([]int, 8)
	for i := range errs {
		wg.Go(func() {
			r := row(fmt.Sprint("lost commit ", i))
			errs[i] = s.Update(t.Context(), func(tx ledger.Tx) error {
				runs[i]++
				if _, err := tx.Row(r.ID); !errors.Is(err, ledger.ErrNotFound) {
					return fmt.Errorf("read before create: %v", err)
				}
				return tx.CreateRow(r)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		stored := sqlValue[bool](t, dsn, "SELECT EXISTS (SELECT FROM ledger_rows WHERE id = $1)", row(fmt.Sprint("lost commit ", i)).ID)
		switch {
		case err == nil && !stored:
			t.Errorf("write %d acknowledged but not stored", i)
		case err != nil && !errors.Is(err, ledger.ErrUnavailable):
			t.Errorf("write %d: %v, want an error wrapping ledger.ErrUnavailable", i, err)
		case runs[i] > 1:
			t.Errorf("write %d ran %d times", i, runs[i])
		}
	}
}

// TestAbandonedFencedWriteFreesTheLease: replica A is inside a fenced
// write (its transaction open, its locks held) when the network
// between it and the database goes silent. A gives up after its
// CommitTimeout and the server never hears of it, so the server ends the
// abandoned transaction itself once it has been idle that long: the
// lease's row, and every lock the write took, is free again, and replica B
// takes the lease once it has expired.
func TestAbandonedFencedWriteFreesTheLease(t *testing.T) {
	a, p, dsn := silentStore(t, postgres.Config{})
	b := open(t, postgres.Config{DSN: dsn})
	const lease, ttl = ledger.LeaseLogIntegrator, time.Second
	token, err := a.AcquireLease(t.Context(), lease, "replica-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	fenced := ledger.WithFence(t.Context(), ledger.Fence{Lease: lease, Token: token})
	err = a.Update(fenced, func(tx ledger.Tx) error {
		p.silence() // the write's transaction is open
		_, err := tx.OutboxDepth()
		return err
	})
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("replica A's fenced write while the database is silent: %v, want an error wrapping ledger.ErrUnavailable", err)
	}
	poll(t, "the server ends the transaction replica A abandoned", 10*time.Second, func() bool {
		return sqlValue[int64](t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'") == 0
	})
	poll(t, "the lease expires", 10*time.Second, func() bool {
		return sqlValue[bool](t, dsn, "SELECT expires_at < clock_timestamp() FROM leases WHERE name = $1", lease)
	})
	got, err := b.AcquireLease(t.Context(), lease, "replica-b", ttl)
	if err != nil {
		t.Fatalf("replica B takes the expired lease: %v", err)
	}
	if got <= token {
		t.Errorf("replica B's token %d, want more than replica A's %d", got, token)
	}
}

// TestSessionsDropASilentReplica: every session of the store asks the
// server for TCP keepalives and a TCP user timeout derived from
// CommitTimeout, so that the server drops the connection of a replica
// that vanished after about that long; a setting the DSN gives is left
// as it is.
func TestSessionsDropASilentReplica(t *testing.T) {
	dsn := migrated(t)
	s := open(t, postgres.Config{DSN: dsn + " tcp_keepalives_count=7", CommitTimeout: 20 * time.Second})
	for name, want := range map[string]string{
		"tcp_keepalives_idle":     "5",
		"tcp_keepalives_interval": "5",
		"tcp_keepalives_count":    "7",
		"tcp_user_timeout":        "20000",
	} {
		got, err := postgres.Setting(t.Context(), s, name)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

// TestLeaseCallsOnASilentDatabaseAreUnavailable: a lease call made with a
// context without a deadline (as RunUnderLease's) while the database is
// silent answers unavailable within the store's own bound (the lease's ttl
// or CommitTimeout, the shorter), so that the runner tries again, rather
// than when the operating system gives the connection up.
func TestLeaseCallsOnASilentDatabaseAreUnavailable(t *testing.T) {
	s, p, _ := silentStore(t, postgres.Config{})
	const lease, ttl = ledger.LeaseSweeper, time.Second
	token, err := s.AcquireLease(t.Context(), lease, "replica-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	p.silence()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"AcquireLease", func() error { _, err := s.AcquireLease(t.Context(), lease, "replica-a", ttl); return err }},
		{"RenewLease", func() error { return s.RenewLease(t.Context(), lease, "replica-a", token, ttl) }},
		{"ReleaseLease", func() error { return s.ReleaseLease(t.Context(), lease, "replica-a", token) }},
	} {
		done := make(chan error, 1)
		go func() { done <- c.call() }()
		select {
		case err := <-done:
			if !errors.Is(err, ledger.ErrUnavailable) {
				t.Errorf("%s while the database is silent: %v, want an error wrapping ledger.ErrUnavailable", c.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waits for the silent database after 10 s", c.name)
		}
	}
}

// TestReadsWaitForAConnectionOnlySoLong: while a read holds the store's
// one connection to a database gone silent, another read waits for a
// connection at most CommitTimeout and fails as unavailable, while one
// whose caller's own deadline comes first fails with that deadline. The
// read in progress is not cut short by the store: long reads (an
// integrity check, an export) are legitimate.
func TestReadsWaitForAConnectionOnlySoLong(t *testing.T) {
	s, p, _ := silentStore(t, postgres.Config{MaxConns: 1})
	holding, silent := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		first <- s.View(ctx, func(tx ledger.Tx) error {
			close(holding)
			<-silent
			_, err := tx.OutboxDepth()
			return err
		})
	}()
	<-holding
	p.silence()
	close(silent)

	view := func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() {
			done <- s.View(ctx, func(tx ledger.Tx) error { _, err := tx.OutboxDepth(); return err })
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("a read still waits for a connection after 10 s")
			return nil
		}
	}
	if err := view(t.Context()); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a read waiting for a connection: %v, want an error wrapping ledger.ErrUnavailable", err)
	}
	short, stop := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer stop()
	if err := view(short); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a read whose caller's deadline passed while it waited for a connection: %v, want the caller's deadline", err)
	}
	select {
	case err := <-first:
		t.Errorf("the read in progress ended: %v", err)
	default:
	}
}

// TestAReadPastItsCallersDeadlineSaysSo: a read running when the database
// goes silent, whose caller's own deadline then passes, fails with that
// deadline (the API's DEADLINE_EXCEEDED), not as the database being
// unavailable: the caller gave up, and nothing says the database did.
func TestAReadPastItsCallersDeadlineSaysSo(t *testing.T) {
	s, p, _ := silentStore(t, postgres.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	short, stop := context.WithCancel(ctx)
	defer stop()
	err := s.View(short, func(tx ledger.Tx) error {
		p.silence()
		// The caller's deadline, passed while the query waits.
		time.AfterFunc(200*time.Millisecond, stop)
		_, err := tx.OutboxDepth()
		return err
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("a read whose caller gave up while the database was silent: %v, want the caller's own cancellation", err)
	}
}
