package move_test

import (
	"cmp"
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// Two moves of one file into two databases, both begun before either
// marked the file (both hold the file's shared, read-only lock while they
// copy), and both reach their mark together. Whichever marks the file
// first completes; the other finds that mark, not its own, and is refused
// (ErrMovedElsewhere) without recording its database as verified: only
// one database is served as the ledger.
func TestTwoMovesOfOneFileMarkItOnce(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	dbA, dbB := pgtest.CreateDB(t), pgtest.CreateDB(t)
	// Move A copies and verifies, stopped before its mark (as if still
	// running beside B).
	crash := errors.New("A paused")
	move.StopBefore(t, "mark the file", crash)
	if _, err := move.Run(t.Context(), move.Config{From: f.path, To: postgres.Config{DSN: dbA}}); !errors.Is(err, crash) {
		t.Fatalf("move A: %v", err)
	}
	// Move B runs up to its own mark; there, move A is run again beside
	// it (both hold the file's shared lock, read-only), and B goes on
	// once A reached its own mark. Whichever of the two marks the file
	// first, the other's MarkMoved returns that mark without an error.
	aAtMark := make(chan struct{})
	aDone := make(chan error, 1)
	var calls int
	move.OnStep(t, func(name string) error {
		if name != "mark the file" {
			return nil
		}
		calls++
		switch calls {
		case 1: // B
			go func() {
				_, err := move.Run(t.Context(), move.Config{From: f.path, To: postgres.Config{DSN: dbA}, LockTimeout: time.Minute})
				aDone <- err
			}()
			<-aAtMark
		case 2: // A
			close(aAtMark)
		}
		return nil
	})
	_, errB := move.Run(t.Context(), move.Config{From: f.path, To: postgres.Config{DSN: dbB}, LockTimeout: time.Minute})
	errRunA := <-aDone
	t.Logf("move A: %v", errRunA)
	m := markOf(t, f.path)
	t.Logf("mark: %+v; move B: %v", m, errB)
	pgA, errA := postgres.Open(t.Context(), postgres.Config{DSN: dbA})
	if errA == nil {
		pgA.Close()
	}
	pgB, errOpenB := postgres.Open(t.Context(), postgres.Config{DSN: dbB})
	if errOpenB == nil {
		pgB.Close()
	}
	if (errA == nil) == (errOpenB == nil) {
		t.Fatalf("databases served as the ledger moved from %s: A %v, B %v; want exactly one (the file's mark names %s)", f.path, errA == nil, errOpenB == nil, m.Database)
	}
	// Whichever marked the file first completed; the other was refused.
	if (errRunA == nil) == (errB == nil) || !errors.Is(cmp.Or(errRunA, errB), move.ErrMovedElsewhere) {
		t.Fatalf("move A: %v; move B: %v; want one to complete and the other refused with ErrMovedElsewhere", errRunA, errB)
	}
}
