package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger"
)

// The Merkle log's buckets: leaves waiting for an index (by commit
// sequence), stored hashes (by storage index), leaves (by index), the
// index of each ref, and signed checkpoints (by size).
var (
	bLogPending = []byte("log_pending")
	bLogHashes  = []byte("log_hashes")
	bLogLeaves  = []byte("log_leaves")
	// bLogIndex: a leaf's ref (idKey) -> its index, for refs that are
	// not a stored row's id (a stored row's is kept by its number in
	// bRowLeaves).
	bLogIndex = []byte("leaf_index")
	bLogCPs   = []byte("log_checkpoints")

	kLogPendingN = []byte("log_pending_n")
	kLogSize     = []byte("log_size")
	kLogHead     = []byte("log_head")
	kLogTiles    = []byte("log_tiles_published")
	// kLogPruned: how many leading leaves were dropped once their tiles
	// were in write-once storage (ledger.LogPruner).
	kLogPruned = []byte("log_pruned")
	// kLogDiverged: the integrator's record of a divergence of the log
	// published to write-once storage (ledger.LogTx.LogDivergence).
	kLogDiverged = []byte("log_diverged")
)

func init() {
	allBuckets = append(allBuckets, bLogPending, bLogHashes, bLogLeaves, bLogIndex, bLogCPs)
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// QueueLeaf implements ledger.LogTx.
func (t *tx) QueueLeaf(ref string, data []byte) error {
	seq, err := t.counter(kLogPendingN, 1)
	if err != nil {
		return err
	}
	return t.b(bLogPending).Put(u64(seq), storedLeaf(ref, data))
}

// LeafQueued implements ledger.LogTx: a walk of the queue comparing each
// leaf's ref where it lies in the file, copying nothing. The queue holds
// the leaves written since the integrator's last round (every half
// second) and so is short; an index of its refs would cost every row's
// commit a write at a random key, for proofs asked of rows not yet
// logged.
func (t *tx) LeafQueued(ref string) (bool, error) {
	c := t.b(bLogPending).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		r := reader{b: v}
		got := r.str()
		if r.bad {
			return false, fmt.Errorf("pending leaf %x: corrupt", k)
		}
		if got == ref {
			return true, nil
		}
	}
	return false, nil
}

// PendingLeaves implements ledger.LogTx.
func (t *tx) PendingLeaves(n int) ([]ledger.PendingLeaf, error) {
	var out []ledger.PendingLeaf
	c := t.b(bLogPending).Cursor()
	for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
		ref, data, err := splitLeaf(v)
		if err != nil {
			return nil, fmt.Errorf("pending leaf %x: %w", k, err)
		}
		out = append(out, ledger.PendingLeaf{Seq: binary.BigEndian.Uint64(k), Ref: ref, Data: data})
	}
	return out, nil
}

// storedLeaf is a leaf as bLogPending and bLogLeaves keep it: its ref's
// length, the ref and its bytes. A sequenced leaf stays in the file only
// until its tile is published (PruneLog), so it is kept as it is:
// compressing it against the file's dictionary cost more than any other
// value of a row (the encoder restores its whole table for each value),
// for bytes that leave the file within a tile. Leaves an earlier version
// stored compressed still read (decodeLeaf): a stored leaf starts with a
// ref's length, never zstd's magic, whose second byte is not text.
func storedLeaf(ref string, data []byte) []byte {
	return append(appendStrings(make([]byte, 0, binary.MaxVarintLen64+len(ref)+len(data)), ref), data...)
}

// splitLeaf splits a leaf storedLeaf made into its ref and a copy of its
// bytes.
func splitLeaf(v []byte) (string, []byte, error) {
	r := reader{b: v}
	ref := r.str()
	if r.bad {
		return "", nil, errors.New("corrupt")
	}
	return ref, append([]byte(nil), r.b...), nil
}

// SequenceLeaf implements ledger.LogTx: refused, with nothing written,
// when the index is taken or the ref already has a leaf index.
func (t *tx) SequenceLeaf(p ledger.PendingLeaf, index, hashAt int64, hashes []tlog.Hash) error {
	if t.get(bLogLeaves, u64(uint64(index))) != nil {
		return fmt.Errorf("log: leaf %d is already taken", index)
	}
	// The ref's index first: a ref that has one refuses the leaf before
	// anything of it is written.
	if err := t.addLeafIndex(p.Ref, index); err != nil {
		return err
	}
	for i, h := range hashes {
		if err := t.b(bLogHashes).Put(u64(uint64(hashAt+int64(i))), append([]byte(nil), h[:]...)); err != nil {
			return err
		}
	}
	if err := t.b(bLogLeaves).Put(u64(uint64(index)), storedLeaf(p.Ref, p.Data)); err != nil {
		return err
	}
	return t.b(bLogPending).Delete(u64(p.Seq))
}

