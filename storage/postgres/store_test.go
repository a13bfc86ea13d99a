package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/freeport"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// hexID is a row id of the ledger's shape.
func hexID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// row returns a row named by s.
func row(s string) *ledger.Row {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &ledger.Row{ID: hexID(s), ReceiptID: "sha256:" + hexID(s), Kind: ledger.KindReceipt, Status: ledger.Authorized,
		Principal: "user-1", GrantID: "grant-1", IssuedAt: at, RecordedAt: at, Dispute: ledger.DisputeNone, RetainUntil: at.Add(24 * time.Hour)}
}

// poll calls try until it returns true, failing t at the deadline.
func poll(t *testing.T, what string, deadline time.Duration, try func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !try() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		<-tick.C
	}
}

// sqlValue runs a one-value query on the database at dsn.
func sqlValue[T any](t *testing.T, dsn, sql string, args ...any) T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMigrateAndSchemaCheck: Open refuses a database without the schema
// and one whose schema is newer than the binary; Migrate creates the
// schema once and is a no-op after; Migrate refuses a newer schema too.
func TestMigrateAndSchemaCheck(t *testing.T) {
	dsn := pgtest.CreateDB(t)
	if _, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn}); !errors.Is(err, postgres.ErrNoSchema) {
		t.Fatalf("Open before migrating: %v, want ErrNoSchema", err)
	}
	want := postgres.SchemaVersion()
	if want < 1 {
		t.Fatalf("SchemaVersion %d: want the embedded migrations' newest version", want)
	}
	from, to, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn})
	if err != nil || from != 0 || to != want {
		t.Fatalf("first Migrate: %d -> %d, %v; want 0 -> %d", from, to, err, want)
	}
	from, to, err = postgres.Migrate(t.Context(), postgres.Config{DSN: dsn})
	if err != nil || from != want || to != want {
		t.Fatalf("second Migrate: %d -> %d, %v; want %d -> %d", from, to, err, want, want)
	}
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open after migrating: %v", err)
	}
	s.Close()
	// A later ledgerd migrated this database.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "INSERT INTO ledger_schema_version (version_id, is_applied) VALUES ($1, true)", want+1); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn}); !errors.Is(err, postgres.ErrSchemaNew) {
		t.Errorf("Open of a newer schema: %v, want ErrSchemaNew", err)
	}
	if _, _, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn}); !errors.Is(err, postgres.ErrSchemaNew) {
		t.Errorf("Migrate of a newer schema: %v, want ErrSchemaNew", err)
	}
}

// errSeen is what a writer returns when the row it would create is there.
var errSeen = errors.New("already recorded")

// raceAfterReads runs replica a's write, whose fn reads (read, which
// returns the row to create) and then creates that row; on fn's first
// run, replica b's write bWrite runs and commits between the two. It
// returns how many times a's fn ran and a's Update error.
func raceAfterReads(t *testing.T, a, b *postgres.Store, read func(ledger.Tx) (*ledger.Row, error), bWrite func(ledger.Tx) error) (int32, error) {
	t.Helper()
	readDone, stored := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- a.Update(t.Context(), func(tx ledger.Tx) error {
			n := runs.Add(1)
			w, err := read(tx)
			if err != nil {
				return err
			}
			if n == 1 {
				close(readDone)
				<-stored
			}
			return tx.CreateRow(w)
		})
	}()
	select {
	case <-readDone:
	case err := <-done:
		t.Fatalf("replica A ended before replica B wrote: %v", err)
	}
	if err := b.Update(t.Context(), bWrite); err != nil {
		t.Fatalf("replica B: %v", err)
	}
	close(stored)
	err := <-done
	return runs.Load(), err
}

