package move_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// smallFile is a bbolt ledger holding one drill report.
func smallFile(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/ledger.db"
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill("2026-10-07T13:00:00Z-small", []byte(`{}`)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// migrated is a new database with the schema and no data.
func migrated(t *testing.T) string {
	t.Helper()
	dsn := pgtest.CreateDB(t)
	if _, _, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// hasTable reports whether the database at dsn has table.
func hasTable(t *testing.T, dsn, table string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestAMoveRefusesADatabaseALedgerdHasOpen: a ledgerd's store open on
// the empty database, even one that has written nothing, makes a move
// refuse to begin, and so does a lease a ledgerd still holds; the refused
// move leaves nothing in the database. Once the store is closed and the
// lease released, the move runs.
func TestAMoveRefusesADatabaseALedgerdHasOpen(t *testing.T) {
	pgtest.Available(t)
	from := smallFile(t)
	dsn := migrated(t)
	cfg := move.Config{From: from, To: postgres.Config{DSN: dsn}}

	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	_, err = move.Run(t.Context(), cfg)
	if !errors.Is(err, move.ErrServed) {
		t.Errorf("move into a database a store has open: %v, want ErrServed", err)
	}
	if err != nil && !strings.Contains(err.Error(), "a ledgerd is running on this database: stop it first") {
		t.Errorf("refusal %q does not say to stop the ledgerd", err)
	}
	if hasTable(t, dsn, "ledger_move") {
		t.Errorf("the refused move left its record in the database")
	}
	token, err := pg.AcquireLease(t.Context(), "integrator", "replica-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = move.Run(t.Context(), cfg)
	if !errors.Is(err, move.ErrServed) || !strings.Contains(err.Error(), `"integrator"`) {
		t.Errorf("move into a database whose lease a ledgerd holds: %v, want ErrServed naming the lease", err)
	}

	pg, err = postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.ReleaseLease(t.Context(), "integrator", "replica-1", token); err != nil {
		t.Fatal(err)
	}
	if err := pg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := move.Run(t.Context(), cfg); err != nil {
		t.Fatalf("move once the ledgerd stopped: %v", err)
	}
}

// TestNoLedgerdWritesWhileAMoveRuns: while a move runs, a store cannot
// open the database (ErrMoveRunning), and a store opened before the move
// whose sessions had all closed (as an idle pool closes them) gets no new
// one: its writes fail during the move (ErrMoveRunning) and after it
// (ErrMovedSinceOpen), so nothing it acknowledges is lost to the move.
func TestNoLedgerdWritesWhileAMoveRuns(t *testing.T) {
	pgtest.Available(t)
	from := smallFile(t)
	dsn := migrated(t)

	early, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, CommitTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	write := func() error {
		return early.Update(t.Context(), func(tx ledger.Tx) error {
			return tx.PutDrill("2026-10-08T00:00:00Z-early", []byte(`{}`))
		})
	}
	// End the store's sessions, as pgxpool does with idle ones.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"); err != nil {
		t.Fatal(err)
	}

	copying, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}, OnChunk: func(bolt.ExportKind, int64) {
			close(copying)
			<-resume
		}})
		done <- err
	}()
	select {
	case <-copying:
	case err := <-done:
		t.Fatalf("the move ended before copying: %v", err)
	}
	_, err = postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if !errors.Is(err, postgres.ErrMoveRunning) {
		t.Errorf("open during the move: %v, want ErrMoveRunning", err)
	}
	if err := write(); !errors.Is(err, postgres.ErrMoveRunning) {
		t.Errorf("write of a store opened before the move, during it: %v, want ErrMoveRunning", err)
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatalf("move: %v", err)
	}
	if err := write(); !errors.Is(err, postgres.ErrMovedSinceOpen) {
		t.Errorf("write of a store opened before the move, after it: %v, want ErrMovedSinceOpen", err)
	}
	later, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("open after the move verified: %v", err)
	}
	defer later.Close()
	if err := later.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill("2026-10-09T00:00:00Z-later", []byte(`{}`)) }); err != nil {
		t.Errorf("write of a store opened after the move: %v", err)
	}
}

// TestTwoMovesOfOneDatabase: a second move of a database while the first
// runs stops at once with ErrConcurrent, before writing anything; the
// first then finishes.
func TestTwoMovesOfOneDatabase(t *testing.T) {
	pgtest.Available(t)
	from := smallFile(t)
	dsn := migrated(t)
	copying, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}, OnChunk: func(bolt.ExportKind, int64) {
			close(copying)
			<-resume
		}})
		done <- err
	}()
	select {
	case <-copying:
	case err := <-done:
		t.Fatalf("the first move ended before copying: %v", err)
	}
	_, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}})
	if !errors.Is(err, move.ErrConcurrent) {
		t.Errorf("second move: %v, want ErrConcurrent", err)
	}
	if err != nil && strings.Contains(err.Error(), "duplicate key") {
		t.Errorf("second move: %q speaks of the database's constraints", err)
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatalf("first move: %v", err)
	}
}