// DropQueuedLeaf implements ledger.LogTx.
func (t *tx) DropQueuedLeaf(p ledger.PendingLeaf) error {
	k := u64(p.Seq)
	v := t.get(bLogPending, k)
	if v == nil {
		return nil
	}
	if ref, _, err := splitLeaf(v); err != nil || ref != p.Ref {
		return fmt.Errorf("log: queued leaf %d is not one of %s", p.Seq, p.Ref)
	}
	return t.b(bLogPending).Delete(k)
}

// ReadHashes implements ledger.LogTx.
func (t *tx) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	b := t.b(bLogHashes)
	for i, idx := range indexes {
		v := b.Get(u64(uint64(idx)))
		if len(v) != tlog.HashSize {
			return nil, fmt.Errorf("%w: log: no stored hash %d", ledger.ErrNotFound, idx)
		}
		copy(out[i][:], v)
	}
	return out, nil
}

// Leaf implements ledger.LogTx.
func (t *tx) Leaf(index int64) (string, []byte, error) {
	v := t.get(bLogLeaves, u64(uint64(index)))
	if v == nil {
		return "", nil, fmt.Errorf("%w: leaf %d", ledger.ErrNotFound, index)
	}
	ref, data, err := decodeLeaf(t.c, v)
	if err != nil {
		return "", nil, fmt.Errorf("leaf %d: %w", index, err)
	}
	return ref, data, nil
}

// decodeLeaf splits a stored leaf into its ref and bytes.
func decodeLeaf(c *Codec, v []byte) (string, []byte, error) {
	v, err := c.Decode(v)
	if err != nil {
		return "", nil, err
	}
	return splitLeaf(v)
}

// LeafIndex implements ledger.LogTx.
func (t *tx) LeafIndex(ref string) (int64, error) {
	idx, ok, err := t.leafIndex(ref)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, fmt.Errorf("%w: no leaf for %s", ledger.ErrNotFound, ref)
	}
	return idx, nil
}

// leafIndex is LeafIndex, ok false when ref has no leaf index.
func (t *tx) leafIndex(ref string) (int64, bool, error) {
	k := idKey(ref)
	v := t.rowSeqValue(k)
	switch {
	case len(v) == 16: // written before layout 4
	case len(v) == 8:
		leaf, err := rowLeaf(t.b(bRowLeaves), v)
		if err != nil {
			return 0, false, fmt.Errorf("leaf index of %s: %w", ref, err)
		}
		if v = leaf; v == nil {
			v = t.get(bLogIndex, k)
		}
	default:
		v = t.get(bLogIndex, k)
	}
	if len(v) < 8 {
		return 0, false, nil
	}
	return int64(binary.BigEndian.Uint64(v[len(v)-8:])), true, nil
}

// LeafIndexes implements ledger.LogTx.
func (t *tx) LeafIndexes(refs []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, ref := range refs {
		idx, ok, err := t.leafIndex(ref)
		if err != nil {
			return nil, err
		}
		if ok {
			out[ref] = idx
		}
	}
	return out, nil
}

// addLeafIndex records that ref's leaf is at index, as putLeafIndex
// does, and refuses a ref that has a leaf index already (by its row's
// number, or by its id: a removed row's, another leaf's ref), wrapping
// ledger.ErrRefLogged: a ref's index is given once and never moved.
func (t *tx) addLeafIndex(ref string, index int64) error {
	k := idKey(ref)
	had := t.get(bLogIndex, k)
	if seq := t.rowNumberOf(k); seq != nil && had == nil {
		old, err := rowLeaf(t.b(bRowLeaves), seq)
		if err != nil {
			return fmt.Errorf("leaf index of %s: %w", ref, err)
		}
		if old == nil {
			return insertEntry(t.b(bRowLeaves), nil, posting{binary.BigEndian.Uint64(seq), uint64(index)})
		}
		had = old
	}
	if len(had) >= 8 {
		return fmt.Errorf("log: leaf %d of %s: %w (leaf %d)", index, ref, ledger.ErrRefLogged, binary.BigEndian.Uint64(had[len(had)-8:]))
	}
	return t.b(bLogIndex).Put(k, u64(uint64(index)))
}

