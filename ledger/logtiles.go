package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"
)

// The row store may drop the log's published tiles (LogPruner): once a
// full tile of 256 leaves and its entry bundle are in write-once storage
// and read back equal, the leaves and their stored hashes below level
// TileHeight leave the row store. The hash of each tile's subtree (level
// TileHeight) and every leaf's index stay. Reads of a dropped tile fetch
// it from write-once storage and check it against that kept hash: a tile
// or entry bundle altered there is an error, never an answer.

// tileCacheBytes bounds the cache of tiles and entry bundles read back
// from write-once storage: a proof needs one tile, an audit reads bundles
// in order.
const tileCacheBytes = 4 << 20

// pruneChunk is how many leaves one transaction drops at most.
const pruneChunk = 16 << TileHeight

// fullTile is level-0 tile n, complete.
func fullTile(n int64) tlog.Tile {
	return tlog.Tile{H: TileHeight, L: 0, N: n, W: 1 << TileHeight}
}

// logReader reads the log's leaves and stored hashes from a transaction
// and, for the tiles its store dropped, from write-once storage.
type logReader struct {
	l      *Ledger
	ctx    context.Context
	tx     LogTx
	pruned int64 // leading leaves the store dropped

	// The leaves of the dropped tile read last: reads in order (audits,
	// fsck) split each entry bundle once.
	lastTile   int64
	lastLeaves [][]byte
}

func (l *Ledger) logReader(ctx context.Context, tx LogTx) (*logReader, error) {
	r := &logReader{l: l, ctx: ctx, tx: tx}
	if p, ok := tx.(PrunedLog); ok {
		n, err := p.LogPruned()
		if err != nil {
			return nil, err
		}
		r.pruned = n
	}
	return r, nil
}

// droppedTile returns the level-0 tile of stored hash idx and whether the
// store dropped that hash.
func (r *logReader) droppedTile(idx int64) (int64, bool) {
	level, n := tlog.SplitStoredHashIndex(idx)
	if level >= TileHeight {
		return 0, false
	}
	tile := n >> uint(TileHeight-level)
	return tile, tile < r.pruned>>TileHeight
}

// ReadHashes implements tlog.HashReader.
func (r *logReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	if r.pruned == 0 {
		return r.tx.ReadHashes(indexes)
	}
	out := make([]tlog.Hash, len(indexes))
	var kept []int64
	var at []int
	for i, idx := range indexes {
		n, dropped := r.droppedTile(idx)
		if !dropped {
			kept, at = append(kept, idx), append(at, i)
			continue
		}
		data, err := r.hashTile(n)
		if err != nil {
			return nil, err
		}
		if out[i], err = tlog.HashFromTile(fullTile(n), data, idx); err != nil {
			return nil, err
		}
	}
	if err := readInto(r.tx, out, kept, at); err != nil {
		return nil, err
	}
	return out, nil
}

// hashTile returns the hashes of dropped tile n from write-once storage,
// checked against the stored hash of its subtree.
func (r *logReader) hashTile(n int64) ([]byte, error) {
	path := tilePath(fullTile(n))
	if data := r.l.log.tiles.get(path); data != nil {
		return data, nil
	}
	data, err := r.l.objects.Get(r.ctx, LogPrefix+path)
	if err != nil {
		return nil, tileReadError("tile", path, err)
	}
	want, err := r.tx.ReadHashes([]int64{tlog.StoredHashIndex(TileHeight, n)})
	if err != nil {
		return nil, err
	}
	if root, ok := tileRoot(data); !ok || root != want[0] {
		return nil, fmt.Errorf("log: the write-once copy of tile %s does not hash to the log's stored hash of its leaves: it was altered", path)
	}
	r.l.log.tiles.put(path, data)
	return data, nil
}

