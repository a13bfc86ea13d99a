package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// writers keeps n goroutines creating rows on s until stopped, and
// records which rows were acknowledged and what errors the others got.
type writers struct {
	mu     sync.Mutex
	acked  []string
	failed []error
	ackAt  []time.Time
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startWriters(t *testing.T, s ledger.Store, n int) *writers {
	w := &writers{stop: make(chan struct{})}
	for g := range n {
		w.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				r := row(fmt.Sprintf("writer %d row %d", g, i))
				err := s.Update(context.Background(), func(tx ledger.Tx) error { return tx.CreateRow(r) })
				w.mu.Lock()
				if err == nil {
					w.acked = append(w.acked, r.ID)
					w.ackAt = append(w.ackAt, time.Now())
				} else {
					w.failed = append(w.failed, err)
				}
				w.mu.Unlock()
			}
		})
	}
	t.Cleanup(w.halt)
	return w
}

// halt stops the writers and waits for them.
func (w *writers) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// counts returns how many writes were acknowledged and failed so far.
func (w *writers) counts() (acked, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked), len(w.failed)
}

// longestGap returns the longest time between two acknowledgments in a
// row: the time without writes.
func (w *writers) longestGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := slices.SortedFunc(slices.Values(w.ackAt), time.Time.Compare)
	var gap time.Duration
	for i := 1; i < len(at); i++ {
		gap = max(gap, at[i].Sub(at[i-1]))
	}
	return gap
}

// checkAcked fails t unless every acknowledged row is in the database at
// dsn, and every failure wraps ledger.ErrUnavailable.
func (w *writers) checkAcked(t *testing.T, dsn string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var missing int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM ledger_rows r WHERE r.id = a.id)", w.acked).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged rows are missing", missing, len(w.acked))
	}
	for _, err := range w.failed {
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("a write failed with %v, want an error wrapping ledger.ErrUnavailable", err)
			break
		}
	}
}

// TestOutage: with PostgreSQL stopped, writes, reads and Ping fail with
// errors wrapping ledger.ErrUnavailable; once it is back the same store
// takes writes again, and every write acknowledged before, during or
// after the outage is stored.
func TestOutage(t *testing.T) {
	pgtest.Available(t)
	c, err := pgtest.New("outage")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Remove() })
	dsn := c.CreateDB(t)
	if _, _, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	s := open(t, postgres.Config{DSN: dsn})
	w := startWriters(t, s, 4)
	poll(t, "writes before the outage", 20*time.Second, func() bool { n, _ := w.counts(); return n >= 50 })

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	_, failedBefore := w.counts()
	poll(t, "writes fail while the database is down", 20*time.Second, func() bool { _, f := w.counts(); return f > failedBefore+10 })
	if err := s.View(t.Context(), func(tx ledger.Tx) error { _, err := tx.OutboxDepth(); return err }); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("View while the database is down: %v, want ErrUnavailable", err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Ping while the database is down: %v, want ErrUnavailable", err)
	}
	ackedDown, _ := w.counts()

	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	poll(t, "writes resume once the database is back", 20*time.Second, func() bool { n, _ := w.counts(); return n >= ackedDown+50 })
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after the outage: %v", err)
	}
	w.halt()
	w.checkAcked(t, dsn)
	acked, failed := w.counts()
	t.Logf("%d writes acknowledged, %d refused as unavailable during the outage; longest time without writes %s", acked, failed, w.longestGap().Round(time.Millisecond))
}

// TestFailover: a primary with a synchronous standby, a store on a DSN
// naming both (read-write sessions only). The primary crashes under load:
// writes fail as unavailable until the standby is promoted, then resume
// on the same store without a restart, and every acknowledged write is
// on the promoted standby. The time without writes is reported.
func TestFailover(t *testing.T) {
	pgtest.Available(t)
	primary, err := pgtest.New("primary")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Remove() })
	dsn := primary.CreateDB(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.Standby(t.Context(), "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Remove() })
	s := open(t, postgres.Config{DSN: pgtest.MultiHostDSN(cfg.Database, primary, standby)})
	w := startWriters(t, s, 4)
	poll(t, "writes before the failover", 20*time.Second, func() bool { n, _ := w.counts(); return n >= 100 })

	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	_, failedBefore := w.counts()
	poll(t, "writes fail while no primary runs", 20*time.Second, func() bool { _, f := w.counts(); return f > failedBefore })
	ackedDown, _ := w.counts()
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	poll(t, "writes resume on the promoted standby", 30*time.Second, func() bool { n, _ := w.counts(); return n >= ackedDown+100 })
	w.halt()
	w.checkAcked(t, standby.DSN(cfg.Database))
	acked, failed := w.counts()
	t.Logf("%d writes acknowledged, %d refused as unavailable; time without writes (crash to first write on the promoted standby) %s",
		acked, failed, w.longestGap().Round(time.Millisecond))
}
