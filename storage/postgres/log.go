package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger"
)

// QueueLeaf implements ledger.LogTx: leaves queue in sequence order,
// which is assigned when the leaf is sent, a deferred write (group.go).
func (t *tx) QueueLeaf(ref string, data []byte) error {
	if !t.write {
		return errReadOnly
	}
	if err := t.blocked(); err != nil {
		return err
	}
	d := t.deferred()
	d.leaves = append(d.leaves, leafWrite{ref: ref, data: data})
	return nil
}

// PendingLeaves implements ledger.LogTx.
func (t *tx) PendingLeaves(n int) ([]ledger.PendingLeaf, error) {
	if err := t.see(tabLeaves); err != nil {
		return nil, err
	}
	var out []ledger.PendingLeaf
	err := t.query("read queued leaves", "SELECT seq, ref, data FROM log_pending ORDER BY seq LIMIT $1", []any{n}, func(r pgx.Rows) error {
		var p ledger.PendingLeaf
		var seq int64
		if err := r.Scan(&seq, &p.Ref, &p.Data); err != nil {
			return err
		}
		p.Seq = uint64(seq)
		out = append(out, p)
		return nil
	})
	return out, err
}

// LeafQueued implements ledger.LogTx: one lookup of the ref in
// log_pending's index (log_pending_by_ref), in the transaction's snapshot.
func (t *tx) LeafQueued(ref string) (bool, error) {
	if err := t.see(tabLeaves); err != nil {
		return false, err
	}
	var queued bool
	_, err := t.queryRow("look up a queued leaf", "SELECT EXISTS (SELECT FROM log_pending WHERE ref = $1)", []any{ref}, &queued)
	return queued, err
}

// SequenceLeaf implements ledger.LogTx: the leaf takes its index
// (refused, with nothing written, when the index is taken, or when its
// ref already has an index or comes twice in the calls held), its hashes
// and ref index are stored and it leaves the queue. Consecutive calls go
// in one statement with the next round trip, whose error a taken index
// or ref is.
func (t *tx) SequenceLeaf(p ledger.PendingLeaf, index, hashAt int64, hashes []tlog.Hash) error {
	if !t.writing() {
		return errReadOnly
	}
	if err := t.blocked(); err != nil {
		return err
	}
	t.seqLeaves = append(t.seqLeaves, seqLeaf{p: p, index: index, hashAt: hashAt, hashes: hashes})
	return nil
}

// DropQueuedLeaf implements ledger.LogTx.
func (t *tx) DropQueuedLeaf(p ledger.PendingLeaf) error {
	return t.exec("DELETE FROM log_pending WHERE seq = $1 AND ref = $2", int64(p.Seq), p.Ref)
}

// seqLeaf is a SequenceLeaf call not queued yet.
type seqLeaf struct {
	p             ledger.PendingLeaf
	index, hashAt int64
	hashes        []tlog.Hash
}

