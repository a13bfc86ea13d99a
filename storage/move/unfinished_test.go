package move_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestAHalfMovedDatabaseIsRefused: a move cut short leaves a database
// holding part of the ledger: rows without their log, or the log's
// leaves without its head and the sequences, which are copied last.
// Served, its log would start again from size 0 and sign checkpoints the
// file's log cannot be proved consistent with. postgres.Open, what
// ledgerd runs at start, refuses it and says to run the move again; the
// move run again continues it, and once it verified the database opens
// with the file's log.
func TestAHalfMovedDatabaseIsRefused(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	store, err := bolt.Open(f.path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := f.ledgerOn(t, store).Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := proof.Open(signed, f.vkey)
	if err != nil {
		t.Fatal(err)
	}
	if old.Size == 0 {
		t.Fatal("the fixture's log is empty: a refusal would prove nothing")
	}

	for _, stopIn := range []bolt.ExportKind{bolt.ExportRows, bolt.ExportLogHashes} {
		t.Run(string(stopIn), func(t *testing.T) {
			// A copy of the file each: a finished move marks its file
			// as moved, and a move of a marked file into another
			// database is refused.
			from := filepath.Join(t.TempDir(), "ledger.db")
			raw, err := os.ReadFile(f.path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(from, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			dsn := pgtest.CreateDB(t)
			ctx, cancel := context.WithCancel(t.Context())
			cfg := move.Config{From: from, To: postgres.Config{DSN: dsn}, Chunk: 5,
				OnChunk: func(k bolt.ExportKind, copied int64) {
					if k == stopIn && copied >= 5 {
						cancel()
					}
				}}
			_, err = move.Run(ctx, cfg)
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("move interrupted in %s: %v, want context.Canceled", stopIn, err)
			}

			pg, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
			if err == nil {
				pg.Close()
				t.Fatalf("postgres.Open took a database whose move was cut short in %s", stopIn)
			}
			if !errors.Is(err, postgres.ErrMoveUnfinished) {
				t.Fatalf("postgres.Open: %v, want postgres.ErrMoveUnfinished", err)
			}
			if !strings.Contains(err.Error(), "ledgerd migrate --from bbolt:"+from) {
				t.Errorf("refusal %q does not say to run the move from %s again", err, from)
			}

			cfg.OnChunk = nil
			rep, err := move.Run(t.Context(), cfg)
			if err != nil {
				t.Fatalf("the move run again: %v", err)
			}
			if !rep.Resumed {
				t.Errorf("the move run again: %+v, want it resumed", rep)
			}
			pg, err = postgres.Open(t.Context(), postgres.Config{DSN: dsn})
			if err != nil {
				t.Fatalf("postgres.Open after the move verified: %v", err)
			}
			defer pg.Close()
			served, err := f.ledgerOn(t, pg).Checkpoint(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if c, err := proof.Open(served, f.vkey); err != nil || c.Size != old.Size {
				t.Errorf("checkpoint of size %d on the moved database (%v), want the file's %d", c.Size, err, old.Size)
			}
		})
	}
}