// TestAMoveRefusedForDataLeavesNoRecord: a move into a database that
// holds ledger data is refused (ErrNotEmpty) and leaves no record of a
// move there, and a ledgerd on the database whose sessions had all closed
// (as an idle pool closes them) goes on writing after it.
func TestAMoveRefusedForDataLeavesNoRecord(t *testing.T) {
	pgtest.Available(t)
	from := smallFile(t)
	dsn := migrated(t)
	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, CommitTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	write := func(id string) error {
		return pg.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill(id, []byte(`{}`)) })
	}
	if err := write("2026-10-08T00:00:00Z-before"); err != nil {
		t.Fatal(err)
	}
	endSessions(t, dsn)

	_, err = move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}})
	if !errors.Is(err, move.ErrNotEmpty) {
		t.Fatalf("move into a database holding a drill report: %v, want ErrNotEmpty", err)
	}
	if hasTable(t, dsn, "ledger_move") {
		t.Errorf("the refused move left its record's table in the database")
	}
	if err := write("2026-10-08T00:00:01Z-after"); err != nil {
		t.Errorf("write of the store after the refused move: %v", err)
	}
}

// TestAnEmptyMoveRecordIsNoMove: a ledgerd opened on a database that
// then gains an empty table of the move's record (as a move refused for
// the data it found left it, before 2026-12-07) goes on opening sessions
// and writing: no move began. Once a move that has not verified is
// recorded there, it opens none.
func TestAnEmptyMoveRecordIsNoMove(t *testing.T) {
	pgtest.Available(t)
	dsn := migrated(t)
	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, CommitTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	write := func(id string) error {
		return pg.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill(id, []byte(`{}`)) })
	}
	if err := write("2026-10-08T00:00:00Z-before"); err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `CREATE TABLE ledger_move (
    id smallint PRIMARY KEY CHECK (id = 1), source text NOT NULL, version bigint NOT NULL,
    started_ns bigint NOT NULL, copied_ns bigint, verified_ns bigint)`)
	endSessions(t, dsn)
	if err := write("2026-10-08T00:00:01Z-after"); err != nil {
		t.Errorf("write of the store on a database with an empty move record: %v", err)
	}
	// A move recorded there, begun and not verified, is one.
	exec(t, dsn, "INSERT INTO ledger_move (id, source, version, started_ns) VALUES (1, '/var/lib/ledger.db', 7, 0)")
	endSessions(t, dsn)
	if err := write("2026-10-08T00:00:02Z-moving"); !errors.Is(err, postgres.ErrMovedSinceOpen) {
		t.Errorf("write of the store on a database with a move begun since it opened: %v, want ErrMovedSinceOpen", err)
	}
}

// endSessions ends every session on the database at dsn, as pgxpool
// does with idle ones.
func endSessions(t *testing.T, dsn string) {
	t.Helper()
	exec(t, dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
}

// exec runs sql on the database at dsn in a session of its own.
func exec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestAMoveStopsWhenItsLockIsLost: a move whose session holding its
// locks on the database ends mid-move (a server's idle_session_timeout,
// pg_terminate_backend) stops before its next chunk, saying the lock was
// lost and to run the move again, and marks nothing verified; run again,
// it continues and verifies.
func TestAMoveStopsWhenItsLockIsLost(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	dsn := pgtest.CreateDB(t)
	var cut sync.Once
	cfg := move.Config{From: f.path, To: postgres.Config{DSN: dsn}, Chunk: 5, OnChunk: func(bolt.ExportKind, int64) {
		cut.Do(func() {
			// The session holding the move's lock, ended and waited for.
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var ended int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND (classid::bigint << 32 | objid::bigint) = $1`, postgres.MoveLockKey).Scan(&ended); err != nil || ended != 1 {
				t.Fatalf("end the session holding the move's lock: %d ended, %v", ended, err)
			}
		})
	}}
	_, err := move.Run(t.Context(), cfg)
	if !errors.Is(err, move.ErrLockLost) || !strings.Contains(err.Error(), "run the move again") {
		t.Fatalf("move whose lock's session ended: %v, want ErrLockLost saying to run the move again", err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var verified bool
	if err := conn.QueryRow(t.Context(), "SELECT verified_ns IS NOT NULL FROM ledger_move WHERE id = 1").Scan(&verified); err != nil || verified {
		t.Errorf("after the move stopped, its record is verified: %v, %v", verified, err)
	}
	rep, err := move.Run(t.Context(), move.Config{From: f.path, To: postgres.Config{DSN: dsn}})
	if err != nil || !rep.Resumed {
		t.Errorf("move run again: %v (%+v), want it to continue and verify", err, rep)
	}
}