// queueLeaves queues the SequenceLeaf calls held, in one statement. A ref
// already in log_index, or twice among the calls, stores none of them
// (the statement answers which); a ref given an index by a transaction
// that commits meanwhile fails log_index's key.
func (t *tx) queueLeaves() {
	ls := t.seqLeaves
	if len(ls) == 0 {
		return
	}
	t.seqLeaves = nil
	t.begin()
	var (
		idx, seqs, hashLeaf, hashIdx []int64
		refs                         []string
		data, hashes                 [][]byte
	)
	for _, l := range ls {
		idx, refs, data, seqs = append(idx, l.index), append(refs, l.p.Ref), append(data, l.p.Data), append(seqs, int64(l.p.Seq))
		for i, h := range l.hashes {
			hashLeaf, hashIdx, hashes = append(hashLeaf, l.index), append(hashIdx, l.hashAt+int64(i)), append(hashes, h[:])
		}
	}
	t.b.Queue(`
WITH l AS (
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::bigint[]) AS u (idx, ref, data, seq)
), taken AS (
	SELECT i.ref, i.idx FROM log_index i JOIN l ON l.ref = i.ref
	UNION ALL
	SELECT ref, NULL FROM l GROUP BY ref HAVING count(*) > 1
), ok AS (
	SELECT * FROM l WHERE NOT EXISTS (SELECT FROM taken)
), leaf AS (
	INSERT INTO log_leaves (idx, ref, data) SELECT idx, ref, data FROM ok
	ON CONFLICT (idx) DO NOTHING
	RETURNING idx
), h AS (
	INSERT INTO log_hashes (idx, hash)
	SELECT u.i, u.h FROM unnest($5::bigint[], $6::bigint[], $7::bytea[]) AS u (leaf, i, h) JOIN leaf ON leaf.idx = u.leaf
	ON CONFLICT (idx) DO UPDATE SET hash = EXCLUDED.hash
), x AS (
	INSERT INTO log_index (ref, idx)
	SELECT ok.ref, ok.idx FROM ok JOIN leaf ON leaf.idx = ok.idx
), q AS (
	DELETE FROM log_pending p USING ok JOIN leaf ON leaf.idx = ok.idx WHERE p.seq = ok.seq
)
SELECT idx, NULL, NULL FROM leaf
UNION ALL
SELECT NULL, ref, idx FROM taken`, idx, refs, data, seqs, hashLeaf, hashIdx, hashes).Query(func(rows pgx.Rows) error {
		stored := map[int64]bool{}
		var taken []string
		for rows.Next() {
			var i, had *int64
			var ref *string
			if err := rows.Scan(&i, &ref, &had); err != nil {
				return fmt.Errorf("sequence leaves: %w", err)
			}
			switch {
			case i != nil:
				stored[*i] = true
			case had != nil:
				taken = append(taken, fmt.Sprintf("%s (leaf %d)", *ref, *had))
			case ref != nil:
				taken = append(taken, *ref+" (twice)")
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sequence leaves: %w", err)
		}
		if len(taken) > 0 {
			return fmt.Errorf("log: sequence leaves of %s: %w", strings.Join(taken, ", "), ledger.ErrRefLogged)
		}
		for _, l := range ls {
			if !stored[l.index] {
				return fmt.Errorf("log: leaf %d is already taken", l.index)
			}
		}
		return nil
	})
}

// ReadHashes implements ledger.LogTx: one primary-key read per index, all
// in one round trip (an "= ANY" over the indexes was read by a sequential
// scan of the whole table while its statistics were stale).
func (t *tx) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	if err := t.blocked(); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		t.push("SELECT hash FROM log_hashes WHERE idx = $1", idx).Query(func(rows pgx.Rows) error {
			if !rows.Next() {
				if err := rows.Err(); err != nil {
					return err
				}
				return fmt.Errorf("log: no stored hash %d", idx)
			}
			var h []byte
			if err := rows.Scan(&h); err != nil {
				return err
			}
			if len(h) != tlog.HashSize {
				return fmt.Errorf("log: stored hash %d has %d bytes", idx, len(h))
			}
			out[i] = tlog.Hash(h)
			rows.Close()
			return rows.Err()
		})
	}
	if err := t.flush("read log hashes"); err != nil {
		return nil, err
	}
	return out, nil
}

// Leaf implements ledger.LogTx.
func (t *tx) Leaf(index int64) (string, []byte, error) {
	var ref string
	var data []byte
	found, err := t.queryRow(fmt.Sprint("read leaf ", index), "SELECT ref, data FROM log_leaves WHERE idx = $1", []any{index}, &ref, &data)
	if err != nil {
		return "", nil, err
	}
	if !found {
		return "", nil, fmt.Errorf("%w: leaf %d", ledger.ErrNotFound, index)
	}
	return ref, data, nil
}

// LeafIndex implements ledger.LogTx.
func (t *tx) LeafIndex(ref string) (int64, error) {
	var idx int64
	found, err := t.queryRow("read the leaf index of "+ref, "SELECT idx FROM log_index WHERE ref = $1", []any{ref}, &idx)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%w: no leaf for %s", ledger.ErrNotFound, ref)
	}
	return idx, nil
}

// LeafIndexes implements ledger.LogTx: one primary-key read per ref, all
// in one round trip (as ReadHashes).
func (t *tx) LeafIndexes(refs []string) (map[string]int64, error) {
	if err := t.blocked(); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, ref := range refs {
		t.push("SELECT idx FROM log_index WHERE ref = $1", ref).Query(func(rows pgx.Rows) error {
			if !rows.Next() {
				return rows.Err()
			}
			var idx int64
			if err := rows.Scan(&idx); err != nil {
				return err
			}
			out[ref] = idx
			rows.Close()
			return rows.Err()
		})
	}
	if err := t.flush("read leaf indexes"); err != nil {
		return nil, err
	}
	return out, nil
}

