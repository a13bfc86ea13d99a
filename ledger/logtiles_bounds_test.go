package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pactledger/pactledger/ledger"
)

// A tile path no tree of this size holds is not found, whatever numbers
// it carries: a level whose leaves per hash pass 2^63 (levels 8 and up
// of tiles 8 high), an index whose leaves pass the largest tree, an
// entry bundle past the last leaf. None is read: such a path (public,
// under 64 bytes) once made the read loop 8×level times for each of the
// tile's hashes, answering levels 8 to 63 with bytes of no tile.
func TestTilePathsNoTreeHoldsAreNotFound(t *testing.T) {
	h := newHarness(t)
	h.startLog(t)
	h.queueReceipts(t, 0, 300) // and the policy leaf the log starts with
	if _, err := h.integrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"tile/0/000", "tile/0/001.p/44", "tile/1/000.p/1", "tile/entries/000"} {
		if _, err := h.l.TileData(context.Background(), p); err != nil {
			t.Fatalf("tile %s of a tree of 301: %v", p, err)
		}
	}
	for _, p := range []string{
		"tile/2/000.p/1", "tile/0/002", "tile/entries/001.p/46",
		"tile/7/000", "tile/7/000.p/128", "tile/7/000.p/200", // 2^56 leaves a hash: a full tile's 256 pass 2^63
		"tile/8/000", "tile/9/000.p/1", "tile/63/000", "tile/64/000",
		"tile/0/x036/x028/x797/x018/x963/968", // 2^63/256: its first leaf is past the largest tree
		"tile/entries/x036/x028/x797/x018/x963/968",
		"tile/999999999999999999/000",
	} {
		if _, err := h.l.TileData(context.Background(), p); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("tile %s of a tree of 301: %v; want not found", p, err)
		}
	}
}
