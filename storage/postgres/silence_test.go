package postgres_test

import (
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