// SetLogHead implements ledger.LogTx.
func (t *tx) SetLogHead(size int64, cp []byte) error {
	return t.exec(`
WITH c AS (
	INSERT INTO log_checkpoints (size, checkpoint) VALUES ($1, $2)
	ON CONFLICT (size) DO UPDATE SET checkpoint = EXCLUDED.checkpoint
)
INSERT INTO log_state (name, n, value) VALUES ('head', $1, $2)
ON CONFLICT (name) DO UPDATE SET n = EXCLUDED.n, value = EXCLUDED.value`, size, cp)
}

// LogHead implements ledger.LogTx.
func (t *tx) LogHead() (int64, []byte, error) {
	var size int64
	var cp []byte
	found, err := t.queryRow("read the log head", "SELECT n, value FROM log_state WHERE name = 'head'", nil, &size, &cp)
	if err != nil || !found {
		return 0, nil, err
	}
	return size, cp, nil
}

// CheckpointAt implements ledger.LogTx.
func (t *tx) CheckpointAt(size int64) ([]byte, error) {
	var cp []byte
	found, err := t.queryRow(fmt.Sprint("read the checkpoint at size ", size), "SELECT checkpoint FROM log_checkpoints WHERE size = $1", []any{size}, &cp)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: checkpoint at size %d", ledger.ErrNotFound, size)
	}
	return cp, nil
}

// TilesPublished implements ledger.LogTx.
func (t *tx) TilesPublished() (int64, error) {
	var n int64
	_, err := t.queryRow("read the published tile size", "SELECT n FROM log_state WHERE name = 'tiles'", nil, &n)
	return n, err
}

// SetTilesPublished implements ledger.LogTx.
func (t *tx) SetTilesPublished(size int64) error {
	return t.exec("INSERT INTO log_state (name, n) VALUES ('tiles', $1) ON CONFLICT (name) DO UPDATE SET n = EXCLUDED.n", size)
}

// LogDivergence implements ledger.LogTx.
func (t *tx) LogDivergence() ([]byte, error) {
	var record []byte
	_, err := t.queryRow("read the log's divergence record", "SELECT value FROM log_state WHERE name = 'diverged'", nil, &record)
	return record, err
}

// SetLogDivergence implements ledger.LogTx.
func (t *tx) SetLogDivergence(record []byte) error {
	if record == nil {
		return t.exec("DELETE FROM log_state WHERE name = 'diverged'")
	}
	return t.exec("INSERT INTO log_state (name, n, value) VALUES ('diverged', 0, $1) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value", record)
}

// LogPruned implements ledger.PrunedLog: how many leading leaves were
// dropped, by this store (PruneLog) or by the bbolt file a ledger moved
// from.
func (t *tx) LogPruned() (int64, error) {
	var n int64
	_, err := t.queryRow("read the leaves kept only in tiles", "SELECT n FROM log_state WHERE name = 'pruned'", nil, &n)
	return n, err
}

// pruneRoom is what PruneRoom allows: PostgreSQL keeps no free list that
// every commit writes (the deleted rows' space is vacuumed), so the
// integrator's own bound on a round is the only one.
const pruneRoom = 1 << 40

// PruneRoom implements ledger.LogPruner.
func (t *tx) PruneRoom() (int64, error) { return pruneRoom, nil }

// PruneLog implements ledger.LogPruner: the leaves from the last prune up
// to below, and the stored hashes they added at levels below the tile
// height, are deleted (two range deletes on the primary keys); every
// leaf's index, the hashes at the tile height and above and the
// checkpoints stay. Replicas pruning at once agree: the count only grows.
func (t *tx) PruneLog(below int64) error {
	p, ok, err := ledger.PlanPrune(t, below)
	if err != nil || !ok {
		return err
	}
	// p.Keep is never nil: ALL of NULL would delete nothing.
	return t.exec(`
WITH l AS (
	DELETE FROM log_leaves WHERE idx >= $1 AND idx < $2
), h AS (
	DELETE FROM log_hashes WHERE idx >= $3 AND idx < $4 AND idx <> ALL($5::bigint[])
)
INSERT INTO log_state (name, n) VALUES ('pruned', $2)
ON CONFLICT (name) DO UPDATE SET n = GREATEST(log_state.n, EXCLUDED.n)`, p.From, p.Below, p.First, p.Last, p.Keep)
}
