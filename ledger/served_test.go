package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pactledger/pactledger/ledger"
)

// A checkpoint the integrator signed in the row store and has not
// published to write-once storage is never served, nor used for a
// proof, a consistency proof, a tile or the leaves read for audits: a row
// store restored from a backup taken before it would sign another tree
// at its size, and a reader holding it would hold a second history under
// the ledger's key. Its rows are not yet in a signed checkpoint
// (ErrNotLogged), as rows still queued are, until it is published.
func TestACheckpointNotPublishedIsNeverServed(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	vkey := h.enableLog(t, 0)

	// Integrated, not published: the empty tree is served.
	h.queue(t, 0, 2)
	if n, err := h.l.Integrate(ctx); err != nil || n != 2 {
		t.Fatalf("integrate: %d, %v", n, err)
	}
	if c := checkpointOf(t, h, vkey); c.Size != 0 {
		t.Errorf("served before the first publication: size %d, want the empty tree", c.Size)
	}
	if _, err := h.l.Proof(ctx, "ref-0"); !errors.Is(err, ledger.ErrNotLogged) {
		t.Errorf("proof before the first publication: %v, want ErrNotLogged", err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	published := readObject(t, h.objDir, ledger.LogPrefix+"checkpoint")
	if c := checkpointOf(t, h, vkey); c.Size != 2 {
		t.Fatalf("served once published: size %d, want 2", c.Size)
	}

	// Three more leaves signed in the row store, not published.
	h.queue(t, 2, 3)
	if n, err := h.l.Integrate(ctx); err != nil || n != 3 {
		t.Fatalf("integrate: %d, %v", n, err)
	}
	if size, err := h.l.TreeSize(ctx); err != nil || size != 5 {
		t.Fatalf("the row store's log: %d leaves, %v; want 5", size, err)
	}
	cp, err := h.l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(cp) != string(published) {
		t.Errorf("checkpoint served:\n%s\nwant the one write-once storage holds:\n%s", cp, published)
	}
	for _, ref := range []string{"ref-2", "ref-4"} {
		if b, err := h.l.Proof(ctx, ref); !errors.Is(err, ledger.ErrNotLogged) {
			t.Errorf("proof of %s, signed and not published: %+v, %v; want ErrNotLogged", ref, b, err)
		}
	}
	b, err := h.l.Proof(ctx, "ref-1")
	if err != nil {
		t.Fatal(err)
	}
	if b.Checkpoint != string(published) {
		t.Errorf("proof of ref-1 under:\n%s\nwant the published checkpoint", b.Checkpoint)
	}
	if _, err := b.Verify(vkey); err != nil {
		t.Errorf("proof of ref-1: %v", err)
	}
	if _, _, newCP, err := h.l.Consistency(ctx, 1, 0); err != nil || string(newCP) != string(published) {
		t.Errorf("consistency to the latest: %v, to\n%s\nwant the published checkpoint", err, newCP)
	}
	for _, to := range []int64{3, 5} {
		if _, _, _, err := h.l.Consistency(ctx, 2, to); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("consistency to %d, signed and not published: %v, want ErrInvalid", to, err)
		}
	}
	for _, p := range []string{"tile/0/000.p/5", "tile/entries/000.p/5"} {
		if _, err := h.l.TileData(ctx, p); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("tile %s, not published: %v, want ErrNotFound", p, err)
		}
	}
	if _, err := h.l.TileData(ctx, "tile/0/000.p/2"); err != nil {
		t.Errorf("tile of the published tree: %v", err)
	}
	if leaves, err := h.l.Leaves(ctx, 0, 10); err != nil || len(leaves) != 2 {
		t.Errorf("leaves: %d, %v; want the published tree's 2", len(leaves), err)
	}

	// Published: all of it is served.
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	if c := checkpointOf(t, h, vkey); c.Size != 5 {
		t.Errorf("served once published: size %d, want 5", c.Size)
	}
	if _, err := h.l.Proof(ctx, "ref-4"); err != nil {
		t.Errorf("proof once published: %v", err)
	}
}
