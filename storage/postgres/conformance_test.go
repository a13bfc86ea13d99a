package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// migrated creates a database with the schema for t and returns its DSN:
// a copy of a database migrated once per test binary.
func migrated(t *testing.T) string {
	t.Helper()
	c := pgtest.Shared(t)
	err := c.Template("ledger_schema", func(dsn string) error {
		_, _, err := postgres.Migrate(context.Background(), postgres.Config{DSN: dsn})
		return err
	})
	if err != nil {
		t.Fatalf("migrate the template database: %v", err)
	}
	return c.CreateDBFrom(t, "ledger_schema")
}

// open opens a store on dsn, closed when t ends.
func open(t *testing.T, cfg postgres.Config) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the row store conformance suite against
// PostgreSQL with one group commit at a time: each directory the suite
// names is a database of its own (the same directory after a restart is
// the same database).
func TestConformance(t *testing.T) { conformance(t, postgres.Config{Committers: 1}) }

// TestConformanceConcurrentBatches runs the suite with four group commits
// at once (the default), so that racing writers meet in different
// transactions.
func TestConformanceConcurrentBatches(t *testing.T) { conformance(t, postgres.Config{Committers: 4}) }

func conformance(t *testing.T, cfg postgres.Config) {
	var mu sync.Mutex
	dbs := map[string]string{}
	// An earlier version's entry: an entry is a row of request_jwts.
	earlier := func(t *testing.T, dir, sha, id string) {
		mu.Lock()
		dsn := dbs[dir]
		mu.Unlock()
		if n := sqlValue[int64](t, dsn, "WITH i AS (INSERT INTO request_jwts (sha, row_id) VALUES ($1, $2) RETURNING 1) SELECT count(*) FROM i", sha, id); n != 1 {
			t.Fatalf("%d request-JWT entries written, want 1", n)
		}
	}
	storetest.Run(t, func(t *testing.T, dir string) (ledger.Store, func() error) {
		mu.Lock()
		dsn, ok := dbs[dir]
		mu.Unlock()
		if !ok {
			dsn = migrated(t)
			mu.Lock()
			dbs[dir] = dsn
			mu.Unlock()
		}
		c := cfg
		c.DSN = dsn
		s, err := postgres.Open(t.Context(), c)
		if err != nil {
			t.Fatalf("open store on %s: %v", dsn, err)
		}
		return s, s.Close
	}, storetest.Options{EarlierRequestJWTEntry: earlier})
}