// tileReadError says why a tile kept only in write-once storage could not
// be read: the store is unreachable (ErrUnavailable: retry), or it does
// not hold the tile, which is not ErrNotFound since the leaf exists.
func tileReadError(what, path string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("log: %s %s is kept only in write-once storage, which does not hold it (%v)", what, path, err)
	}
	return fmt.Errorf("log: %s %s is kept only in write-once storage, which cannot be read now: %w (%v)", what, path, ErrUnavailable, err)
}

// tileRoot is the hash of the subtree whose leaf hashes a full level-0
// tile holds.
func tileRoot(data []byte) (tlog.Hash, bool) {
	if len(data) != tlog.HashSize<<TileHeight {
		return tlog.Hash{}, false
	}
	hs := make([]tlog.Hash, 1<<TileHeight)
	for i := range hs {
		copy(hs[i][:], data[i*tlog.HashSize:])
	}
	for len(hs) > 1 {
		for i := range len(hs) / 2 {
			hs[i] = tlog.NodeHash(hs[2*i], hs[2*i+1])
		}
		hs = hs[:len(hs)/2]
	}
	return hs[0], true
}

// Leaf returns the ref and bytes of the leaf at idx. A dropped leaf's ref
// is read from the leaf itself (its row, event or incident), "" for a
// leaf of a kind this version does not write.
func (r *logReader) Leaf(idx int64) (string, []byte, error) {
	if idx >= r.pruned {
		return r.tx.Leaf(idx)
	}
	n := idx >> TileHeight
	if r.lastLeaves == nil || r.lastTile != n {
		leaves, err := r.entries(n)
		if err != nil {
			return "", nil, err
		}
		r.lastTile, r.lastLeaves = n, leaves
	}
	data := slices.Clone(r.lastLeaves[idx-n<<TileHeight])
	return leafRef(data), data, nil
}

// entries returns the leaves of dropped tile n from its entry bundle in
// write-once storage, each checked against the tile's leaf hashes.
func (r *logReader) entries(n int64) ([][]byte, error) {
	path := entriesPath(fullTile(n))
	bundle := r.l.log.tiles.get(path)
	checked := bundle != nil
	if !checked {
		var err error
		if bundle, err = r.l.objects.Get(r.ctx, LogPrefix+path); err != nil {
			return nil, tileReadError("entry bundle", path, err)
		}
	}
	leaves, ok := splitBundle(bundle)
	if !ok || len(leaves) != 1<<TileHeight {
		return nil, fmt.Errorf("log: the write-once copy of entry bundle %s is not %d leaves: it was altered", path, 1<<TileHeight)
	}
	if checked {
		return leaves, nil
	}
	hashes, err := r.hashTile(n)
	if err != nil {
		return nil, err
	}
	for i, leaf := range leaves {
		if h := tlog.RecordHash(leaf); !bytes.Equal(h[:], hashes[i*tlog.HashSize:(i+1)*tlog.HashSize]) {
			return nil, fmt.Errorf("log: leaf %d in the write-once copy of entry bundle %s does not hash to the log's: it was altered", n<<TileHeight+int64(i), path)
		}
	}
	r.l.log.tiles.put(path, bundle)
	return leaves, nil
}

// splitBundle splits a C2SP entry bundle into its leaves.
func splitBundle(b []byte) ([][]byte, bool) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, false
		}
		out, b = append(out, b[2:2+n]), b[2+n:]
	}
	return out, true
}

// leafRef is the ref a leaf was logged under, from its own lines.
func leafRef(data []byte) string {
	f, err := ParseLeaf(data)
	if err != nil {
		return ""
	}
	switch f["kind"] {
	case LeafReceipt, LeafRefusal:
		return f["row"]
	case LeafDispute:
		if n, err := strconv.Atoi(f["event"]); err == nil {
			return disputeRef(f["row"], n)
		}
	case LeafIncidentClose:
		return incidentRef(f["incident"])
	case LeafPolicy:
		return policyRef(f["policy"])
	case LeafRevocation:
		return revocationRef(f["grant"], f["revoked"], f["admin"] == "yes", f["brand"], f["statement"])
	}
	return ""
}

