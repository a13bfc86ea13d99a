package move_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// copyOf copies the file at path into a directory of t's and returns
// the copy's path.
func copyOf(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(to, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

// markOf returns the file's mark of a move, nil when it has none.
func markOf(t *testing.T, path string) *bolt.Moved {
	t.Helper()
	e, err := bolt.OpenExport(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m, err := e.Moved()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkServes fails t unless ledgerd's open of the file (bolt.Open) and
// of the database (postgres.Open) do as want says: which one serves.
func checkServes(t *testing.T, path, dsn string, file, database bool) {
	t.Helper()
	s, err := bolt.Open(path, bolt.Config{})
	if err == nil {
		s.Close()
	}
	switch {
	case file && err != nil:
		t.Errorf("open of the file: %v, want it served", err)
	case !file && !errors.Is(err, bolt.ErrMoved):
		t.Errorf("open of the file: %v, want ErrMoved", err)
	}
	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err == nil {
		pg.Close()
	}
	switch {
	case database && err != nil:
		t.Errorf("open of the database: %v, want it served", err)
	case !database && !errors.Is(err, postgres.ErrMoveUnfinished):
		t.Errorf("open of the database: %v, want ErrMoveUnfinished", err)
	}
}

// TestMoveMarksTheFile: a move that verified marks the bbolt file as
// moved (the database named without its password, the time): ledgerd
// refuses the file from then on, and serves the database. The move run
// again verifies and writes nothing, to the file either; a move of the
// marked file into another database is refused.
func TestMoveMarksTheFile(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	dsn := pgtest.CreateDB(t)
	at := time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	cfg := move.Config{From: f.path, To: postgres.Config{DSN: dsn, Password: "not-to-be-kept"}, Progress: &out, Now: func() time.Time { return at }}
	rep, err := move.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out.String())
	}
	if !rep.MarkedFile || !strings.Contains(out.String(), "marked "+f.path+" as moved to postgres://") {
		t.Errorf("move: %+v, want the file marked\n%s", rep, out.String())
	}
	m := markOf(t, f.path)
	if m == nil || !m.At.Equal(at) || m.Store != "PostgreSQL" || !strings.HasPrefix(m.Database, "postgres://"+pgtest.User+"@127.0.0.1:") || strings.Contains(m.Database, "not-to-be-kept") {
		t.Fatalf("the file's mark: %+v", m)
	}
	checkServes(t, f.path, dsn, false, true)
	s, err := bolt.Open(f.path, bolt.Config{})
	if err == nil {
		s.Close()
	} else if !strings.Contains(err.Error(), "at 2026-12-08T10:00:00Z") || !strings.Contains(err.Error(), m.Database) || !strings.Contains(err.Error(), "run ledgerd on that store") {
		t.Errorf("refusal of the moved file: %q", err)
	}

	before, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	again, err := move.Run(t.Context(), cfg)
	if err != nil || !again.AlreadyMoved || again.MarkedFile || again.Copied != 0 {
		t.Fatalf("the move run again: %+v, %v\n%s", again, err, out.String())
	}
	other := pgtest.CreateDB(t)
	if _, err := move.Run(t.Context(), move.Config{From: f.path, To: postgres.Config{DSN: other}}); !errors.Is(err, move.ErrMovedElsewhere) || !strings.Contains(err.Error(), "ledgerd unmark-moved "+f.path) {
		t.Errorf("move of the marked file into another database: %v, want ErrMovedElsewhere", err)
	}
	if after, err := os.ReadFile(f.path); err != nil || !bytes.Equal(before, after) {
		t.Errorf("the moved file changed when the move ran again: %v", err)
	}
}

// TestMoveStoppedBeforeItsEnd: a move that stops after its verification
// (a crash) before it marked the file, or after it marked the file and
// before the database recorded the verification, completes when run
// again: it verifies again, marks the file when it lacks the mark, and
// records the verification. Stopped after the mark, neither the file nor
// the database is served meanwhile. A database a move verified whose
// file lacks the mark (a version that made none) gets it when the move
// runs again.
func TestMoveStoppedBeforeItsEnd(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	crash := errors.New("crash")

	t.Run("before the mark", func(t *testing.T) {
		from, dsn := copyOf(t, f.path), pgtest.CreateDB(t)
		move.StopBefore(t, "mark the file", crash)
		if _, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}}); !errors.Is(err, crash) {
			t.Fatalf("move stopped before the mark: %v", err)
		}
		if m := markOf(t, from); m != nil {
			t.Fatalf("the file is marked: %+v", m)
		}
		pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
		if err == nil {
			pg.Close()
		}
		if !errors.Is(err, postgres.ErrMoveUnfinished) {
			t.Errorf("open of the database: %v, want ErrMoveUnfinished", err)
		}
		move.StopBefore(t, "", nil)
		rep, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}})
		if err != nil || rep.Copied != 0 || !rep.MarkedFile {
			t.Fatalf("move run again: %+v, %v; want the file marked and nothing copied", rep, err)
		}
		checkServes(t, from, dsn, false, true)
	})

	t.Run("after the mark", func(t *testing.T) {
		from, dsn := copyOf(t, f.path), pgtest.CreateDB(t)
		move.StopBefore(t, "record the verification", crash)
		if _, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}}); !errors.Is(err, crash) {
			t.Fatalf("move stopped after the mark: %v", err)
		}
		checkServes(t, from, dsn, false, false)
		move.StopBefore(t, "", nil)
		rep, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}})
		if err != nil || rep.Copied != 0 || rep.MarkedFile || !rep.Resumed {
			t.Fatalf("move run again: %+v, %v; want it resumed, nothing copied or marked", rep, err)
		}
		checkServes(t, from, dsn, false, true)
	})

	t.Run("verified without a mark", func(t *testing.T) {
		from, dsn := copyOf(t, f.path), pgtest.CreateDB(t)
		move.StopBefore(t, "mark the file", crash)
		if _, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}}); !errors.Is(err, crash) {
			t.Fatal(err)
		}
		// As a version that did not mark the file left it.
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(t.Context(), "UPDATE ledger_move SET verified_ns = $1", time.Now().UnixNano())
		conn.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		move.StopBefore(t, "", nil)
		rep, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}})
		if err != nil || !rep.AlreadyMoved || !rep.MarkedFile {
			t.Fatalf("move run again: %+v, %v; want it verified again and the file marked", rep, err)
		}
		checkServes(t, from, dsn, false, true)
	})
}