// TestReplicasRaceOnOneRow: two stores on one database (two replicas).
// Replica A reads that a row is absent, then replica B stores it; A's
// create finds the row taken, A's fn runs again, sees B's row and answers
// as the ledger does (already recorded). Exactly one row is stored, B's.
func TestReplicasRaceOnOneRow(t *testing.T) {
	dsn := migrated(t)
	a, b := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})
	r := row("the same receipt")
	n, err := raceAfterReads(t, a, b, func(tx ledger.Tx) (*ledger.Row, error) {
		if _, err := tx.Row(r.ID); err == nil {
			return nil, errSeen
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return nil, err
		}
		w := *r
		w.Principal = "replica-a"
		return &w, nil
	}, func(tx ledger.Tx) error { return tx.CreateRow(r) })
	if !errors.Is(err, errSeen) {
		t.Fatalf("replica A: %v, want its fn to run again and see the row", err)
	}
	if n != 2 {
		t.Errorf("replica A's fn ran %d times, want 2", n)
	}
	if err := a.View(t.Context(), func(tx ledger.Tx) error {
		got, err := tx.Row(r.ID)
		if err == nil && got.Principal != r.Principal {
			t.Errorf("stored row by %s, want replica B's", got.Principal)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasRaceOnOneRequestJWT: replica A reads that no row used a
// request JWT, then replica B stores a row that does; A's row would claim
// the index too, so A's fn runs again, finds B's row first and records
// its own as B's duplicate. The index names B's row.
func TestReplicasRaceOnOneRequestJWT(t *testing.T) {
	dsn := migrated(t)
	a, b := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})
	sha := hexID("one request JWT")
	ra, rb := row("receipt a"), row("receipt b")
	ra.RequestJWTSHA256, rb.RequestJWTSHA256 = sha, sha
	n, err := raceAfterReads(t, a, b, func(tx ledger.Tx) (*ledger.Row, error) {
		first, err := tx.RowByRequestJWT(sha)
		if err != nil {
			return nil, err
		}
		w := *ra
		w.Verifier.DuplicateOf = first
		if first != "" {
			w.Status = ledger.Duplicate
		}
		return &w, nil
	}, func(tx ledger.Tx) error { return tx.CreateRow(rb) })
	if err != nil {
		t.Fatalf("replica A: %v", err)
	}
	if n != 2 {
		t.Errorf("replica A's fn ran %d times, want 2", n)
	}
	if err := a.View(t.Context(), func(tx ledger.Tx) error {
		first, err := tx.RowByRequestJWT(sha)
		if err != nil {
			return err
		}
		if first != rb.ID {
			t.Errorf("the index names %s, want replica B's row %s", first, rb.ID)
		}
		got, err := tx.Row(ra.ID)
		if err != nil {
			return err
		}
		if got.Verifier.DuplicateOf != rb.ID || got.Status != ledger.Duplicate {
			t.Errorf("replica A's row: duplicate of %q, status %s; want a duplicate of %s", got.Verifier.DuplicateOf, got.Status, rb.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// dedupe is the ledger's rule on r's request JWT: r as written, a
// duplicate of the first row that used either encoding of it, if any.
func dedupe(tx ledger.Tx, r *ledger.Row) (*ledger.Row, error) {
	w := *r
	for _, sha := range []string{r.RequestJWTSHA256, r.RequestJWTTwinSHA256} {
		first, err := tx.RowByRequestJWT(sha)
		if err != nil {
			return nil, err
		}
		if first != "" && first != w.ID {
			w.Verifier.DuplicateOf, w.Status = first, ledger.Duplicate
			break
		}
	}
	return &w, nil
}

// TestDuplicateLeavesTheTwinEntryFree: a row stored before the twin was
// indexed (or moved from bbolt) holds its request JWT's hash only. Its
// duplicate posting the same request JWT takes no entry, so that a later
// post of the twin still finds the first row, not the duplicate.
func TestDuplicateLeavesTheTwinEntryFree(t *testing.T) {
	s := open(t, postgres.Config{DSN: migrated(t)})
	h1, h2 := hexID("request JWT (r, s)"), hexID("request JWT (r, n-s)")
	first := row("stored before the twin was indexed")
	first.RequestJWTSHA256 = h1
	dup := row("its duplicate")
	dup.RequestJWTSHA256, dup.RequestJWTTwinSHA256 = h1, h2
	later := row("the twin, later")
	later.RequestJWTSHA256, later.RequestJWTTwinSHA256 = h2, h1
	for _, r := range []*ledger.Row{first, dup, later} {
		if err := s.Update(t.Context(), func(tx ledger.Tx) error {
			w, err := dedupe(tx, r)
			if err != nil {
				return err
			}
			return tx.CreateRow(w)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		for _, r := range []*ledger.Row{dup, later} {
			got, err := tx.Row(r.ID)
			if err != nil {
				return err
			}
			if got.Verifier.DuplicateOf != first.ID {
				return fmt.Errorf("row %s: a duplicate of %s, want of the first row %s (the duplicate is %s)", r.ID, got.Verifier.DuplicateOf, first.ID, dup.ID)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasRaceOnTwinRequestJWTs: an ES256 request JWT and its
// malleated twin hash differently, and the ledger's dedupe reads both.
// Replica A reads both as unused, then replica B stores a row posting the
// twin; each row is indexed under both hashes, so A's fn runs again,
// finds B's row and records its own as B's duplicate: one request, one
// first row. Once B's row is removed, neither hash names a row.
func TestReplicasRaceOnTwinRequestJWTs(t *testing.T) {
	dsn := migrated(t)
	a, b := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})
	shaA, shaB := hexID("request JWT (r, s)"), hexID("request JWT (r, n-s)")
	ra, rb := row("receipt a"), row("receipt b")
	ra.RequestJWTSHA256, ra.RequestJWTTwinSHA256 = shaA, shaB
	rb.RequestJWTSHA256, rb.RequestJWTTwinSHA256 = shaB, shaA
	n, err := raceAfterReads(t, a, b, func(tx ledger.Tx) (*ledger.Row, error) { return dedupe(tx, ra) }, func(tx ledger.Tx) error {
		w, err := dedupe(tx, rb)
		if err != nil {
			return err
		}
		return tx.CreateRow(w)
	})
	if err != nil {
		t.Fatalf("replica A: %v", err)
	}
	if n != 2 {
		t.Errorf("replica A's fn ran %d times, want 2", n)
	}
	var stored2 *ledger.Row
	if err := a.View(t.Context(), func(tx ledger.Tx) error {
		for _, sha := range []string{shaA, shaB} {
			if first, err := tx.RowByRequestJWT(sha); err != nil || first != rb.ID {
				return fmt.Errorf("the index under %s names %q (%v), want replica B's row %s", sha, first, err, rb.ID)
			}
		}
		got, err := tx.Row(ra.ID)
		if err != nil {
			return err
		}
		if got.Verifier.DuplicateOf != rb.ID || got.Status != ledger.Duplicate {
			return fmt.Errorf("replica A's row: duplicate of %q, status %s; want a duplicate of %s", got.Verifier.DuplicateOf, got.Status, rb.ID)
		}
		stored2, err = tx.Row(rb.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(t.Context(), func(tx ledger.Tx) error {
		return tx.RemoveRow(stored2, ledger.Tombstone{ID: rb.ID})
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.View(t.Context(), func(tx ledger.Tx) error {
		for _, sha := range []string{shaA, shaB} {
			if first, err := tx.RowByRequestJWT(sha); err != nil || first != "" {
				return fmt.Errorf("after B's row was removed, the index under %s names %q (%v), want none", sha, first, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPasswordStaysOutOfErrors: a password given in the DSN or the
// configuration never shows in an error.
func TestPasswordStaysOutOfErrors(t *testing.T) {
	const secret = "s3cret-Pa55word"
	for _, cfg := range []postgres.Config{
		{DSN: "host=127.0.0.1 port=1 user=ledger password=" + secret + " dbname=x sslmode=disable connect_timeout=2"},
		{DSN: "postgres://ledger:" + secret + "@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"},
		{DSN: "host=127.0.0.1 port=1 user=ledger dbname=x sslmode=disable", Password: secret},
		{DSN: "host=127.0.0.1 port=1 user=ledger password=" + secret + " dbname=x sslmode=disable bogus_setting"},
	} {
		_, err := postgres.Open(t.Context(), cfg)
		if err == nil {
			t.Fatalf("Open of an unreachable database succeeded")
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the password: %v", err)
		}
		_, _, err = postgres.Migrate(t.Context(), cfg)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Migrate: %v", err)
		}
	}
}

// TestMultiHostFirstDown: a DSN naming a host that is down first and the
// database second connects to the second.
func TestMultiHostFirstDown(t *testing.T) {
	c := pgtest.Shared(t)
	dsn := migrated(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	down := freePort(t)
	multi := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=%s dbname=%s sslmode=disable target_session_attrs=read-write", down, c.Port, pgtest.User, cfg.Database)
	s := open(t, postgres.Config{DSN: multi})
	r := row("through the second host")
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(r) }); err != nil {
		t.Fatalf("write through a multi-host DSN: %v", err)
	}
	if n := sqlValue[int](t, dsn, "SELECT count(*) FROM ledger_rows WHERE id = $1", r.ID); n != 1 {
		t.Errorf("the row is not in the database the second host serves")
	}
}
