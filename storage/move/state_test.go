package move_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// divergence is an integrator's record that the log published to
// write-once storage is not the row store's (a row store restored from an
// older backup).
var divergence = []byte(`{"since":"2026-10-07T13:00:00Z","holder":"ledgerd-a","error":"the Merkle log in write-once storage is not this ledger's: the bucket's log/checkpoint has 40 leaves, this ledger's log 30"}`)

// divergedFile is the fixture's file with the integrator's record that the
// log diverged.
func divergedFile(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	store, err := bolt.Open(f.path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Update(t.Context(), func(tx ledger.Tx) error { return tx.SetLogDivergence(divergence) }); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAMoveKeepsTheLogsDivergenceRecord moves a bbolt file whose
// integrator recorded that the published log diverged: the database holds
// the same record (with the time it was found), so the replicas on it
// report the log diverged as the ledgerd on the file did, and the move
// verifies.
func TestAMoveKeepsTheLogsDivergenceRecord(t *testing.T) {
	pgtest.Available(t)
	f := divergedFile(t)
	dsn := pgtest.CreateDB(t)
	var out bytes.Buffer
	if _, err := move.Run(t.Context(), move.Config{From: f.path, To: postgres.Config{DSN: dsn}, Progress: &out}); err != nil {
		t.Fatalf("move: %v\n%s", err, out.String())
	}
	pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	var got []byte
	if err := pg.View(t.Context(), func(tx ledger.Tx) error { got, err = tx.LogDivergence(); return err }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, divergence) {
		t.Errorf("after the move the database's record of the log's divergence is %q, the file's was %q", got, divergence)
	}
}

// TestVerifyingAMoveComparesTheSequencesAndTheLogState: a run after a
// verified move fails with ErrMismatch once the database's row sequence
// (the drill pool's positions) or its record of the log's divergence no
// longer is the file's, and verifies again once it is.
func TestVerifyingAMoveComparesTheSequencesAndTheLogState(t *testing.T) {
	pgtest.Available(t)
	f := divergedFile(t)
	dsn := pgtest.CreateDB(t)
	cfg := move.Config{From: f.path, To: postgres.Config{DSN: dsn}}
	if _, err := move.Run(t.Context(), cfg); err != nil {
		t.Fatalf("move: %v", err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var rowSeq int64
	if err := conn.QueryRow(t.Context(), "SELECT last_value FROM ledger_rows_pool_seq").Scan(&rowSeq); err != nil || rowSeq == 0 {
		t.Fatalf("the row sequence after the move: %d, %v", rowSeq, err)
	}
	for _, c := range []struct {
		change, undo string
		undoArgs     []any
		earlier      bool // the database lacks the record, as a move by an earlier version left it
	}{
		{"SELECT setval('ledger_rows_pool_seq', last_value + 1) FROM ledger_rows_pool_seq", "SELECT setval('ledger_rows_pool_seq', last_value - 1) FROM ledger_rows_pool_seq", nil, false},
		{"DELETE FROM log_state WHERE name = 'diverged'", "INSERT INTO log_state (name, n, value) VALUES ('diverged', 0, $1)", []any{divergence}, true},
		{"UPDATE log_state SET value = 'null' WHERE name = 'diverged'", "UPDATE log_state SET value = $1 WHERE name = 'diverged'", []any{divergence}, false},
	} {
		exec(c.change)
		_, err := move.Run(t.Context(), cfg)
		if !errors.Is(err, move.ErrMismatch) || !strings.Contains(err.Error(), "sequences and log head") ||
			strings.Contains(fmt.Sprint(err), "or the move was made by a version before 2026-12-07") != c.earlier {
			t.Errorf("a run after %q: %v, want ErrMismatch naming the sequences and log head, and a move by an earlier version as a cause: %v", c.change, err, c.earlier)
		}
		exec(c.undo, c.undoArgs...)
		if rep, err := move.Run(t.Context(), cfg); err != nil || !rep.AlreadyMoved {
			t.Fatalf("a run after %q: %v, want the move verified again", c.undo, err)
		}
	}
}
