package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// When the row store records the log as published up to a size at which
// it holds no signed checkpoint (a record changed outside the ledger),
// the ledger serves no checkpoint and says why (ErrPublishedSizeUnsigned):
// a row whose leaf is signed and published is not answered as having no
// leaf (ErrNoLeaf), nor the checkpoint as not found.
func TestAPublishedSizeWithoutACheckpointIsSaidSo(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.enableLog(t, 0)
	first, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "RV-1"})))
	if _, err := h.integrate(ctx); err != nil { // signed and published
		t.Fatal(err)
	}
	published, err := h.l.TreeSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"RV-2", "RV-3", "RV-4"} {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: target})))
	}
	if n, err := h.l.Integrate(ctx); err != nil || n != 3 { // one checkpoint, 3 leaves later
		t.Fatalf("integrate: %d, %v", n, err)
	}
	// The record of publication points between two signed sizes.
	if err := h.store.Update(ctx, func(tx ledger.Tx) error { return tx.SetTilesPublished(published + 1) }); err != nil {
		t.Fatal(err)
	}
	_, err = h.l.Proof(ctx, first.ID)
	if errors.Is(err, ledger.ErrNoLeaf) || errors.Is(err, ledger.ErrNotFound) || !errors.Is(err, ledger.ErrPublishedSizeUnsigned) {
		t.Errorf("proof of row %s, whose leaf is signed and published: %v; want the inconsistent publication record, not a row without a leaf", first.ID, err)
	}
	if _, err := h.l.Checkpoint(ctx); errors.Is(err, ledger.ErrNotFound) || !errors.Is(err, ledger.ErrPublishedSizeUnsigned) {
		t.Errorf("checkpoint: %v; an ErrNotFound is served as 404 and logged nowhere", err)
	}
}
