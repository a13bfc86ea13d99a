package move_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestMoveAfterTilesLeftTheFile moves a bbolt file whose first tiles
// left it for write-once storage: the move verifies, and the ledger on
// the database reads those leaves and hashes from write-once storage,
// giving the same leaves and proofs.
func TestMoveAfterTilesLeftTheFile(t *testing.T) {
	pgtest.Available(t)
	f := newFixture(t)
	ctx := t.Context()
	store, err := bolt.Open(f.path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l := f.ledgerOn(t, store)
	size := growLog(t, store, l, "extra", 600)
	refs := []string{f.rows[0], "extra-0", "extra-300", "extra-599"}
	answers := func(l *ledger.Ledger) []string {
		t.Helper()
		leaves, err := l.Leaves(ctx, 0, int(size))
		if err != nil || int64(len(leaves)) != size {
			t.Fatalf("%d leaves of %d: %v", len(leaves), size, err)
		}
		var out []string
		for _, leaf := range leaves {
			out = append(out, string(leaf))
		}
		for _, ref := range refs {
			b, err := l.Proof(ctx, ref)
			if err != nil {
				t.Fatalf("proof of %s: %v", ref, err)
			}
			if _, err := b.Verify(f.vkey); err != nil {
				t.Fatalf("proof of %s: %v", ref, err)
			}
			out = append(out, fmt.Sprint(b.LeafIndex, b.Inclusion))
		}
		return out
	}
	before := answers(l)
	n, err := l.PrunePublished(ctx)
	if err != nil || n != size>>ledger.TileHeight<<ledger.TileHeight || n < 512 {
		t.Fatalf("pruned %d of %d leaves: %v", n, size, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	dsn := pgtest.CreateDB(t)
	if _, err := move.Run(ctx, move.Config{From: f.path, To: postgres.Config{DSN: dsn}}); err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	lp := f.ledgerOn(t, pg)
	if after := answers(lp); !slices.Equal(before, after) {
		t.Fatalf("the ledger on the database answers differently for leaves the file had dropped")
	}

	// On the database the log grows and drops its own published tiles.
	size = growLog(t, pg, lp, "more", 300)
	refs = append(refs, "more-0", "more-299")
	before = answers(lp)
	had := n
	if n, err = lp.PrunePublished(ctx); err != nil || had+n != size>>ledger.TileHeight<<ledger.TileHeight || n == 0 {
		t.Fatalf("the database dropped %d more leaves after %d, of %d: %v", n, had, size, err)
	}
	err = pg.View(ctx, func(tx ledger.Tx) error {
		if _, _, err := tx.Leaf(had + n - 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("leaf %d after the database dropped it: %v", had+n-1, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := answers(f.ledgerOn(t, pg)); !slices.Equal(before, after) {
		t.Fatalf("the ledger on the database answers differently for leaves it dropped itself")
	}
}

// growLog queues n receipt leaves named name-0 to name-(n-1) in store,
// has l integrate them and publish the tiles, and returns the log's size.
func growLog(t *testing.T, store ledger.Store, l *ledger.Ledger, name string, n int) int64 {
	t.Helper()
	ctx := t.Context()
	err := store.Update(ctx, func(tx ledger.Tx) error {
		for i := range n {
			// The lines the ledger writes in a receipt's leaf: a row's
			// proof holds its leaf to them.
			leaf := fmt.Appendf(nil, "%s\nkind %s\nrow %s-%d\nreceipt -\nrequest -\ntoken -\nevidence sha256:-\njwks - -\ngrant -\nstatus authorized\nclass read_only\nduplicate-of -\nrecorded -\n",
				ledger.LeafVersion, ledger.LeafReceipt, name, i)
			if err := tx.QueueLeaf(fmt.Sprintf("%s-%d", name, i), leaf); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	size, err := l.TreeSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return size
}
