package move_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// A move verified by a version before the mark (the file unmarked, the
// move recorded verified), after which ledgerd ran on the database and
// recorded a row: the usual state of an install upgraded to this version.
// The move run again marks the file, unchanged since the move, without
// comparing it with the database that has moved on, and ledgerd then
// refuses the file.
func TestAMoveVerifiedBeforeMarksIsMarkedOnItsNextRun(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	from, dsn := copyOf(t, f.path), pgtest.CreateDB(t)
	move.StopBefore(t, "mark the file", errors.New("a version before the mark"))
	if _, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}}); err == nil {
		t.Fatal("want the stop")
	}
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
	// ledgerd on the database records a row.
	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	l := f.ledgerOn(t, pg)
	f.post(t, l, pacttest.Spec{Target: "after-the-move", At: f.clock().Add(-time.Second)})
	_ = l
	pg.Close()
	// The operator upgraded and runs the move again, as operations.md says.
	rep, err := move.Run(t.Context(), move.Config{From: from, To: postgres.Config{DSN: dsn}})
	t.Logf("move run again: %+v, %v", rep, err)
	if m := markOf(t, from); m == nil {
		s, err := bolt.Open(from, bolt.Config{})
		if err == nil {
			s.Close()
		}
		t.Fatalf("the file moved by a version before the mark is still unmarked (ledgerd's open of it: %v)", err)
	}
	if err != nil || !rep.MarkedFile {
		t.Fatalf("the move run again: %+v, %v; want it to mark the file", rep, err)
	}
	if s, err := bolt.Open(from, bolt.Config{}); !errors.Is(err, bolt.ErrMoved) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("ledgerd's open of the marked file: %v, want ErrMoved", err)
	}
}
