package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// A ledger that published its log, given a new evidence store, publishes
// nothing to it while it holds none of the log; once every object under
// log/ is copied into it, as operations.md says to move the log on
// purpose, the ledger finds its published log there and goes on.
func TestALedgerGivenANewStoreWithACopyOfItsLogPublishes(t *testing.T) {
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	h.queueReceipts(t, 0, 300)
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	old := h.objDir
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	objects, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	h.objects = objects
	h.open(t)
	h.enableLog(t, 0)
	h.queueReceipts(t, 300, 10)
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.l.PublishTiles(ctx); !errors.Is(err, ledger.ErrPublishedLogMissing) {
		t.Fatalf("a new store without the log: %v, want ErrPublishedLogMissing", err)
	}
	if err := os.CopyFS(filepath.Join(dir, "log"), os.DirFS(filepath.Join(old, "log"))); err != nil {
		t.Fatal(err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatalf("a new store holding a copy of the log: %v", err)
	}
}