// putLeafIndex records that ref's leaf is at index: by the row's number
// in bRowLeaves when ref is a stored row's id (the integrator takes leaves
// in commit order, so these entries are appended), else in bLogIndex.
func (t *tx) putLeafIndex(ref string, index int64) error {
	if seq := t.seqOf(ref); seq != nil {
		return putRowLeaf(t.b(bRowLeaves), seq, uint64(index))
	}
	return t.b(bLogIndex).Put(idKey(ref), u64(uint64(index)))
}

// SetLogHead implements ledger.LogTx.
func (t *tx) SetLogHead(size int64, cp []byte) error {
	if err := t.b(bMeta).Put(kLogSize, u64(uint64(size))); err != nil {
		return err
	}
	if err := t.b(bMeta).Put(kLogHead, cp); err != nil {
		return err
	}
	return t.b(bLogCPs).Put(u64(uint64(size)), cp)
}

// LogHead implements ledger.LogTx.
func (t *tx) LogHead() (int64, []byte, error) {
	v := t.get(bMeta, kLogSize)
	if len(v) != 8 {
		return 0, nil, nil
	}
	return int64(binary.BigEndian.Uint64(v)), append([]byte(nil), t.get(bMeta, kLogHead)...), nil
}

// CheckpointAt implements ledger.LogTx.
func (t *tx) CheckpointAt(size int64) ([]byte, error) {
	v := t.get(bLogCPs, u64(uint64(size)))
	if v == nil {
		return nil, fmt.Errorf("%w: checkpoint at size %d", ledger.ErrNotFound, size)
	}
	return append([]byte(nil), v...), nil
}

// TilesPublished implements ledger.LogTx.
func (t *tx) TilesPublished() (int64, error) {
	v := t.get(bMeta, kLogTiles)
	if len(v) != 8 {
		return 0, nil
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// SetTilesPublished implements ledger.LogTx.
func (t *tx) SetTilesPublished(size int64) error {
	return t.b(bMeta).Put(kLogTiles, u64(uint64(size)))
}

// LogDivergence implements ledger.LogTx.
func (t *tx) LogDivergence() ([]byte, error) {
	if v := t.get(bMeta, kLogDiverged); v != nil {
		return append([]byte(nil), v...), nil
	}
	return nil, nil
}

// SetLogDivergence implements ledger.LogTx.
func (t *tx) SetLogDivergence(record []byte) error {
	if record == nil {
		return t.b(bMeta).Delete(kLogDiverged)
	}
	return t.b(bMeta).Put(kLogDiverged, record)
}

// LogPruned implements ledger.PrunedLog.
func (t *tx) LogPruned() (int64, error) {
	v := t.get(bMeta, kLogPruned)
	if len(v) != 8 {
		return 0, nil
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// tileLeaves is the number of leaves of a full level-0 tile.
const tileLeaves = 1 << ledger.TileHeight

// pruneFreePages bounds the free pages a prune may leave in the file.
// Every commit writes the free list (docs/design/010), so pages freed
// faster than writes reuse them would make every later commit write and
// sort a long list: a file of ten million rows dropping its whole log at
// once would leave about a million.
const pruneFreePages = 4096

// leavesPerFreePage is how many dropped leaves free about a page: a leaf's
// text and its two stored hashes take about 420 bytes; counted low.
const leavesPerFreePage = 8

// PruneRoom implements ledger.LogPruner: the leaves it may drop before
// the file's free pages reach pruneFreePages, in whole tiles.
func (t *tx) PruneRoom() (int64, error) {
	st := t.tx.DB().Stats()
	free := st.FreePageN + st.PendingPageN
	if free >= pruneFreePages {
		return 0, nil
	}
	return int64(pruneFreePages-free) * leavesPerFreePage / tileLeaves * tileLeaves, nil
}

// PruneLog implements ledger.LogPruner: the leaves from the last prune up
// to below, and the stored hashes they added at levels below the tile
// height, are deleted. Both buckets are keyed by an index that grows with
// the leaf, so the deleted keys are one run at the front of each.
func (t *tx) PruneLog(below int64) error {
	p, ok, err := ledger.PlanPrune(t, below)
	if err != nil || !ok {
		return err
	}
	leaves := t.b(bLogLeaves)
	for i := p.From; i < below; i++ {
		if err := leaves.Delete(u64(uint64(i))); err != nil {
			return err
		}
	}
	hashes := t.b(bLogHashes)
	keep := p.Keep
	for idx := p.First; idx < p.Last; idx++ {
		if len(keep) > 0 && keep[0] == idx {
			keep = keep[1:]
			continue
		}
		if err := hashes.Delete(u64(uint64(idx))); err != nil {
			return err
		}
	}
	return t.b(bMeta).Put(kLogPruned, u64(uint64(below)))
}