// PrunePublished drops from the row store, when it can (LogPruner), the
// leaves and lower stored hashes of every full tile that write-once
// storage holds, after reading the tile and its entry bundle back and
// finding them equal to the row store's, as far as the store has room
// (PruneRoom). It returns how many leaves it dropped. With
// LogConfig.KeepPublished it does nothing.
func (l *Ledger) PrunePublished(ctx context.Context) (int64, error) {
	return l.prunePublished(ctx, 0, false, nil)
}

// PruneAllPublished is PrunePublished without the store's room: for a
// store no one else writes to, compacted right after (a bulk load, or
// ledgerd compact). progress, when not nil, is called after each
// transaction with the leaves dropped so far and the leaves of full
// published tiles the store held when it began.
func (l *Ledger) PruneAllPublished(ctx context.Context, progress func(dropped, of int64)) (int64, error) {
	return l.prunePublished(ctx, 0, true, progress)
}

// integratorPruneChunks is how many chunks of pruneChunk leaves the
// integrator drops a round at most, so that a file with many tiles to
// drop (after an upgrade) does not hold up the log's extension.
const integratorPruneChunks = 4

// prunePublished is PrunePublished, stopping after chunks transactions
// when chunks > 0, not asking the store's room with anyRoom, and telling
// progress how far it got.
func (l *Ledger) prunePublished(ctx context.Context, chunks int, anyRoom bool, progress func(dropped, of int64)) (int64, error) {
	if l.log == nil {
		return 0, ErrNoLog
	}
	if l.log.cfg.KeepPublished {
		return 0, nil
	}
	chunk := int64(pruneChunk)
	if anyRoom {
		chunk *= 16 // fewer, larger transactions: each writes the free list
	}
	var total, of int64
	for done := 0; chunks <= 0 || done < chunks; done++ {
		var from, to, published int64
		can := false
		if err := l.store.View(ctx, func(tx Tx) error {
			p, ok := tx.(LogPruner)
			if !ok {
				return nil
			}
			can = true
			var err error
			if from, err = p.LogPruned(); err != nil {
				return err
			}
			l.cfg.Metrics.logPruned(from)
			published, err = tx.TilesPublished()
			if err != nil {
				return err
			}
			full := published >> TileHeight << TileHeight
			if done == 0 {
				of = max(full-from, 0)
			}
			to = min(full, from+chunk)
			if anyRoom {
				return nil
			}
			room, err := p.PruneRoom()
			to = min(to, from+room)
			return err
		}); err != nil || !can || to <= from {
			return total, err
		}
		if done == 0 {
			// Tiles read back from a store that does not hold the log
			// published (another evidence directory or bucket than the
			// one it was published to) would leave the row store for a
			// copy no reader of the log finds.
			held, err := l.heldPublished(ctx)
			if err != nil {
				return total, fmt.Errorf("log: read the evidence store's checkpoint before dropping tiles from the row store: %w", err)
			}
			if err := l.publishedLogMissing(published, held); err != nil {
				return total, err
			}
		}
		for n := from >> TileHeight; n < to>>TileHeight; n++ {
			for _, path := range []string{tilePath(fullTile(n)), entriesPath(fullTile(n))} {
				own, err := l.tileData(ctx, path, false)
				if err != nil {
					return total, err
				}
				kept, err := l.objects.Get(ctx, LogPrefix+path)
				if err != nil {
					return total, fmt.Errorf("log: read back %s before dropping it from the row store: %w", path, err)
				}
				if !bytes.Equal(own, kept) {
					return total, fmt.Errorf("log: the write-once copy of %s differs from the row store's, which keeps its own", path)
				}
			}
		}
		if err := l.store.Update(ctx, func(tx Tx) error {
			p, ok := tx.(LogPruner)
			if !ok {
				return fmt.Errorf("log: the store no longer drops published tiles")
			}
			return p.PruneLog(to)
		}); err != nil {
			return total, err
		}
		total += to - from
		l.cfg.Metrics.logPruned(to)
		if progress != nil {
			progress(total, of)
		}
	}
	return total, nil
}
