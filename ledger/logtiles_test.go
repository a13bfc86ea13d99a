package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	lproof "github.com/pactledger/pactledger/ledger/proof"
	"github.com/pactledger/pactledger/storage/localdir"
)

// queueReceipts queues n leaves of kind receipt, each naming its ref as
// its row, as rows' transactions do.
func (h *harness) queueReceipts(t *testing.T, from, n int) {
	t.Helper()
	err := h.store.Update(context.Background(), func(tx ledger.Tx) error {
		for i := from; i < from+n; i++ {
			leaf := receiptLeaf(fmt.Sprintf("ref-%d", i), fmt.Sprintf("2026-10-07T13:12:45.%06dZ", i))
			if err := tx.QueueLeaf(fmt.Sprintf("ref-%d", i), leaf); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// settleLog integrates every queued leaf, publishes the tiles and drops
// the published full tiles from the row store; it fails t unless want
// leaves were dropped.
func (h *harness) settleLog(t *testing.T, want int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := h.l.PrunePublished(ctx); err != nil || n != want {
		t.Fatalf("dropped %d leaves from the row store, want %d: %v", n, want, err)
	}
}

// logAnswers is what the log answers for its first n leaves under the
// latest checkpoint: every leaf's proof, the leaves, the consistency
// proofs from earlier sizes, and every tile.
func logAnswers(t *testing.T, h *harness, n int, earlier []int64) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for i := range n {
		b, err := h.l.Proof(ctx, fmt.Sprintf("ref-%d", i))
		if err != nil {
			t.Fatalf("proof of leaf %d: %v", i, err)
		}
		out = append(out, fmt.Sprint(b.LeafIndex, b.Leaf, b.Inclusion, string(b.Checkpoint)))
	}
	leaves, err := h.l.Leaves(ctx, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves {
		out = append(out, string(l))
	}
	for _, from := range earlier {
		path, _, _, err := h.l.Consistency(ctx, from, 0)
		if err != nil {
			t.Fatalf("consistency from %d: %v", from, err)
		}
		out = append(out, fmt.Sprint(path))
	}
	size, err := h.l.TreeSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tile := range tlog.NewTiles(ledger.TileHeight, 0, size) {
		paths := []string{strings.Replace(tile.Path(), "tile/8/", "tile/", 1)}
		if tile.L == 0 {
			paths = append(paths, strings.Replace(tile.Path(), "tile/8/0/", "tile/entries/", 1))
		}
		for _, p := range paths {
			d, err := h.l.TileData(ctx, p)
			if err != nil {
				t.Fatalf("tile %s: %v", p, err)
			}
			out = append(out, p+string(d))
		}
	}
	return out
}

// storeHolds reports whether the row store itself still holds leaf i and
// its leaf hash, and finds the leaf's index by its ref.
func storeHolds(t *testing.T, h *harness, i int64) (leaf, hash bool) {
	t.Helper()
	err := h.store.View(context.Background(), func(tx ledger.Tx) error {
		_, _, err := tx.Leaf(i)
		leaf = err == nil
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return err
		}
		_, err = tx.ReadHashes([]int64{tlog.StoredHashIndex(0, i)})
		hash = err == nil
		if idx, err := tx.LeafIndex(fmt.Sprintf("ref-%d", i)); err != nil || idx != i {
			return fmt.Errorf("leaf index of ref-%d: %d %v", i, idx, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return leaf, hash
}

// alter rewrites an object of the local evidence directory, as someone
// with access to the disk could.
func alter(t *testing.T, h *harness, key string, fn func([]byte) []byte) (restore func()) {
	t.Helper()
	p := filepath.Join(h.objDir, filepath.FromSlash(key))
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	write := func(b []byte) {
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	write(fn(slices.Clone(orig)))
	return func() { write(orig) }
}

// TestPublishedTilesLeaveTheRowStore: once write-once storage holds a full
// tile and its entry bundle, the row store drops its leaves and lower
// hashes, and every answer of the log stays the same, read back from the
// tiles and checked against the hashes the row store keeps.
func TestPublishedTilesLeaveTheRowStore(t *testing.T) {
	h := newHarness(t)
	vkey := h.enableLog(t, 0)
	ctx := context.Background()
	earlier := []int64{1, 100, 256, 700}
	done := 0
	for _, size := range append(earlier, 1000) {
		h.queueReceipts(t, done, int(size)-done)
		done = int(size)
		if _, err := h.l.Integrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := h.l.PrunePublished(ctx); err != nil || n != 0 {
		t.Fatalf("pruned %d leaves before publication: %v", n, err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	// What the log answers once published (it serves nothing before),
	// from the row store alone.
	at1000 := checkpointOf(t, h, vkey)
	before := logAnswers(t, h, 1000, earlier)

	// Write-once storage's copy of a tile differs: nothing is dropped.
	restore := alter(t, h, "log/tile/entries/002", func(b []byte) []byte { return append(b[:len(b)-1], '!') })
	if n, err := h.l.PrunePublished(ctx); err == nil || !strings.Contains(err.Error(), "differs") || n != 0 {
		t.Fatalf("prune with an altered entry bundle: %d leaves, %v", n, err)
	}
	if leaf, hash := storeHolds(t, h, 0); !leaf || !hash {
		t.Fatal("leaf 0 was dropped though a tile of its chunk did not read back equal")
	}
	restore()

	if n, err := h.l.PrunePublished(ctx); err != nil || n != 768 {
		t.Fatalf("pruned %d leaves, want the 3 full tiles' 768: %v", n, err)
	}
	for _, i := range []int64{0, 255, 256, 767} {
		if leaf, hash := storeHolds(t, h, i); leaf || hash {
			t.Fatalf("leaf %d still in the row store (leaf %v, hash %v)", i, leaf, hash)
		}
	}
	if leaf, hash := storeHolds(t, h, 768); !leaf || !hash {
		t.Fatal("leaf 768, in the partial tile, left the row store")
	}
	after := logAnswers(t, h, 1000, earlier)
	for i := range min(len(before), len(after)) {
		if before[i] != after[i] {
			t.Fatalf("answer %d changed once the tiles left the row store:\n%.300s\nnow\n%.300s", i, before[i], after[i])
		}
	}
	if len(before) != len(after) {
		t.Fatalf("%d answers before, %d after", len(before), len(after))
	}

	// The log grows on and the next full tiles go.
	h.queueReceipts(t, 1000, 300)
	h.settleLog(t, 512) // tiles 3 and 4

	// Altered in write-once storage after it left the row store: an
	// error, never an answer.
	restore = alter(t, h, "log/tile/0/003", func(b []byte) []byte { b[40] ^= 1; return b })
	if _, err := h.l.Proof(ctx, "ref-1000"); err == nil || !strings.Contains(err.Error(), "altered") {
		t.Fatalf("proof through an altered tile: %v", err)
	}
	restore()
	restore = alter(t, h, "log/tile/entries/003", func(b []byte) []byte {
		return []byte(strings.Replace(string(b), "row ref-1001\n", "row ref-1011\n", 1))
	})
	if _, err := h.l.Leaves(ctx, 1001, 1); err == nil || !strings.Contains(err.Error(), "altered") {
		t.Fatalf("leaf from an altered entry bundle: %v", err)
	}
	restore()

	// Missing from write-once storage: an error, and not "not found",
	// since the leaf exists.
	gone := filepath.Join(h.objDir, "log", "tile", "entries", "004")
	if err := os.Rename(gone, gone+".away"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Proof(ctx, "ref-1100"); err == nil || errors.Is(err, ledger.ErrNotFound) || !strings.Contains(err.Error(), "does not hold it") {
		t.Fatalf("proof through a missing entry bundle: %v", err)
	}
	if err := os.Rename(gone+".away", gone); err != nil {
		t.Fatal(err)
	}

	last := checkpointOf(t, h, vkey)
	for _, i := range []int{0, 300, 767, 1000, 1001, 1023, 1100, 1299} {
		b, err := h.l.Proof(ctx, fmt.Sprintf("ref-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Verify(vkey); err != nil || b.LeafIndex != int64(i) {
			t.Fatalf("leaf %d: index %d, %v", i, b.LeafIndex, err)
		}
	}
	path, _, _, err := h.l.Consistency(ctx, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := lproof.VerifyConsistency(at1000, last, path); err != nil {
		t.Fatalf("consistency 1000 → %d across dropped tiles: %v", last.Size, err)
	}
}

// TestKeepPublishedKeepsTheLog: with KeepPublished the row store keeps
// every leaf.
func TestKeepPublishedKeepsTheLog(t *testing.T) {
	h := newHarness(t)
	s, _ := logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: s, KeepPublished: true}); err != nil {
		t.Fatal(err)
	}
	h.queueReceipts(t, 0, 600)
	h.settleLog(t, 0)
	if leaf, hash := storeHolds(t, h, 0); !leaf || !hash {
		t.Fatal("leaf 0 left the row store with KeepPublished")
	}
}

// roomStore is a store whose transactions have a set room for dropping
// published tiles, which each drop uses up, as freed pages do.
type roomStore struct {
	ledger.Store
	room *int64
}

type roomTx struct {
	ledger.Tx
	room *int64
}

func (t roomTx) pruner() ledger.LogPruner  { return t.Tx.(ledger.LogPruner) }
func (t roomTx) LogPruned() (int64, error) { return t.pruner().LogPruned() }
func (t roomTx) PruneRoom() (int64, error) { return *t.room, nil }

func (t roomTx) PruneLog(below int64) error {
	from, err := t.pruner().LogPruned()
	if err != nil {
		return err
	}
	if below-from > *t.room {
		return fmt.Errorf("dropping %d leaves with room for %d", below-from, *t.room)
	}
	*t.room -= below - from
	return t.pruner().PruneLog(below)
}

func (s roomStore) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.Update(ctx, func(tx ledger.Tx) error { return fn(roomTx{tx, s.room}) })
}

func (s roomStore) View(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.View(ctx, func(tx ledger.Tx) error { return fn(roomTx{tx, s.room}) })
}

// TestPruneWaitsForRoom: the ledger drops no more than the store has room
// for, and PruneAllPublished, for a store compacted right after, drops
// every published full tile.
func TestPruneWaitsForRoom(t *testing.T) {
	room := int64(0)
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC),
		wrap: func(s ledger.Store) ledger.Store { return roomStore{s, &room} }}
	t.Cleanup(h.sc.Close)
	h.open(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	h.queueReceipts(t, 0, 1100)
	h.settleLog(t, 0) // four full tiles, no room
	for _, step := range []struct{ room, want int64 }{{512, 512}, {0, 0}, {10000, 512}} {
		room = step.room
		if n, err := h.l.PrunePublished(ctx); err != nil || n != step.want {
			t.Fatalf("dropped %d leaves with room for %d, want %d: %v", n, step.room, step.want, err)
		}
	}
	room = 0
	h.queueReceipts(t, 1100, 1000)
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	room = 1 << 40 // PruneAllPublished does not ask; the store still counts
	if n, err := h.l.PruneAllPublished(ctx, nil); err != nil || n != 2048-1024 {
		t.Fatalf("PruneAllPublished dropped %d leaves, want %d: %v", n, 2048-1024, err)
	}
}

// TestPruneRefusesAStoreWithoutThePublishedLog: a ledger given another
// evidence store than the one its log was published to, one that holds
// copies of the tiles and no checkpoint of the log, drops no leaf from
// the row store, and publishes nothing there: either would record a
// publication no reader of the log's own store sees. On its own store
// the tiles go.
func TestPruneRefusesAStoreWithoutThePublishedLog(t *testing.T) {
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	h.queueReceipts(t, 0, 1000)
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.CopyFS(filepath.Join(other, "log", "tile"), os.DirFS(filepath.Join(h.objDir, "log", "tile"))); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	objects, err := localdir.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	h.objects = objects
	h.open(t)
	h.enableLog(t, 0)
	n, err := h.l.PrunePublished(ctx)
	if !errors.Is(err, ledger.ErrPublishedLogMissing) || !strings.Contains(err.Error(), other) || n != 0 {
		t.Fatalf("prune on a store without the published log: %d leaves, %v", n, err)
	}
	if leaf, hash := storeHolds(t, h, 0); !leaf || !hash {
		t.Fatal("leaf 0 left the row store")
	}
	h.queueReceipts(t, 1000, 10)
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Refused, here for the tiles no checkpoint vouches for already.
	if err := h.l.PublishTiles(ctx); err == nil {
		t.Fatal("published to a store without the published log")
	}
	if _, err := os.Stat(filepath.Join(other, "log", "checkpoint")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a checkpoint was published to the other store: %v", err)
	}

	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	h.objects = nil
	h.open(t)
	h.enableLog(t, 0)
	if err := h.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := h.l.PrunePublished(ctx); err != nil || n != 768 {
		t.Fatalf("pruned %d leaves on the ledger's own store, want 768: %v", n, err)
	}
}
