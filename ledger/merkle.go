package ledger

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/internal/retry"
	"github.com/pactledger/pactledger/ledger/proof"
)

// The Merkle log: every row, dispute event and incident closure is a leaf
// of one append-only RFC 6962 tree. A write queues its leaf in its own
// transaction and is acknowledged at once; the integrator then assigns leaf
// indexes in commit order, extends the tree, signs a C2SP checkpoint and
// publishes C2SP tlog-tiles to write-once storage. Hashing and proofs come
// from golang.org/x/mod/sumdb/tlog.

// TileHeight is the C2SP tlog-tiles height: 256 hashes per tile.
const TileHeight = 8

// Errors of the log.
var (
	// ErrNotLogged: the row or event is committed but not yet in a signed
	// checkpoint (the integrator runs every LogConfig.Interval); retry.
	ErrNotLogged = errors.New("not yet in a signed checkpoint")
	// ErrNoLeaf: the row store holds the row or event, but the log has no
	// leaf for it and none is queued, so none will come: the row store
	// was changed outside the ledger (or the row or event was recorded
	// while the ledger kept no log). Retrying does not help; fsck finds
	// the same.
	ErrNoLeaf = errors.New("has no leaf in the log and none is queued")
	// ErrNoLog: the ledger runs without a log.
	ErrNoLog = errors.New("the ledger keeps no Merkle log")
	// ErrRefLogged: a leaf was to be sequenced under a ref that already
	// has a leaf in the log. A ref's leaf index is given once and never
	// moved: a second leaf of a logged row would otherwise become the
	// row's proof, with whatever values it holds.
	ErrRefLogged = errors.New("the ref already has a leaf in the log")
)

// PendingLeaf is a leaf committed with its row or event, waiting for an
// index.
type PendingLeaf struct {
	Seq  uint64
	Ref  string
	Data []byte
}

// LogTx is the part of a transaction the log works on. Leaf indexes,
// stored hashes and leaves are only ever appended.
type LogTx interface {
	// QueueLeaf queues a leaf, in commit order, under ref (a row id or an
	// event ref).
	QueueLeaf(ref string, data []byte) error
	// PendingLeaves returns up to n queued leaves, oldest first.
	PendingLeaves(n int) ([]PendingLeaf, error)
	// LeafQueued reports whether a leaf of ref is queued (not yet
	// sequenced), by a lookup of ref alone: its cost does not grow with
	// the queue.
	LeafQueued(ref string) (bool, error)
	// SequenceLeaf stores a queued leaf at index with the stored hashes the
	// tree gains (starting at storage index hashAt) and removes it from the
	// queue. An index already taken is an error, and so is a ref that
	// already has a leaf index (given before, or earlier in the same
	// transaction), wrapping ErrRefLogged: a ref's index is never moved.
	// A store that sends writes with its next round trip reports either
	// from a later call or from Update.
	SequenceLeaf(p PendingLeaf, index int64, hashAt int64, hashes []tlog.Hash) error
	// DropQueuedLeaf removes a queued leaf from the queue without logging
	// it: the integrator's for a leaf whose ref already has one in the
	// log. A leaf no longer queued is no error.
	DropQueuedLeaf(p PendingLeaf) error
	// ReadHashes returns the stored hashes at the given storage indexes.
	ReadHashes(indexes []int64) ([]tlog.Hash, error)
	// Leaf returns the ref and bytes of the leaf at index.
	Leaf(index int64) (string, []byte, error)
	// LeafIndex returns the index of the leaf of ref, or ErrNotFound
	// (queued leaves have none yet).
	LeafIndex(ref string) (int64, error)
	// LeafIndexes returns the leaf index of each of refs that has one (a
	// ref without one is left out), with one round trip at most.
	LeafIndexes(refs []string) (map[string]int64, error)
	// SetLogHead records the tree size and its signed checkpoint, and keeps
	// the checkpoint in the history by size.
	SetLogHead(size int64, checkpoint []byte) error
	// LogHead returns the tree size and the latest signed checkpoint.
	LogHead() (int64, []byte, error)
	// CheckpointAt returns the signed checkpoint of a past size, or
	// ErrNotFound when none was signed at that size.
	CheckpointAt(size int64) ([]byte, error)
	// TilesPublished returns the tree size whose tiles are all in
	// write-once storage; SetTilesPublished records it.
	TilesPublished() (int64, error)
	SetTilesPublished(size int64) error
	// LogDivergence returns the record the holder of the integrator's
	// lease keeps while it finds the log published to write-once storage
	// not to be a prefix of the row store's (opaque bytes, the ledger's),
	// nil when there is none; SetLogDivergence replaces it, and nil
	// removes it.
	LogDivergence() ([]byte, error)
	SetLogDivergence(record []byte) error
}

// PrunedLog is a LogTx of a store that may lack the first leaves of the
// log and their stored hashes below level TileHeight: their full tiles and
// entry bundles are in write-once storage, where the ledger reads them
// (checked against the stored hashes it keeps) instead.
type PrunedLog interface {
	// LogPruned returns how many leading leaves the store dropped: a
	// multiple of 1<<TileHeight, 0 when none.
	LogPruned() (int64, error)
}

// LogPruner is a PrunedLog that can drop published tiles itself.
type LogPruner interface {
	PrunedLog
	// PruneRoom returns how many more leaves (a multiple of
	// 1<<TileHeight) the store drops now: a store whose every commit
	// costs more with the space a drop frees (bbolt's free list) drops
	// no faster than its writes reuse that space.
	PruneRoom() (int64, error)
	// PruneLog drops the leaves from LogPruned up to below (a multiple of
	// 1<<TileHeight, within the published tiles) and their stored hashes
	// at levels below TileHeight; the hashes at TileHeight and above, and
	// every leaf's index, stay.
	PruneLog(below int64) error
}

// Prune is what a LogPruner's PruneLog drops: the leaves from From up to
// Below, and the stored hashes they added at levels below TileHeight,
// which lie from First up to Last apart from those in Keep.
type Prune struct {
	From, Below, First, Last int64
	Keep                     []int64
}

// PlanPrune returns what PruneLog(below) drops from the store tx is a
// transaction of, given the leaves it dropped before and those published;
// ok is false when nothing is left to drop, and an error means below is
// not a whole number of published tiles.
func PlanPrune(tx interface {
	LogPruned() (int64, error)
	TilesPublished() (int64, error)
}, below int64) (p Prune, ok bool, err error) {
	from, err := tx.LogPruned()
	if err != nil {
		return p, false, err
	}
	published, err := tx.TilesPublished()
	if err != nil {
		return p, false, err
	}
	switch {
	case below%(1<<TileHeight) != 0:
		return p, false, fmt.Errorf("log: prune to %d: not a whole number of tiles", below)
	case below > published:
		return p, false, fmt.Errorf("log: prune to %d: only %d leaves are published", below, published)
	case below <= from:
		return p, false, nil
	}
	p = Prune{From: from, Below: below, First: tlog.StoredHashCount(from), Last: tlog.StoredHashCount(below), Keep: []int64{}}
	for idx := p.First; idx < p.Last; idx++ {
		if level, _ := tlog.SplitStoredHashIndex(idx); level >= TileHeight {
			p.Keep = append(p.Keep, idx)
		}
	}
	return p, true, nil
}

// LogConfig configures the Merkle log.
type LogConfig struct {
	// Signer signs checkpoints; its name is the log's origin. Required.
	Signer note.Signer
	// VerifierKey is Signer's verifier key ("<origin>+<hash>+<key>"). With
	// it the row store's latest checkpoint is verified before the log is
	// extended or published (CheckLogKey); without it, the checkpoint's
	// signature must name Signer's key (origin and key hash).
	VerifierKey string
	// Interval is the most often the tree is extended while leaves
	// arrive; default 500 ms.
	Interval time.Duration
	// MaxBatch caps leaves per extension; default 4096.
	MaxBatch int
	// TileRetention is how long tiles and checkpoints are retained in
	// write-once storage; default DefaultTileRetention.
	TileRetention time.Duration
	// KeepPublished keeps every leaf and stored hash in the row store.
	// By default a store that can (LogPruner) drops those of each full
	// tile once write-once storage holds it (PrunePublished), and reads
	// them from there.
	KeepPublished bool
}

// logState is the ledger's log, once EnableLog ran.
type logState struct {
	cfg      LogConfig
	verifier note.Verifier // of cfg.Signer: checkpoints this ledger may extend
	notify   chan struct{}
	tiles    *bytesCache // tiles and entry bundles read back from write-once storage
	recent   recentLeaves

	checked atomic.Bool // this holder of the lease found the bucket's log to be a prefix of its own (checkPublished)
	// checkMu orders the changes of checked: checkEpoch counts the times
	// it was cleared (uncheck), so that a check begun before one does not
	// set it after (markChecked).
	checkMu    sync.Mutex
	checkEpoch uint64
	// head is the row store's log head as this holder of the integrator's
	// lease last saw it (checked or extended): a round that finds another
	// signs nothing (errLogReplaced). Nil: none seen yet.
	head       atomic.Pointer[seenHead]
	divergedMu sync.Mutex
	diverged   error     // the last check's ErrLogDiverged, nil once one passes: no checkpoint is signed or served meanwhile
	since      time.Time // when checks started failing with it
	// shared is the row store's divergence record as this replica last
	// read it (followLogSize): what the holder of the integrator's lease
	// found, which every other replica reports and serves by as the
	// holder does. Nil: none.
	shared *divergenceRecord
	// holding: this replica holds the integrator's lease (holdLog), and
	// reports and serves by what it found itself once it checked.
	holding bool
	// sharePending: the last attempt to bring the record to what this
	// holder found failed, and is made again with the next outcome.
	sharePending bool
	deleted      string // the checkpoints last found deleted from the bucket (noteDeleted)
	// refused is the error of this process's last publication when
	// objects it did not write refused it (ErrForeignObject), nil once one
	// passes; refusedSince is when publications began to be refused.
	refused      error
	refusedSince time.Time
	// pending is what this process last put at or read from PendingKey
	// (putPending; nil: read it first).
	pendingMu sync.Mutex
	pending   []byte
	// foreign are the foreign objects this process reported (noteForeign),
	// by their error, at most maxForeignNoted.
	foreign map[string]bool
	// waitingSince is when this replica first read leaves in the queue
	// with the log no larger than before (unix nanoseconds; 0: the log
	// keeps up), and waitedSize the size it read then (followLogSize).
	waitingSince atomic.Int64
	waitedSize   int64
	// behind is what this replica last read of a log signed in the row
	// store past what write-once storage holds (followWaiting): since
	// when (unix nanoseconds; 0: none, or it keeps up), the size it read
	// then (behindAt: a publication reaching it is progress), and the
	// sizes read last.
	behindMu                    sync.Mutex
	behindSince                 time.Time
	behindAt, behindPub, behind int64
	wrongKey                    error     // the integrator's ErrLogKey, kept until restarted
	keySince                    time.Time // when it was found
}

// seenHead is a log head: the tree's size and its signed checkpoint.
type seenHead struct {
	size int64
	cp   []byte
}

// epoch returns the count of times checked was cleared, for a check
// about to begin (markChecked).
func (s *logState) epoch() uint64 {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	return s.checkEpoch
}

// markChecked records a check of the bucket's log that passed, begun at
// epoch, unless checked was cleared since: what that check compared may
// no longer be the row store's log.
func (s *logState) markChecked(epoch uint64) {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	if s.checkEpoch == epoch {
		s.checked.Store(true)
	}
}

// markCheckedAt is markChecked with the head of the row store's log the
// check compared, set together.
func (s *logState) markCheckedAt(epoch uint64, head *seenHead) {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	if s.checkEpoch == epoch {
		s.head.Store(head)
		s.checked.Store(true)
	}
}

// uncheck clears checked, and the head seen: the bucket's log is compared
// with the row store's again before anything is signed. It reports
// whether checked was set.
func (s *logState) uncheck() bool {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	s.checkEpoch++
	s.head.Store(nil)
	return s.checked.Swap(false)
}

// recentLeaves keeps the bytes of the leaves this ledger's integrator
// stored last, by index, so that publishing their entry bundles (right
// after, and again for a partial tile the next round completes) does not
// read them back from the store. A leaf's bytes at an index never change
// once stored, so what it holds stays true.
type recentLeaves struct {
	mu    sync.Mutex
	start int64    // the index of data[0]
	data  [][]byte // shared: never modified
}

// recentLeavesMax bounds recentLeaves: a round of the default MaxBatch
// and the partial tile before it.
const recentLeavesMax = 4096 + 1<<TileHeight

// add records the leaves stored from index at on. Leaves that do not
// follow the ones held (another integrator stored some in between)
// replace them.
func (r *recentLeaves) add(at int64, leaves [][]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at != r.start+int64(len(r.data)) {
		r.start, r.data = at, nil
	}
	r.data = append(r.data, leaves...)
	if drop := len(r.data) - recentLeavesMax; drop > 0 {
		r.start += int64(drop)
		r.data = slices.Clone(r.data[drop:])
	}
}

// get returns the bytes of the leaf at idx, if held.
func (r *recentLeaves) get(idx int64) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if idx < r.start || idx >= r.start+int64(len(r.data)) {
		return nil, false
	}
	return r.data[idx-r.start], true
}

// StoreLog says whether the row store keeps a Merkle log: the size of its
// tree, and whether leaves are queued for it. A ledger that enabled the
// log has queued at least its policy leaf at start (LogPolicy), so a store
// any ledger ran its log on answers a size above 0 or queued leaves. Every
// row written to such a store must be in its log: a ledger without the
// log queues no leaves, and its rows would be acknowledged outside it for
// good, so the server does not start without the log on such a store.
func (l *Ledger) StoreLog(ctx context.Context) (size int64, queued bool, err error) {
	err = l.store.View(ctx, func(tx Tx) (err error) {
		size, queued, err = storeLogIn(tx)
		return err
	})
	return size, queued, err
}

// EnableLog turns the Merkle log on: from now on every committed row and
// event queues its leaf. Call it before any write.
func (l *Ledger) EnableLog(cfg LogConfig) error {
	if cfg.Signer == nil {
		return errors.New("log: a checkpoint signer is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4096
	}
	if cfg.TileRetention <= 0 {
		cfg.TileRetention = DefaultTileRetention
	}
	var v note.Verifier = keyNamed{cfg.Signer}
	if cfg.VerifierKey != "" {
		var err error
		if v, err = note.NewVerifier(strings.TrimSpace(cfg.VerifierKey)); err != nil {
			return fmt.Errorf("log: verifier key: %w", err)
		}
		if v.Name() != cfg.Signer.Name() || v.KeyHash() != cfg.Signer.KeyHash() {
			return fmt.Errorf("log: the verifier key %s is not the signing key's (%s)", cfg.VerifierKey, keyName(cfg.Signer.Name(), cfg.Signer.KeyHash()))
		}
	}
	l.log = &logState{cfg: cfg, verifier: v, notify: make(chan struct{}, 1), tiles: newBytesCache(tileCacheBytes)}
	return nil
}

// keyNamed is the verifier of a signer whose verifier key is not known:
// it accepts any signature under the signer's name and key hash, so it
// tells a checkpoint another key signed from one of its own, not a forged
// one.
type keyNamed struct{ s note.Signer }

func (k keyNamed) Name() string                { return k.s.Name() }
func (k keyNamed) KeyHash() uint32             { return k.s.KeyHash() }
func (k keyNamed) Verify(msg, sig []byte) bool { return len(sig) > 0 }

// keyName names a note key as its verifier key begins: origin+hash.
func keyName(name string, hash uint32) string { return fmt.Sprintf("%s+%08x", name, hash) }

// checkOwnKey returns an error wrapping ErrLogKey unless the signed
// checkpoint cp (the row store's latest, of size size) is signed by this
// ledger's log key; nil for no checkpoint.
func (l *Ledger) checkOwnKey(size int64, cp []byte) error {
	if len(cp) == 0 {
		return nil
	}
	if _, err := note.Open(cp, note.VerifierList(l.log.verifier)); err != nil {
		return fmt.Errorf("%w: the row store's latest checkpoint (size %d) is signed by %s, not by this ledger's log key %s",
			ErrLogKey, size, signersOf(cp), keyName(l.log.verifier.Name(), l.log.verifier.KeyHash()))
	}
	return nil
}

// signersOf names the keys whose signatures a signed note carries
// (origin+hash each), for an error.
func signersOf(signed []byte) string {
	_, sigs, ok := bytes.Cut(signed, []byte("\n\n"))
	var names []string
	for line := range strings.SplitSeq(strings.TrimSuffix(string(sigs), "\n"), "\n") {
		name, b64, found := strings.Cut(strings.TrimPrefix(line, "— "), " ")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if !ok || !found || err != nil || len(raw) < 4 {
			continue
		}
		names = append(names, keyName(name, binary.BigEndian.Uint32(raw)))
	}
	if len(names) == 0 {
		return "no key (its signature cannot be read)"
	}
	return strings.Join(names, ", ")
}

// CheckLogKey returns an error wrapping ErrLogKey unless the row store's
// latest checkpoint, if it holds one, is signed by this ledger's log key:
// a ledger started with another key than the one its log is signed with
// (a replica not given the key file the others use) must not extend it.
// ledgerd calls it at start.
func (l *Ledger) CheckLogKey(ctx context.Context) error {
	if l.log == nil {
		return ErrNoLog
	}
	size, cp, err := l.logHead(ctx)
	if err != nil {
		return err
	}
	return l.checkOwnKey(size, cp)
}

// LogPolicy queues a policy leaf: the retention period of every class as
// configured now, with the time. Call it once the log is enabled and
// before any write, at every start: fsck and log audit check each swept
// row against the shortest period the policy leaves before its own leaf
// record for its class, never against today's periods alone, which an
// operator may have lengthened since (docs/design/015). It returns the
// leaf's ref, under which Proof finds it once integrated; without a log it
// does nothing and returns "".
func (l *Ledger) LogPolicy(ctx context.Context) (string, error) {
	if l.log == nil {
		return "", nil
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	at := l.cfg.Now().UTC()
	// Replicas start each with their own leaf; the nonce keeps two that
	// start in the same nanosecond apart.
	id := fmt.Sprintf("%d-%s", at.UnixNano(), hex.EncodeToString(nonce[:]))
	ref := policyRef(id)
	err := l.store.Update(ctx, func(tx Tx) error { return tx.QueueLeaf(ref, policyLeaf(id, at, l.cfg.Policy)) })
	if err != nil {
		return "", fmt.Errorf("queue the retention policy's leaf: %w", err)
	}
	l.wakeLog()
	return ref, nil
}

// Origin is the log's origin line, or "" without a log.
func (l *Ledger) Origin() string {
	if l.log == nil {
		return ""
	}
	return l.log.cfg.Signer.Name()
}

// queueLeaf queues a leaf in tx when the log is on. Without it, a write
// to a row store that keeps a log is refused (checkNoLogElsewhere).
func (l *Ledger) queueLeaf(tx Tx, ref string, data []byte) error {
	if l.log == nil {
		return l.checkNoLogElsewhere(tx)
	}
	return tx.QueueLeaf(ref, data)
}

// ErrLogElsewhere: a write was refused, nothing recorded, because this
// ledger runs without the Merkle log while the row store keeps one
// (another ledgerd on the store turned it on): its rows would have no
// leaf. It wraps ErrUnavailable: another replica, or this one restarted
// with the log on, takes the write.
var ErrLogElsewhere = fmt.Errorf("%w: this ledgerd runs with merkleLog.enabled false, but the row store keeps a Merkle log: restart it with the log on, as the ledgerd that keeps the log has it", ErrUnavailable)

// checkNoLogElsewhere, on a ledger without the log, returns
// ErrLogElsewhere when the row store keeps a log, read in tx, the
// transaction of the write that would have queued a leaf: on bbolt, whose
// writes are serial, no write commits without its leaf after a log's first
// one; on PostgreSQL only one whose transaction overlaps the first leaf's
// can. Once found, the answer is kept (a log is never removed), and
// RunLogWatch's readiness and ERROR follow.
func (l *Ledger) checkNoLogElsewhere(tx Tx) error {
	if l.logElsewhere.Load() != 0 {
		return ErrLogElsewhere
	}
	size, queued, err := storeLogIn(tx)
	if err != nil {
		return err
	}
	if size > 0 || queued {
		l.logElsewhere.CompareAndSwap(0, l.cfg.Now().UnixNano())
		return ErrLogElsewhere
	}
	return nil
}

// storeLogIn is StoreLog in tx.
func storeLogIn(tx Tx) (size int64, queued bool, err error) {
	if size, _, err = tx.LogHead(); err != nil {
		return 0, false, err
	}
	p, err := tx.PendingLeaves(1)
	return size, len(p) > 0, err
}

// LogElsewhere returns when RunLogWatch found that the row store keeps a
// Merkle log this ledger runs without (zero: it did not).
func (l *Ledger) LogElsewhere() time.Time {
	if n := l.logElsewhere.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// RunLogWatch, on a ledger without the Merkle log, reads every interval
// whether the row store keeps one (StoreLog), or a write found it
// (checkNoLogElsewhere), until then or ctx ends. The server refuses to
// start without the log on a store that keeps one; a log another ledgerd
// on the store turned on later (a rolling restart turning it on) refuses
// this ledger's writes that would have had a leaf (ErrLogElsewhere), and
// the watch says so at ERROR once and makes the ledger not ready, writes
// or none. With the log on it returns at once.
func (l *Ledger) RunLogWatch(ctx context.Context, interval time.Duration) error {
	if l.log != nil {
		return nil
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		size, queued, err := l.StoreLog(ctx)
		if err == nil && (size > 0 || queued) || l.logElsewhere.Load() != 0 {
			l.logElsewhere.CompareAndSwap(0, l.cfg.Now().UnixNano())
			l.cfg.Logger.ErrorContext(ctx, "the row store keeps a Merkle log, and this ledgerd runs without it: its writes are refused from now on, since their rows would have no leaf; restart it with merkleLog.enabled true and the log's origin and key, as the ledgerd that keeps the log has them",
				slog.Int64("log_size", size), slog.Bool("leaves_queued", queued))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (l *Ledger) wakeLog() {
	if l.log == nil {
		return
	}
	select {
	case l.log.notify <- struct{}{}:
	default:
	}
}

// roundHashes reads stored hashes for one integration round: those the
// round stored itself from memory, the rest from tx. A leaf's new hashes
// mostly need the ones its predecessor in the round just stored, so a
// round reads the store about once, not once a leaf.
type roundHashes struct {
	tx     LogTx
	stored map[int64]tlog.Hash
}

// ReadHashes implements tlog.HashReader.
func (r *roundHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int64
	var at []int
	for i, idx := range indexes {
		if h, ok := r.stored[idx]; ok {
			out[i] = h
			continue
		}
		missing, at = append(missing, idx), append(at, i)
	}
	if err := readInto(r.tx, out, missing, at); err != nil {
		return nil, err
	}
	return out, nil
}

// readInto reads the stored hashes at indexes from tx into out, the j-th
// at out[at[j]].
func readInto(tx LogTx, out []tlog.Hash, indexes []int64, at []int) error {
	if len(indexes) == 0 {
		return nil
	}
	hs, err := tx.ReadHashes(indexes)
	if err != nil {
		return err
	}
	if len(hs) != len(indexes) {
		return fmt.Errorf("read %d stored hashes, got %d", len(indexes), len(hs))
	}
	for j, h := range hs {
		out[at[j]] = h
	}
	return nil
}

// add records hashes the round stored from storage index hashAt on.
func (r *roundHashes) add(hashAt int64, hs []tlog.Hash) {
	for i, h := range hs {
		r.stored[hashAt+int64(i)] = h
	}
}

// RunIntegrator extends the tree until ctx is done: whenever leaves are
// queued, at most once per Interval, it assigns their indexes in commit
// order, signs a checkpoint and publishes the new tiles. It runs under the
// lease LeaseLogIntegrator (see RunUnderLease): while another ledger on
// the store holds it, this one waits, and every write it makes to the log
// is fenced by the lease.
func (l *Ledger) RunIntegrator(ctx context.Context) error {
	if l.log == nil {
		return ErrNoLog
	}
	ctx, stop := context.WithCancel(ctx)
	// Once it stops, the row store's divergence record is followed no
	// more: what it said is dropped last, after the integrator's own
	// last word.
	defer l.followDivergence(nil)
	var wg sync.WaitGroup
	wg.Go(func() { l.followLogSize(ctx) })
	defer wg.Wait()
	defer stop()
	err := l.RunUnderLease(ctx, LeaseLogIntegrator, l.integrateLoop)
	if !errors.Is(err, ErrLogKey) {
		return err
	}
	// The job returned, so the lease was released: a replica given the
	// key that signed the log takes it over. This one competes for it no
	// more (another attempt would fail the same way and hold the log up
	// again), and reports why until it is restarted (LogKeyRefused).
	l.cfg.Logger.ErrorContext(ctx, "this ledger's log key did not sign the row store's checkpoints: it released the log integrator's lease and takes it no more until restarted; "+
		"a replica with the right key integrates the log, and this one still records rows; give it the key file the other replicas use (merkleLog.keyFile) and restart it",
		slog.String("error", err.Error()))
	<-ctx.Done()
	return nil
}

// LogKeyRefused returns since when and why this ledger's integrator gave
// up the integrator's lease for good: the row store's log is signed by
// another key than this ledger's (an error wrapping ErrLogKey), so it
// signs and publishes nothing of it until restarted with the right key.
// A nil error while no integrator of this ledger found that.
func (l *Ledger) LogKeyRefused() (since time.Time, err error) {
	if l.log == nil {
		return time.Time{}, nil
	}
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	return s.keySince, s.wrongKey
}

// noteLogKey records that the integrator found the log signed by another
// key (err wraps ErrLogKey), for LogKeyRefused and pactledger_log_wrong_key.
// It reports whether this is the first time.
func (l *Ledger) noteLogKey(err error) bool {
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	l.cfg.Metrics.logWrongKey()
	if s.wrongKey != nil {
		return false
	}
	s.wrongKey, s.keySince = err, l.cfg.Now()
	return true
}

// followLogSize sets pactledger_log_size from the row store's latest
// checkpoint every Interval until ctx is done, whichever ledger on the
// store holds the integrator's lease (its holder also sets it as it
// extends the tree): every replica reports the log's size, never the
// leaves it integrated itself added to the size it started with.
//
// It also checks the checkpoint with this ledger's key, whether or not it
// holds the integrator's lease: a replica given another key than the
// log's reports it (LogKeyRefused) before it ever takes the lease.
func (l *Ledger) followLogSize(ctx context.Context) {
	tick := time.NewTicker(l.log.cfg.Interval)
	defer tick.Stop()
	for {
		if n, cp, err := l.logHead(ctx); err == nil {
			l.cfg.Metrics.logSize(n)
			l.followWaiting(ctx, n)
			if err := l.checkOwnKey(n, cp); errors.Is(err, ErrLogKey) && l.noteLogKey(err) {
				l.cfg.Logger.ErrorContext(ctx, "this ledger's log key did not sign the row store's checkpoints: it will not integrate the log; give it the key file the other replicas use (merkleLog.keyFile) and restart it",
					slog.String("error", err.Error()))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// followWaiting notes, after reading the log's size n, whether leaves
// wait in the queue while the log does not grow: whoever holds the
// integrator's lease (this replica or another) is not extending it. A
// lease held by a holder that does not integrate, a row store or bucket
// that hangs, or a log that diverged all show so, on every replica. It
// also reads the row store's divergence record (followDivergence).
func (l *Ledger) followWaiting(ctx context.Context, n int64) {
	s := l.log
	var queued bool
	var record []byte
	var published int64
	if err := l.store.View(ctx, func(tx Tx) error {
		pend, err := tx.PendingLeaves(1)
		queued = len(pend) > 0
		if err != nil {
			return err
		}
		if published, err = tx.TilesPublished(); err != nil {
			return err
		}
		record, err = tx.LogDivergence()
		return err
	}); err != nil {
		return
	}
	l.followDivergence(record)
	now := l.cfg.Now()
	s.behindMu.Lock()
	switch {
	case published >= n:
		s.behindSince = time.Time{}
	case s.behindSince.IsZero() || published >= s.behindAt:
		// Behind, for the first time or again after the publication
		// caught up with what was signed when it was last found behind.
		s.behindSince, s.behindAt = now, n
	}
	s.behindPub, s.behind = published, n
	s.behindMu.Unlock()
	since := s.waitingSince.Load()
	switch {
	case !queued || (since != 0 && n > s.waitedSize):
		s.waitingSince.Store(0)
		l.cfg.Metrics.logWaiting(0)
	case since == 0:
		s.waitedSize = n
		s.waitingSince.Store(now.UnixNano())
		l.cfg.Metrics.logWaiting(0)
	default:
		l.cfg.Metrics.logWaiting(now.Sub(time.Unix(0, since)))
	}
}

// LogUnpublished returns since when the row store's log has been signed
// past what write-once storage holds without the publication catching
// up, as this replica last read the row store, with the size published
// (the size served) and the size signed; a zero time while publication
// keeps up (or there is no log).
func (l *Ledger) LogUnpublished() (since time.Time, published, signed int64) {
	if l.log == nil {
		return time.Time{}, 0, 0
	}
	s := l.log
	s.behindMu.Lock()
	defer s.behindMu.Unlock()
	return s.behindSince, s.behindPub, s.behind
}

// LogWaiting returns since when leaves have waited in the log's queue
// while the log did not grow, as this replica last read the row store;
// zero while the log keeps up (or there is no log).
func (l *Ledger) LogWaiting() time.Time {
	if l.log == nil {
		return time.Time{}
	}
	if since := l.log.waitingSince.Load(); since != 0 {
		return time.Unix(0, since)
	}
	return time.Time{}
}

// integrateLoop is the integrator's job under its lease.
//
// Each holder of the lease compares the row store's log with the log
// published to write-once storage before it signs anything, and again
// before each publication (checkPublished). While the published log is
// not a prefix of the row store's (a row store restored from a backup
// older than what it published, another log in the bucket), it signs no
// checkpoint: one would be a second history under the same key, the
// split view the log exists to rule out. Rows are still recorded; their
// leaves wait in the queue, and the check is repeated (with the
// publication's backoff) until it passes, when they are logged.
func (l *Ledger) integrateLoop(ctx context.Context) error {
	tick := time.NewTicker(l.log.cfg.Interval)
	defer tick.Stop()
	// What this holder found of the bucket's log is its own to report:
	// once it stops (the lease lost), whoever holds the lease next checks
	// again before it signs.
	l.log.uncheck()
	l.holdLog(true)
	defer l.holdLog(false)
	// A step that fails while its store is down is tried again after a
	// backoff, not every round, and each failed attempt is reported once.
	extend := retry.Backoff{Min: l.log.cfg.Interval, Max: maxExtendBackoff}
	publish := retry.Backoff{Min: l.log.cfg.Interval, Max: maxPublishBackoff}
	// A log signed by another key than this ledger's is no failure to
	// retry: the job ends, which releases the lease (RunIntegrator).
	wrongKey := func(err error) bool {
		if !errors.Is(err, ErrLogKey) || ctx.Err() != nil {
			return false
		}
		l.noteLogKey(err)
		return true
	}
	// The publication under way, if any: its result comes on pub, and
	// stopPub ends it. It began at pubEpoch (logState.epoch) and at
	// pubSince.
	var (
		pub      chan error
		stopPub  context.CancelFunc
		pubEpoch uint64
		pubSince time.Time
		pubSlow  bool
	)
	defer func() {
		if pub != nil {
			stopPub()
			<-pub
		}
	}()
	// replaced takes in err, wrapping errLogReplaced: the row store's
	// log is not the one this holder checked and extended (a row store
	// restored or swapped under a running ledger, or another ledgerd
	// extending it as the lease changed hands). Nothing is signed until
	// the row store's log has been compared with the published one
	// again; said once for each time it is found.
	replaced := func(err error) {
		if l.log.uncheck() {
			l.cfg.Logger.ErrorContext(ctx, "the row store's Merkle log changed under the integrator (a row store restored from a backup or swapped for a copy while ledgerd runs, or another ledgerd extending the log as the integrator's lease changed hands): it signs no checkpoint until it has compared the row store's log with the log published to write-once storage again",
				slog.String("error", err.Error()))
		}
	}
	// published takes in the publication's result: an error to end the
	// job with (the wrong key), or nil.
	published := func(err error) error {
		if wrongKey(err) {
			return fmt.Errorf("publishing log tiles: %w", err)
		}
		if errors.Is(err, errLogReplaced) {
			// The publication found the row store's log replaced under
			// it before a round of the log did.
			replaced(err)
		}
		// A publication that passed its check of the bucket before the
		// row store's log was found changed says nothing of the log
		// there now: it clears no divergence found since.
		if err != nil || l.log.epoch() == pubEpoch {
			l.noteDiverged(ctx, err, false)
		}
		l.noteRefused(err)
		l.retried(ctx, &publish, "publishing log tiles", err)
		if err == nil {
			if _, err := l.prunePublished(ctx, integratorPruneChunks, false, nil); err != nil && ctx.Err() == nil {
				l.cfg.Logger.WarnContext(ctx, "dropping published log tiles from the row store failed; it keeps them and will retry", slog.String("error", err.Error()))
			}
		}
		return nil
	}
	// grown: leaves were integrated while a publication ran, which did
	// not read them.
	var grown bool
	startPub := func() {
		pub, pubEpoch, pubSince, pubSlow, grown = make(chan error, 1), l.log.epoch(), time.Now(), false, false
		pubCtx, stop := context.WithCancel(ctx)
		stopPub = stop
		go func(done chan<- error) {
			defer stop()
			done <- l.PublishTiles(pubCtx)
		}(pub)
	}
	for {
		if !l.log.checked.Load() && publish.Due(time.Now()) {
			// Before the first signing of this holder, and each round
			// while the bucket's log differs or could not be read: a
			// holder signs nothing until it has seen the published log
			// is a prefix of its own (a row store restored from an old
			// backup, started while the bucket is out, would otherwise
			// sign a fork before it could tell). Once seen, an outage
			// of the bucket leaves the log growing from that checked
			// base; the check before each publication catches the rest.
			epoch := l.log.epoch()
			head, err := l.checkHead(ctx)
			if err == nil {
				// The head the check compared: the rounds from now on
				// extend it and nothing else. Checked only with it, so
				// that no round signs unwatched.
				l.log.markCheckedAt(epoch, head)
			}
			l.noteDiverged(ctx, err, true)
			l.retried(ctx, &publish, "checking the log published to write-once storage", err)
		}
		// Until the check above passed, and while the bucket's log
		// differs, it is the retry: nothing is signed or published
		// meanwhile, and the leaves wait in the queue.
		stopped := func() bool { return l.integratingStopped() != nil || !l.log.checked.Load() }
		if !stopped() && extend.Due(time.Now()) {
			n, err := l.Integrate(ctx)
			if n > 0 && pub != nil {
				// Readers are served what is published only: the
				// publication under way began before these leaves, so
				// another follows it as soon as it ends.
				grown = true
			}
			switch {
			case wrongKey(err):
				return fmt.Errorf("extending the Merkle log: %w", err)
			case errors.Is(err, errLogReplaced):
				// The publication under way, of the log read before,
				// ends first.
				replaced(err)
				if pub != nil {
					stopPub()
					if err := <-pub; !errors.Is(err, context.Canceled) {
						if err := published(err); err != nil {
							return err
						}
					}
					pub = nil
				}
			default:
				l.retried(ctx, &extend, "extending the Merkle log", err)
			}
		}
		// The publication runs on its own, so that a bucket that takes
		// connections and does not answer holds it alone: the log goes
		// on growing in the row store meanwhile.
		// It follows the extension in the same round: readers are
		// served only the checkpoints write-once storage holds.
		if !stopped() && pub == nil && publish.Due(time.Now()) {
			startPub()
		}
		if pub != nil && !pubSlow && time.Since(pubSince) >= slowPublication {
			pubSlow = true
			l.cfg.Logger.WarnContext(ctx, "publishing log tiles has waited on write-once storage for a while; the log goes on growing in the row store, and is published once the bucket answers",
				slog.Duration("waited", time.Since(pubSince).Round(time.Second)))
		}
		// Wait for the interval to pass (new leaves wait for it too); a
		// publication that ends is taken in at once.
		for ticked := false; !ticked; {
			select {
			case <-ctx.Done():
				return nil
			case err := <-pub:
				pub = nil
				if err := published(err); err != nil {
					return err
				}
				// Leaves integrated while it ran are published at
				// once, not a round later.
				if grown && err == nil && !stopped() && publish.Due(time.Now()) {
					startPub()
				}
			case <-l.log.notify:
			case <-tick.C:
				ticked = true
			}
		}
	}
}

// slowPublication is how long a publication of the log's tiles runs
// before the integrator says it waits on write-once storage.
var slowPublication = 30 * time.Second

// The integrator's steps back off to these after failures in a row: the
// log's extension (the row store) and its tiles' publication (the bucket).
const (
	maxExtendBackoff  = 5 * time.Second
	maxPublishBackoff = 30 * time.Second
)

// retried records the outcome of an attempt at one of the integrator's
// steps in b: a failure is logged with the wait before the next attempt,
// and the first success after failures says how long they lasted.
func (l *Ledger) retried(ctx context.Context, b *retry.Backoff, step string, err error) {
	if err == nil {
		if n, since := b.Succeeded(); n > 0 {
			l.cfg.Logger.InfoContext(ctx, step+" succeeded again", slog.Int("failures", n), slog.Duration("failing_for", time.Since(since).Round(time.Millisecond)))
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, ErrStarting) {
		// The bucket's check as ledgerd starts has not passed yet: it
		// logs its own failures, and this step waits for it.
		b.Postpone(time.Now())
		l.cfg.Logger.DebugContext(ctx, step+" waits for the store's check", slog.String("error", err.Error()))
		return
	}
	wait, n := b.Failed(time.Now())
	level := slog.LevelWarn
	if errors.Is(err, ErrLogDiverged) || errors.Is(err, ErrForeignObject) || errors.Is(err, errLogReplaced) {
		level = slog.LevelError // a person must look: no retry mends the first two, and the last is a row store changed under ledgerd
	}
	l.cfg.Logger.Log(ctx, level, step+" failed; will retry", slog.String("error", err.Error()), slog.Duration("retry_in", wait), slog.Int("failures", n))
}

// noteDiverged records the outcome of a check of the published log for
// LogDiverged and the metric pactledger_log_diverged: set by an error
// wrapping ErrLogDiverged, cleared by a check that passes, kept through
// other errors (the bucket down says nothing of whose log it holds).
//
// It also stops and resumes the signing of checkpoints (signingStopped):
// the first error wrapping ErrLogDiverged is logged at ERROR with what
// to do, and the first success after it with how many leaves waited.
//
// And it keeps the row store's divergence record to what it found
// (shareDivergence), so that every other replica on the store reports and
// serves as this holder does: written or brought up to date when the log
// diverged, removed when compared (a check that compared the logs, not a
// publication that found nothing new to publish) and the check passed.
func (l *Ledger) noteDiverged(ctx context.Context, err error, compared bool) {
	s := l.log
	s.divergedMu.Lock()
	switch {
	case err == nil:
		if s.diverged != nil {
			l.cfg.Logger.InfoContext(ctx, "the log published to write-once storage is a prefix of the row store's log again: this ledger signs and publishes checkpoints again, and logs the leaves that waited in the queue",
				slog.Duration("stopped_for", l.cfg.Now().Sub(s.since).Round(time.Millisecond)))
		}
		s.diverged = nil
	case errors.Is(err, ErrLogDiverged):
		// Checked again before anything is signed.
		s.uncheck()
		if s.diverged == nil {
			s.since = l.cfg.Now()
			l.cfg.Logger.ErrorContext(ctx, "the row store's Merkle log is not an extension of the log published to write-once storage: this ledger stopped signing checkpoints and serves none, nor tiles past what it published, nor proofs; "+
				"rows are still recorded and acknowledged, and their leaves wait in the queue until the published log is a prefix of the row store's again. "+
				"A row store restored from a backup older than what it published: stop ledgerd, restore the newest backup (up to the latest moment) and start it; "+
				"if none holds the published log, run ledgerctl fsck to list the rows lost and start a new log in a new bucket (or evidence directory) under a new merkleLog.origin. "+
				"Another ledger's log in the bucket: give each ledger its own (docs/operations.md, \"Another log in the bucket\")",
				slog.String("error", err.Error()))
		}
		s.diverged = err
	default:
		s.divergedMu.Unlock()
		return
	}
	since, diverged, pending := s.since, s.diverged, s.sharePending
	s.setMetricLocked(l.cfg.Metrics)
	s.divergedMu.Unlock()
	if diverged != nil || compared || pending {
		ok := l.shareDivergence(ctx, since, diverged)
		s.divergedMu.Lock()
		s.sharePending = !ok
		s.divergedMu.Unlock()
	}
}

// shareDivergence brings the row store's divergence record to what this
// holder found: the divergence found at since (diverged), or none. The
// record is read and written in one transaction, and written only when
// it says otherwise: a record of the same error by this holder is left
// as it is, and one found earlier keeps its time, which this holder then
// reports too. A write that fails is logged and tried again with the
// next outcome (sharePending), a publication's too; meanwhile the other
// replicas read the record as it was. It reports whether it succeeded.
func (l *Ledger) shareDivergence(ctx context.Context, since time.Time, diverged error) (ok bool) {
	var found *divergenceRecord
	// want is the record to keep, given the one there (raw); same when
	// that is it.
	want := func(raw []byte) (rec []byte, same bool) {
		found = decodeDivergence(raw)
		if diverged == nil {
			return nil, raw == nil
		}
		w := divergenceRecord{Since: since, Holder: l.Holder(), Error: diverged.Error()}
		if found != nil && !found.Since.IsZero() && found.Since.Before(since) {
			w.Since = found.Since // found first by another holder, or before a restart
		}
		rec = w.encode()
		return rec, bytes.Equal(rec, raw)
	}
	// Read first: most checks find the record as it should be (none), and
	// a commit is not made for nothing.
	same := false
	err := l.store.View(ctx, func(tx Tx) error {
		raw, err := tx.LogDivergence()
		_, same = want(raw)
		return err
	})
	if err == nil && !same {
		err = l.store.Update(ctx, func(tx Tx) error {
			raw, err := tx.LogDivergence()
			if err != nil {
				return err
			}
			rec, same := want(raw)
			if same {
				return nil
			}
			return tx.SetLogDivergence(rec)
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			l.cfg.Logger.WarnContext(ctx, "recording in the row store what the integrator found of the published log failed; the other replicas report what the record said before, and it is tried again",
				slog.Bool("diverged", diverged != nil), slog.String("error", err.Error()))
		}
		return false
	}
	if diverged != nil && found != nil && !found.Since.IsZero() && found.Since.Before(since) {
		s := l.log
		s.divergedMu.Lock()
		if s.diverged != nil && s.since.Equal(since) {
			s.since = found.Since
		}
		s.divergedMu.Unlock()
	}
	return true
}

// holdLog marks this replica as the holder of the integrator's lease
// (on) or not: while it holds it, what it found itself is what it
// reports and serves by, never the row store's record, which it keeps
// (shareDivergence); once it stops, it forgets what it found, and
// whoever holds the lease next checks again before it signs.
func (l *Ledger) holdLog(on bool) {
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	s.holding = on
	if !on {
		s.diverged = nil
	}
	s.setMetricLocked(l.cfg.Metrics)
}

// divergedLocked is LogDiverged with s.divergedMu held. A holder that
// has not yet checked the published log (it took the lease while the
// bucket is out, say) reports the record as the other replicas do.
func (s *logState) divergedLocked() (time.Time, error) {
	if s.diverged == nil && (!s.holding || !s.checked.Load()) && s.shared != nil {
		return s.shared.Since, s.shared.err()
	}
	return s.since, s.diverged
}

// setMetricLocked sets pactledger_log_diverged from what LogDiverged
// says, with s.divergedMu held.
func (s *logState) setMetricLocked(m *Metrics) {
	_, err := s.divergedLocked()
	m.logDiverged(err != nil)
}

// divergenceRecord is the row store's record of a divergence of the
// published log (LogTx.LogDivergence), as its holder of the integrator's
// lease found it.
type divergenceRecord struct {
	Since  time.Time `json:"since"`
	Holder string    `json:"holder"`
	Error  string    `json:"error"`
}

// maxDivergenceError bounds the error a divergence record keeps.
const maxDivergenceError = 4 << 10

func (r divergenceRecord) encode() []byte {
	if len(r.Error) > maxDivergenceError {
		r.Error = strings.ToValidUTF8(r.Error[:maxDivergenceError], "") + "…"
	}
	b, _ := json.Marshal(r) // a struct of a time and strings
	return b
}

// decodeDivergence reads a divergence record; nil for none. Bytes that
// are not one still say that a holder found the log diverged.
func decodeDivergence(b []byte) *divergenceRecord {
	if b == nil {
		return nil
	}
	var r divergenceRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Error == "" {
		return &divergenceRecord{Holder: "an unknown holder", Error: "the row store's record of the divergence cannot be read: " + strings.ToValidUTF8(string(b[:min(len(b), 256)]), "?")}
	}
	return &r
}

// err is the record's error, wrapping ErrLogDiverged, naming who found it.
func (r *divergenceRecord) err() error {
	why := strings.TrimPrefix(r.Error, ErrLogDiverged.Error()+": ")
	return fmt.Errorf("%w: %s (found by %s, which held the log integrator's lease)", ErrLogDiverged, why, r.Holder)
}

// followDivergence takes in the row store's divergence record as a
// replica read it.
func (l *Ledger) followDivergence(record []byte) {
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	s.shared = decodeDivergence(record)
	s.setMetricLocked(l.cfg.Metrics)
}

// signingStopped returns an error wrapping ErrLogDiverged, saying so to
// a reader of the log, while this ledger's integrator found the row
// store's log not to extend the log published to write-once storage: it
// signs no checkpoint then, and the log's readers (Checkpoint, Proof,
// Consistency, TileData past what was published) get this error instead
// of the row store's log. Nil otherwise.
func (l *Ledger) signingStopped() error {
	since, err := l.LogDiverged()
	return stoppedError(since, err)
}

// integratingStopped is signingStopped for this ledger's own integrator:
// what it found itself, never the row store's record of it (which it
// removes once its own check passes), also before it marked itself the
// holder (holdLog).
func (l *Ledger) integratingStopped() error {
	s := l.log
	s.divergedMu.Lock()
	since, err := s.since, s.diverged
	s.divergedMu.Unlock()
	return stoppedError(since, err)
}

// stoppedError is signingStopped's error for a divergence found at since.
func stoppedError(since time.Time, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("the log diverged from the one published to write-once storage, so this ledger has signed no checkpoint since %s and serves none of it, nor its proofs: "+
		"an operator must restore the row store's newest backup, or start a new log with a new bucket and origin (docs/operations.md, \"Another log in the bucket\"); %w",
		since.UTC().Format(time.RFC3339), err)
}

// LogDiverged returns since when and why no checkpoint of the log is
// signed, served or published, while the Merkle log in write-once storage
// is not a prefix of this ledger's (an error wrapping ErrLogDiverged); a
// nil error when the last check passed, none found it, or there is no
// log. On a replica that does not hold the integrator's lease it is what
// the holder found, as the row store records it.
func (l *Ledger) LogDiverged() (since time.Time, err error) {
	if l.log == nil {
		return time.Time{}, nil
	}
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	return s.divergedLocked()
}

// Integrate sequences every queued leaf (in batches of MaxBatch) and signs
// a checkpoint for the new size. It returns how many leaves it added. Only
// the lease holder calls it, with the context RunUnderLease gave it, so
// that its writes are fenced.
//
// Each batch is prepared in a read transaction: the queue read, the
// leaves hashed into the tree and the checkpoint signed. The write
// transaction then only stores the result, so it holds the store's commit
// (which every write waits for) for a short time.
func (l *Ledger) Integrate(ctx context.Context) (int, error) {
	if l.log == nil {
		return 0, ErrNoLog
	}
	if err := l.integratingStopped(); err != nil {
		return 0, err
	}
	total, moved := 0, 0
	checkRefs := false // whether the round reads its refs' leaf indexes first (onePerRef)
	for {
		var r *logRound
		seen := l.log.head.Load()
		if err := l.store.View(ctx, func(tx Tx) error {
			var err error
			r, err = l.prepareRound(tx, seen, checkRefs)
			return err
		}); err != nil || r == nil {
			return total, err
		}
		if integrateHook != nil {
			integrateHook()
		}
		err := l.store.Update(ctx, func(tx Tx) error { return r.store(tx) })
		switch {
		case errors.Is(err, errLogMoved) && moved < 3:
			// Another integrator extended the tree in between (the
			// lease changed hands): prepare again from its head.
			moved++
			continue
		case errors.Is(err, ErrRefLogged) && !checkRefs:
			// The store refused a leaf whose ref has one in the log, and
			// stored nothing of the round: prepare it again, the refs'
			// indexes read first, to log the others without it.
			checkRefs = true
			continue
		case err != nil:
			return total, fmt.Errorf("integrate: %w", err)
		}
		checkRefs = false
		for _, f := range r.refused {
			l.cfg.Logger.ErrorContext(ctx, "log: a queued leaf was not logged: its ref already has a leaf in the log, and a ref's leaf is never replaced; the row store was written outside the ledger (run ledgerctl fsck)",
				"ref", f.p.Ref, "leaf_index", f.had, "refused_index", f.at, "refused_leaf_hash", fmt.Sprintf("%x", tlog.RecordHash(f.p.Data)))
		}
		l.cfg.Metrics.logRefused(len(r.refused))
		if len(r.pend) == 0 {
			if r.read < l.log.cfg.MaxBatch {
				return total, nil
			}
			continue
		}
		total += len(r.pend)
		// Unless the head was cleared meanwhile (uncheck): the next
		// round then waits for the bucket's log to be checked again.
		l.log.head.CompareAndSwap(seen, &seenHead{size: r.size + int64(len(r.pend)), cp: r.cp})
		l.cfg.Metrics.logLeaves(len(r.pend))
		l.cfg.Metrics.logSize(r.size + int64(len(r.pend)))
		leaves := make([][]byte, len(r.pend))
		for i, p := range r.pend {
			leaves[i] = p.Data
		}
		l.log.recent.add(r.size, leaves)
		if r.read < l.log.cfg.MaxBatch {
			return total, nil
		}
	}
}

// integrateHook, when set (tests), runs between preparing a round and
// storing it.
var integrateHook func()

// checkHead is the holder's check of the bucket's log (checkPublished)
// with the head of the row store's log it compared: read before the
// check and again after it, and the same both times. A head that moved
// meanwhile (nothing signs while the holder checks, so a row store
// restored or swapped under the running ledger) is an error wrapping
// errLogReplaced, and the check is done again: the head read after a
// check could otherwise be another row store's, taken as checked.
func (l *Ledger) checkHead(ctx context.Context) (*seenHead, error) {
	size, cp, err := l.logHead(ctx)
	if err != nil {
		return nil, err
	}
	// Objects of the bucket this ledger did not write (foreign) stop its
	// publications, not its signing.
	if _, _, _, err := l.checkPublished(ctx); err != nil {
		return nil, err
	}
	if checkedHook != nil {
		checkedHook()
	}
	after, afterCP, err := l.logHead(ctx)
	if err != nil {
		return nil, err
	}
	if after != size || !bytes.Equal(afterCP, cp) {
		return nil, fmt.Errorf("%w: the row store's log held %d leaves when the check of the published log began and %d after it", errLogReplaced, size, after)
	}
	return &seenHead{size: size, cp: cp}, nil
}

// checkedHook, when set (tests), runs between the holder's check of the
// published log and its second read of the row store's head.
var checkedHook func()

// errLogMoved: the tree's size changed between preparing a round and
// storing it.
var errLogMoved = errors.New("the log's head moved while a round was prepared")

// errLogReplaced: the row store's log head is not the one the holder of
// the integrator's lease last checked or extended (logState.head).
var errLogReplaced = errors.New("the row store's log head is not the one this integrator last checked or extended")

// logRound is one extension of the tree, prepared in a read transaction.
type logRound struct {
	size   int64 // the tree size it extends
	read   int   // the queued leaves read
	pend   []PendingLeaf
	hashAt []int64       // each leaf's first storage index of hashes
	hashes [][]tlog.Hash // the stored hashes each leaf adds
	cp     []byte        // the signed checkpoint of the new size
	// refused are the queued leaves whose ref already has a leaf in the
	// log (or an earlier one in this round): taken off the queue, not
	// logged.
	refused []refusedLeaf
}

// prepareRound reads up to MaxBatch queued leaves and computes the round
// that sequences them after the tree tx sees; nil when none is queued.
// With seen (logState.head), the tree must be that one: else it returns
// an error wrapping errLogReplaced. With checkRefs, the leaves whose ref
// has a leaf in the log are refused first (onePerRef); without, the
// store refuses the whole round if one has (ErrRefLogged), so that the
// refs' indexes are read only when it happens.
func (l *Ledger) prepareRound(tx Tx, seen *seenHead, checkRefs bool) (*logRound, error) {
	size, head, err := tx.LogHead()
	if err != nil {
		return nil, err
	}
	pend, err := tx.PendingLeaves(l.log.cfg.MaxBatch)
	if err != nil || len(pend) == 0 {
		return nil, err
	}
	// A row store restored or swapped under the running integrator (a
	// backup put back while ledgerd runs, a failover to a copy that lags)
	// may hold a log the published one is not a prefix of: nothing is
	// signed on it before that is checked again.
	if seen != nil && (size != seen.size || !bytes.Equal(head, seen.cp)) {
		return nil, fmt.Errorf("%w: it has %d leaves, where this integrator left %d", errLogReplaced, size, seen.size)
	}
	// A ledger given another key than the one that signed the log so far
	// signs no checkpoint of it: readers holding the published key would
	// reject every one.
	if err := l.checkOwnKey(size, head); err != nil {
		return nil, err
	}
	r := &logRound{size: size, read: len(pend), pend: pend}
	if checkRefs {
		if r.pend, r.refused, err = onePerRef(tx, size, pend); err != nil {
			return nil, err
		}
	}
	if len(r.pend) == 0 {
		return r, nil
	}
	pend = r.pend
	r.hashAt, r.hashes = make([]int64, len(pend)), make([][]tlog.Hash, len(pend))
	hr := &roundHashes{tx: tx, stored: map[int64]tlog.Hash{}}
	for i, p := range pend {
		n := size + int64(i)
		hs, err := tlog.StoredHashesForRecordHash(n, tlog.RecordHash(p.Data), hr)
		if err != nil {
			return nil, fmt.Errorf("hash leaf %d: %w", n, err)
		}
		r.hashAt[i], r.hashes[i] = tlog.StoredHashCount(n), hs
		hr.add(r.hashAt[i], hs)
	}
	end := size + int64(len(pend))
	root, err := tlog.TreeHash(end, hr)
	if err != nil {
		return nil, fmt.Errorf("tree hash at %d: %w", end, err)
	}
	if r.cp, err = proof.Sign(proof.Checkpoint{Origin: l.Origin(), Size: end, Hash: root}, l.log.cfg.Signer); err != nil {
		return nil, err
	}
	return r, nil
}

// refusedLeaf is a queued leaf not logged because its ref already has a
// leaf at index had; it would have taken index at.
type refusedLeaf struct {
	p       PendingLeaf
	had, at int64
}

// onePerRef splits the queued leaves pend, to be logged from index size
// on, into those to log and those refused: a leaf whose ref already has
// a leaf in the log, or an earlier leaf in pend. A ref's leaf index is
// given once: a second leaf of a row (queued by someone who can write the
// row store but holds no log key, with the row's values changed) would
// otherwise become the row's leaf, and the log would sign the change. The
// ledger gives every row, dispute event, incident closure and policy its
// own ref, so none of its own leaves is refused.
func onePerRef(tx LogTx, size int64, pend []PendingLeaf) (keep []PendingLeaf, refused []refusedLeaf, err error) {
	refs := make([]string, len(pend))
	for i, p := range pend {
		refs[i] = p.Ref
	}
	logged, err := tx.LeafIndexes(refs)
	if err != nil {
		return nil, nil, fmt.Errorf("read the leaf indexes of the queued leaves: %w", err)
	}
	keep = pend[:0:0]
	for _, p := range pend {
		at := size + int64(len(keep))
		if had, ok := logged[p.Ref]; ok {
			refused = append(refused, refusedLeaf{p: p, had: had, at: at})
			continue
		}
		logged[p.Ref] = at
		keep = append(keep, p)
	}
	return keep, refused, nil
}

// store writes r in tx, provided the tree is still the size r extends:
// the refused leaves leave the queue, the others are sequenced.
func (r *logRound) store(tx Tx) error {
	size, _, err := tx.LogHead()
	if err != nil {
		return err
	}
	if size != r.size {
		return fmt.Errorf("%w: from %d to %d", errLogMoved, r.size, size)
	}
	for _, f := range r.refused {
		if err := tx.DropQueuedLeaf(f.p); err != nil {
			return err
		}
	}
	if len(r.pend) == 0 {
		return nil
	}
	for i, p := range r.pend {
		if err := tx.SequenceLeaf(p, r.size+int64(i), r.hashAt[i], r.hashes[i]); err != nil {
			return err
		}
	}
	return tx.SetLogHead(r.size+int64(len(r.pend)), r.cp)
}

// Checkpoint returns the latest checkpoint served: the one signed at the
// largest size write-once storage holds (servedHead), not the row store's
// latest while it is not yet published.
func (l *Ledger) Checkpoint(ctx context.Context) ([]byte, error) {
	if l.log == nil {
		return nil, ErrNoLog
	}
	if err := l.signingStopped(); err != nil {
		return nil, err
	}
	var cp []byte
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		_, cp, err = servedHead(tx)
		return err
	})
	if err == nil && len(cp) == 0 {
		// Nothing logged yet: sign the empty tree, whose root is the hash
		// of nothing (RFC 6962 §2.1).
		return proof.Sign(proof.Checkpoint{Origin: l.Origin(), Size: 0, Hash: sha256.Sum256(nil)}, l.log.cfg.Signer)
	}
	return cp, err
}

// Proof returns the proof bundle of a row (or an event ref) under the
// latest checkpoint served (servedHead). A row swept by retention keeps
// its leaf and its proof. A row, dispute event or incident closure the
// row store holds but whose leaf is not yet in a served checkpoint
// (queued for the log, or given an index past the checkpoint published
// to write-once storage) is an error wrapping ErrNotLogged;
// one whose leaf is neither in the log nor queued, ErrNoLeaf (the read is
// one snapshot, and a write queues its leaf in its own transaction, so
// nothing held is between the two); a ref that names none (no such row
// or event, the closure of an open incident), ErrNotFound.
func (l *Ledger) Proof(ctx context.Context, ref string) (*proof.Bundle, error) {
	if l.log == nil {
		return nil, ErrNoLog
	}
	if err := l.signingStopped(); err != nil {
		return nil, err
	}
	var b *proof.Bundle
	err := l.store.View(ctx, func(tx Tx) error {
		lf, err := l.signedLeaf(ctx, tx, ref, true)
		if errors.Is(err, ErrNotFound) {
			switch held, herr := holds(tx, ref); {
			case herr != nil:
				return herr
			case held:
				switch queued, qerr := tx.LeafQueued(ref); {
				case qerr != nil:
					return qerr
				case queued:
					return fmt.Errorf("%w: %s", ErrNotLogged, ref)
				}
				return fmt.Errorf("%s %w: the row store was changed outside the ledger (or it was recorded while the ledger kept no log); run ledgerctl fsck", refWords(ref), ErrNoLeaf)
			}
			return err
		}
		if err != nil {
			return err
		}
		path, err := tlog.ProveRecord(lf.size, lf.idx, lf.lr)
		if err != nil {
			return fmt.Errorf("prove leaf %d: %w", lf.idx, err)
		}
		rowID := ref
		if strings.Contains(ref, "/") {
			rowID = ""
		}
		b = proof.NewBundle(rowID, lf.idx, lf.data, path, lf.cp)
		return nil
	})
	return b, err
}

// holds reports whether the row store holds what ref names, whose leaf
// is then queued when the log has none yet: a row (or the tombstone of a
// row swept), the n-th dispute event of a row, or the closure of an
// incident (an open incident has none). Only refs spelled as the ledger
// spells them name anything.
func holds(tx Tx, ref string) (bool, error) {
	kind, rest, _ := strings.Cut(ref, "/")
	switch kind {
	case "dispute":
		rowID, n, _ := strings.Cut(rest, "/")
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || disputeRef(rowID, i) != ref || !ValidID(rowID) {
			return false, nil
		}
		r, err := tx.Row(rowID)
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return i < len(r.DisputeEvents), nil
	case "incident":
		id, _, _ := strings.Cut(rest, "/")
		if incidentRef(id) != ref {
			return false, nil
		}
		inc, err := incident(tx, id)
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return inc.ID == id && !inc.Open(), nil
	}
	if !ValidID(ref) {
		return false, nil
	}
	if _, err := tx.Row(ref); errors.Is(err, ErrStoreEdited) {
		return true, nil // held, though not served: fsck names it
	} else if !errors.Is(err, ErrNotFound) {
		return err == nil, err
	}
	if _, err := tx.Tombstone(ref); !errors.Is(err, ErrNotFound) {
		return err == nil, err
	}
	return false, nil
}

// refWords names what a ref the ledger spelled names, in words: "row X",
// "dispute event N of row X", "the closure of incident I".
func refWords(ref string) string {
	kind, rest, _ := strings.Cut(ref, "/")
	switch kind {
	case "dispute":
		rowID, n, _ := strings.Cut(rest, "/")
		return "dispute event " + n + " of row " + rowID
	case "incident":
		id, _, _ := strings.Cut(rest, "/")
		return "the closure of incident " + id
	case "revocation":
		grant, _, _ := strings.Cut(rest, "/")
		return "a revocation of the grant whose id hashes to sha256:" + grant
	}
	return "row " + ref
}

// ignoreNotFound is err, or nil when err wraps ErrNotFound.
func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// servedHead returns, in tx, the log as the ledger shows it to anyone
// outside it: the largest size whose tiles and checkpoint write-once
// storage holds (TilesPublished), with the checkpoint the row store kept
// at that size; 0 and nil before the first publication. The integrator
// signs a checkpoint before it publishes it, and a checkpoint shown
// before write-once storage holds it is one the ledger cannot hold
// itself to: a row store restored from a backup taken before it checks
// clean against the bucket, and would sign another tree at its size.
// So only what the bucket holds is served; the row store's newer head
// is the integrator's own (LogHead).
// ErrPublishedSizeUnsigned: the row store records the log as published up
// to a size at which it holds no signed checkpoint.
var ErrPublishedSizeUnsigned = errors.New("the log's published size is no signed size")

func servedHead(tx LogTx) (size int64, cp []byte, err error) {
	size, head, err := tx.LogHead()
	if err != nil {
		return 0, nil, err
	}
	published, err := tx.TilesPublished()
	if err != nil {
		return 0, nil, err
	}
	switch {
	case published >= size:
		return size, head, nil
	case published <= 0:
		return 0, nil, nil
	}
	cp, err = tx.CheckpointAt(published)
	if errors.Is(err, ErrNotFound) {
		// Not ErrNotFound: what asked (a row's proof, the checkpoint) is
		// not missing; the row store's record is wrong.
		return 0, nil, fmt.Errorf("%w: the row store records the log as published up to %d leaves but holds no checkpoint signed at that size, so the ledger serves no checkpoint; its record of how far the log was published was changed outside the ledger (set it back to a size it signed, or to 0 to publish again from the start)", ErrPublishedSizeUnsigned, published)
	}
	if err != nil {
		return 0, nil, err
	}
	return published, cp, nil
}

// signedLeaf is the leaf of ref in the tree of the latest checkpoint.
type signedLeaf struct {
	idx, size int64      // the leaf's index, the tree's size
	cp        []byte     // the checkpoint
	lr        *logReader // what the leaf was read through
	data      []byte     // the leaf's bytes
}

// signedLeaf reads the leaf of ref under the latest checkpoint: the one
// served (servedHead) when served, else the row store's latest (the
// ledger's own checks). A ref the log holds no leaf of is an error
// wrapping ErrNotFound; one whose leaf is not yet in that checkpoint,
// ErrNotLogged.
func (l *Ledger) signedLeaf(ctx context.Context, tx Tx, ref string, served bool) (*signedLeaf, error) {
	idx, err := tx.LeafIndex(ref)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: no leaf for %s", ErrNotFound, ref)
	}
	if err != nil {
		return nil, err
	}
	head := tx.LogHead
	if served {
		head = func() (int64, []byte, error) { return servedHead(tx) }
	}
	size, cp, err := head()
	if err != nil {
		return nil, err
	}
	if idx >= size {
		return nil, fmt.Errorf("%w: %s", ErrNotLogged, ref)
	}
	lr, err := l.logReader(ctx, tx)
	if err != nil {
		return nil, err
	}
	_, data, err := lr.Leaf(idx)
	if err != nil {
		return nil, err
	}
	return &signedLeaf{idx: idx, size: size, cp: cp, lr: lr, data: data}, nil
}

// Consistency returns the RFC 6962 consistency proof from the tree of size
// from to the tree of size to (0 means the latest served, servedHead),
// with the checkpoints signed at both sizes (the older may be absent when
// none was signed at exactly that size). Sizes past the checkpoint served
// are not answered.
func (l *Ledger) Consistency(ctx context.Context, from, to int64) (path []tlog.Hash, oldCP, newCP []byte, err error) {
	if l.log == nil {
		return nil, nil, nil, ErrNoLog
	}
	if err := l.signingStopped(); err != nil {
		return nil, nil, nil, err
	}
	err = l.store.View(ctx, func(tx Tx) error {
		size, head, err := servedHead(tx)
		if err != nil {
			return err
		}
		if to == 0 {
			to = size
		}
		if from < 0 || from > to || to > size {
			return fmt.Errorf("%w: want 0 <= from <= to <= %d (the latest size), got from=%d to=%d", ErrInvalid, size, from, to)
		}
		newCP = head
		if to != size {
			if newCP, err = tx.CheckpointAt(to); err != nil {
				return fmt.Errorf("%w: no checkpoint was signed at size %d", ErrNotFound, to)
			}
		}
		if cp, err := tx.CheckpointAt(from); err == nil {
			oldCP = cp
		}
		if from == 0 || from == to {
			return nil
		}
		lr, err := l.logReader(ctx, tx)
		if err != nil {
			return err
		}
		path, err = tlog.ProveTree(to, from, lr)
		return err
	})
	return path, oldCP, newCP, err
}

// Leaves returns up to n leaves from index start, for audits: those of
// the tree of the latest checkpoint served (servedHead).
func (l *Ledger) Leaves(ctx context.Context, start int64, n int) ([][]byte, error) {
	if l.log == nil {
		return nil, ErrNoLog
	}
	var out [][]byte
	err := l.store.View(ctx, func(tx Tx) error {
		size, _, err := servedHead(tx)
		if err != nil {
			return err
		}
		lr, err := l.logReader(ctx, tx)
		if err != nil {
			return err
		}
		for i := start; i < size && len(out) < n; i++ {
			_, d, err := lr.Leaf(i)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// TreeSize returns the size of the row store's latest checkpoint, which
// may not be published yet: the ledger's own reads (its key, its
// metrics). What it serves is servedHead's.
func (l *Ledger) TreeSize(ctx context.Context) (int64, error) {
	size, _, err := l.logHead(ctx)
	return size, err
}

// logHead reads the size and signed bytes of the row store's latest
// checkpoint in a transaction of its own; 0 and nil before the first.
func (l *Ledger) logHead(ctx context.Context) (size int64, cp []byte, err error) {
	err = l.store.View(ctx, func(tx Tx) error {
		size, cp, err = tx.LogHead()
		return err
	})
	return size, cp, err
}

// DefaultTileRetention is how long the log's tiles and checkpoints are
// retained in write-once storage from their put: 10 years (of 365 days).
const DefaultTileRetention = 10 * 365 * 24 * time.Hour

// Tile paths (C2SP tlog-tiles): tile/<L>/<N>[.p/<W>] for hashes,
// tile/entries/<N>[.p/<W>] for entry bundles, under LogPrefix in
// write-once storage.
const LogPrefix = "log/"

// tilePath is the C2SP path of a hash tile (x/mod's path without the
// height element, which C2SP fixes at 8).
func tilePath(t tlog.Tile) string {
	return strings.Replace(t.Path(), "tile/8/", "tile/", 1)
}

// entriesPath is the C2SP path of the entry bundle of level-0 tile t.
func entriesPath(t tlog.Tile) string {
	return strings.Replace(t.Path(), "tile/8/0/", "tile/entries/", 1)
}

// TileData returns the bytes of a C2SP tile path ("tile/0/000",
// "tile/1/x001/234.p/7", "tile/entries/000.p/3") from the store, for
// serving; ErrNotFound when it is beyond the tree of the checkpoint
// served (servedHead): the bucket holds the same bytes under their
// paths. While signing is stopped (signingStopped) a tile past it is
// answered with that error instead.
func (l *Ledger) TileData(ctx context.Context, path string) ([]byte, error) {
	return l.tileData(ctx, path, true)
}

// tileData is TileData; guard refuses the tiles past what was published
// while signing is stopped (the publication and its read-backs read
// their own).
func (l *Ledger) tileData(ctx context.Context, path string, guard bool) ([]byte, error) {
	if l.log == nil {
		return nil, ErrNoLog
	}
	stopped := l.signingStopped()
	if !guard {
		stopped = nil
	}
	entries := strings.HasPrefix(path, "tile/entries/")
	goPath := strings.Replace(path, "tile/", "tile/8/", 1)
	if entries {
		goPath = strings.Replace(path, "tile/entries/", "tile/8/0/", 1)
	}
	t, err := tlog.ParseTilePath(goPath)
	if err != nil || t.L < 0 || (tilePath(t) != path && entriesPath(t) != path) {
		return nil, fmt.Errorf("%w: %q is not a tile path", ErrInvalid, path)
	}
	var data []byte
	err = l.store.View(ctx, func(tx Tx) error {
		head := tx.LogHead // the publication's own reads
		if guard {
			head = func() (int64, []byte, error) { return servedHead(tx) }
		}
		size, _, err := head()
		if err != nil {
			return err
		}
		if stopped != nil {
			if published, err := tx.TilesPublished(); err != nil || tileEnd(t) > published {
				return cmp.Or(err, stopped)
			}
		}
		if tileEnd(t) > size {
			return fmt.Errorf("%w: tile %s is beyond the tree of size %d", ErrNotFound, path, size)
		}
		lr, err := l.logReader(ctx, tx)
		if err != nil {
			return err
		}
		if entries {
			data, err = entryBundle(lr, t)
		} else {
			data, err = tlog.ReadTileData(t, lr)
		}
		return err
	})
	return data, err
}

// tileEnd is the tree size a tile needs: its last leaf's index + 1, or
// math.MaxInt64 for a tile no tree of int64 leaves holds (a level whose
// span is 2^63 leaves or more, an index past the largest tree), so that
// every such tile is beyond the tree.
func tileEnd(t tlog.Tile) int64 {
	shift := uint(t.H) * uint(t.L)
	if t.H <= 0 || t.L < 0 || t.N < 0 || shift >= 63 {
		return math.MaxInt64
	}
	span, width := int64(1)<<shift, int64(1)<<uint(t.H)
	if limit := math.MaxInt64 / span; int64(t.W) > limit || t.N > (limit-int64(t.W))/width {
		return math.MaxInt64
	}
	return (t.N*width + int64(t.W)) * span
}

// entryBundle is the C2SP entry bundle of level-0 tile t: each leaf as a
// big-endian uint16 length and its bytes.
func entryBundle(lr *logReader, t tlog.Tile) ([]byte, error) {
	out := make([]byte, 0, int(t.W)*(2+leafSize))
	for i := range int64(t.W) {
		idx := t.N<<uint(t.H) + i
		d, ok := lr.l.log.recent.get(idx)
		if !ok {
			var err error
			if _, d, err = lr.Leaf(idx); err != nil {
				return nil, err
			}
		}
		if len(d) > 0xffff {
			return nil, fmt.Errorf("leaf %d is longer than an entry bundle allows", idx)
		}
		out = binary.BigEndian.AppendUint16(out, uint16(len(d)))
		out = append(out, d...)
	}
	return out, nil
}

// PublishTiles writes the tiles and entry bundles the tree gained since
// the last publication, and the checkpoint, to write-once storage. Tiles
// are deterministic, so a publication cut short by a crash is redone: an
// identical re-put succeeds.
func (l *Ledger) PublishTiles(ctx context.Context) error {
	if l.log == nil {
		return ErrNoLog
	}
	var from, to int64
	var cp []byte
	if err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if from, err = tx.TilesPublished(); err != nil {
			return err
		}
		to, cp, err = tx.LogHead()
		return err
	}); err != nil {
		return err
	}
	// Nothing is published under a key that did not sign the log.
	if err := l.checkOwnKey(to, cp); err != nil {
		return err
	}
	// The bucket's log is checked before each publication, and once
	// without one: a row store restored from an older backup is found at
	// start, not at its next row. A row store that says more was
	// published than its log holds is checked too.
	// A publication refused because the store lacks the published log
	// is refused again, not skipped, until it passes.
	if to == from && l.log.checked.Load() && !l.refusedMissing() {
		return nil
	}
	epoch := l.log.epoch()
	published, latest, foreign, err := l.checkPublished(ctx)
	if err != nil {
		return err
	}
	l.log.markChecked(epoch)
	if foreign != nil {
		return fmt.Errorf("%w; nothing more of this log is published to the bucket while it is there", foreign)
	}
	if err := l.publishedLogMissing(from, published); err != nil {
		return err
	}
	// The row store's log is still the one read above, and the one the
	// integrator checked: a publication that began before the row store
	// was replaced under it (logState.uncheck) puts nothing more, nor
	// records in the new row store a publication of the old one.
	still := func(tx Tx) error {
		if l.log.epoch() != epoch {
			return fmt.Errorf("%w: the row store's log was found changed while its tiles were published", errLogReplaced)
		}
		mine, err := tx.CheckpointAt(to)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if !bytes.Equal(mine, cp) {
			return fmt.Errorf("%w: the row store no longer holds the checkpoint of size %d being published", errLogReplaced, to)
		}
		return nil
	}
	if to <= from || published > to {
		// published > to: another holder of the integrator's lease
		// published a later size of this log since the head was read.
		return nil
	}
	retain := l.cfg.Now().Add(l.behindBy() + l.log.cfg.TileRetention).UTC()
	if err := l.putPending(ctx, cp, retain); err != nil {
		return err
	}
	for _, t := range tlog.NewTiles(TileHeight, from, to) {
		paths := []string{tilePath(t)}
		if t.L == 0 {
			paths = append(paths, entriesPath(t))
		}
		for _, p := range paths {
			data, err := l.tileData(ctx, p, false)
			if err != nil {
				return err
			}
			if _, err := l.objects.Put(ctx, LogPrefix+p, data, retain); err != nil {
				return publishErr(LogPrefix+p, err)
			}
		}
	}
	// Every checkpoint stays as a write-once object of its own; the
	// store's "checkpoint" object is replaced where the store allows, and
	// only over the version checked above: one written since (another
	// holder of the integrator's lease, another ledger) is checked again
	// next round instead of being replaced unchecked.
	if err := l.store.View(ctx, still); err != nil {
		return err
	}
	if _, err := l.objects.Put(ctx, LogPrefix+"checkpoints/"+strconv.FormatInt(to, 10), cp, retain); err != nil {
		return publishErr(LogPrefix+"checkpoints/"+strconv.FormatInt(to, 10), err)
	}
	if vs, ok := l.objects.(versionedStore); ok {
		if _, err := vs.SwapVersion(ctx, LogPrefix+"checkpoint", cp, retain, latest); err != nil {
			if errors.Is(err, ErrObjectChanged) {
				return fmt.Errorf("the bucket's %scheckpoint changed while this ledger published its log (another holder of the integrator's lease, or another ledger); it is checked again: %w", LogPrefix, err)
			}
			return fmt.Errorf("put checkpoint: %w", err)
		}
	}
	return l.store.Update(ctx, func(tx Tx) error {
		if err := still(tx); err != nil {
			return err
		}
		cur, err := tx.TilesPublished()
		if err != nil || cur >= to {
			return err
		}
		return tx.SetTilesPublished(to)
	})
}

// ErrPublishedLogMissing: the row store records the log's tiles as
// published up to a size, and the evidence store holds no checkpoint of
// this ledger's log that large. It is not the store the log was
// published to (a ledgerd, or ledgerd compact, given another evidence
// directory or bucket than the one it ran with), or it lost the log.
// Nothing is published to it, and no tile leaves the row store, which
// keeps every leaf it holds: publishing there would record a copy no
// reader of the real store sees, and the leaves read back from there
// would leave the row store for good.
var ErrPublishedLogMissing = errors.New("the evidence store does not hold the log this ledger published")

// publishedLogMissing returns an error wrapping ErrPublishedLogMissing
// when the row store records tiles published up to recorded leaves and
// the largest checkpoint of this ledger's log the evidence store holds
// is of held leaves, fewer. A store that keeps no versions holds no
// checkpoint read here: nothing is said of it.
func (l *Ledger) publishedLogMissing(recorded, held int64) error {
	if recorded <= held {
		return nil
	}
	if _, ok := l.objects.(versionedStore); !ok {
		return nil
	}
	name := "the evidence store"
	if s, ok := l.objects.(fmt.Stringer); ok {
		name = s.String()
	}
	if held == 0 {
		return fmt.Errorf("%w: %s holds none of this ledger's published log, though the row store records its tiles as published there up to %d leaves: "+
			"it is not the evidence store this ledger published its log to (give it the evidence directory or bucket it runs with, or copy every object under log/ from that one into this one), or that store lost the log; "+
			"nothing is published to it, and no tile leaves the row store", ErrPublishedLogMissing, name, recorded)
	}
	return fmt.Errorf("%w: %s holds this ledger's log up to %d leaves, though the row store records its tiles as published there up to %d leaves: "+
		"it is not the evidence store this ledger published its log to (give it the evidence directory or bucket it runs with), or a copy of it older than the row store; "+
		"nothing is published to it, and no tile leaves the row store", ErrPublishedLogMissing, name, held, recorded)
}

// heldPublished returns the size of the largest checkpoint of this
// ledger's log the evidence store holds (0: none), read as a publication
// reads it (readPublished).
func (l *Ledger) heldPublished(ctx context.Context) (int64, error) {
	p, err := l.readPublished(ctx, false, false)
	if err != nil {
		return 0, err
	}
	var held int64
	for _, c := range p.checkpoints {
		if cp, err := l.ownCheckpoint(c.key, c.raw); err == nil {
			held = max(held, cp.Size)
		}
	}
	return held, nil
}

// refusedMissing reports whether this process's last publication was
// refused with ErrPublishedLogMissing.
func (l *Ledger) refusedMissing() bool {
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	return errors.Is(s.refused, ErrPublishedLogMissing)
}

// PendingKey is where a publication puts the checkpoint of its tree
// before its tiles, in a store that keeps versions: tiles past every
// checkpoint kept by size are then vouched for by a checkpoint this
// ledger signed, so that a publication cut short between its tiles and
// its checkpoint is told from tiles someone else put there
// (checkTilesCover). It is no key of the tiles' layout: readers of the
// log do not read it.
const PendingKey = LogPrefix + "pending"

// putPending puts cp, the checkpoint of the tree a publication is about
// to put the tiles of, at PendingKey, over the version there (another
// holder's, or objects this ledger did not write: the record is the
// ledger's own, never evidence against it). Nothing where the store
// keeps no versions.
func (l *Ledger) putPending(ctx context.Context, cp []byte, retain time.Time) error {
	vs, ok := l.objects.(versionedStore)
	if !ok {
		return nil
	}
	l.log.pendingMu.Lock()
	defer l.log.pendingMu.Unlock()
	prev := l.log.pending
	for range 2 {
		if prev == nil {
			raw, err := l.objects.Get(ctx, PendingKey)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil:
				return fmt.Errorf("read %s: %w", PendingKey, err)
			default:
				prev = raw
			}
		}
		if bytes.Equal(prev, cp) {
			l.log.pending = prev
			return nil
		}
		if theirs, err := l.ownCheckpoint(PendingKey, prev); err == nil && theirs.Size > publishedSize(cp) {
			// A later publication of this log (another holder of the
			// integrator's lease) began since: its record stays.
			l.log.pending = prev
			return nil
		}
		_, err := vs.SwapVersion(ctx, PendingKey, cp, retain, prev)
		if err == nil {
			l.log.pending = cp
			return nil
		}
		if !errors.Is(err, ErrObjectChanged) {
			return fmt.Errorf("put %s: %w", PendingKey, err)
		}
		prev = nil // read it again
	}
	l.log.pending = nil
	return fmt.Errorf("put %s: it changed twice while this ledger put it (another holder of the integrator's lease publishing): %w", PendingKey, ErrObjectChanged)
}

// publishErr is the error of a put of the log's object key: one the
// bucket already holds with other bytes means the bucket's log is not
// this ledger's (tiles and checkpoints are deterministic).
//
// Every checkpoint of the bucket this ledger's key signed was compared
// with its log before the puts (checkPublished), so other bytes under a
// key are no checkpoint's it signed: ErrForeignObject, not a divergence.
func publishErr(key string, err error) error {
	if errors.Is(err, ErrObjectExists) {
		return fmt.Errorf("%w: the bucket holds other bytes at %s than this ledger's log: another log was published there (another ledger with the same bucket, or this ledger's log started again under a new signing key), or someone with write access to the bucket put them; nothing more of this log is published to the bucket", ErrForeignObject, key)
	}
	return fmt.Errorf("put %s: %w", key, err)
}

// checkPublished returns the size of the largest checkpoint the bucket
// holds (0 without one) and the bytes of its live checkpoint (the object
// "checkpoint", which the next publication replaces; nil without one),
// or an error wrapping ErrLogDiverged unless every checkpoint read
// (readPublished) is of a tree this ledger's log extends: the same
// origin, no more leaves than the row store's log holds, and the same
// root as its tree of that size. It runs before every publication, so
// that a ledger never publishes its log over another's: a second ledger
// given the same bucket, a ledger whose signing key or row store was
// lost and started a new log, or one whose row store was restored from a
// backup older than what it published. A store without versions (no
// latest checkpoint) leaves such a log to the tiles' own puts: it is
// caught at the first object both logs write with other bytes.
//
// The first check of a holder of the integrator's lease, and any that
// finds no live checkpoint, also read the checkpoints the bucket keeps
// out of sight of a read by name (see readPublished): a live checkpoint
// deleted from the bucket must not let a row store restored from an
// older backup sign a fork of the log it published.
//
// Checkpoints this ledger's key did not sign are reported (noteForeign)
// and returned as foreign, an error wrapping ErrForeignObject (the first):
// the caller that publishes puts nothing over them, the one that signs
// signs on.
func (l *Ledger) checkPublished(ctx context.Context) (size int64, latest []byte, foreign, err error) {
	p, err := l.readPublished(ctx, !l.log.checked.Load(), false)
	if err != nil {
		return 0, nil, nil, err
	}
	l.noteDeleted(ctx, p)
	size, _, found, err := l.comparePublishedLog(ctx, p)
	if err != nil {
		return 0, nil, nil, err
	}
	for _, f := range found {
		l.noteForeign(ctx, f)
	}
	switch len(found) {
	case 0:
		return size, p.latest, nil, nil
	case 1:
		return size, p.latest, found[0], nil
	}
	return size, p.latest, fmt.Errorf("%w (and %d more)", found[0], len(found)-1), nil
}

// comparePublishedLog compares each checkpoint p holds with the row
// store's log (comparePublished), returning the largest size, or the
// first that is not of a tree this ledger's log extends with the error.
// Two checkpoints of one log are each a prefix of the other, so comparing
// them all is comparing the largest; a bucket holding two logs (another
// ledger's checkpoints under deleted ones) is found either way.
//
// Checkpoints this ledger's key did not sign are left out of the
// comparison and returned as foreign, each an error wrapping
// ErrForeignObject.
func (l *Ledger) comparePublishedLog(ctx context.Context, p publishedLog) (int64, publishedCheckpoint, []error, error) {
	var size int64
	var foreign []error
	for _, c := range p.checkpoints {
		n, err := l.comparePublished(ctx, c.key, c.raw)
		if errors.Is(err, ErrForeignObject) {
			foreign = append(foreign, err)
			continue
		}
		if err != nil {
			if d := p.deletions(); d != "" && errors.Is(err, ErrLogDiverged) {
				err = fmt.Errorf("%w (%s)", err, d)
			}
			return 0, c, foreign, err
		}
		size = max(size, n)
	}
	if p.tilesCover > 0 {
		err := l.checkTilesCover(ctx, p.tilesCover)
		switch {
		case errors.Is(err, ErrForeignObject):
			foreign = append(foreign, err)
		case err != nil:
			return 0, publishedCheckpoint{}, foreign, err
		}
	}
	return size, publishedCheckpoint{}, foreign, nil
}

// checkTilesCover compares the row store's log with the tiles the bucket
// keeps past its checkpoints, covering n leaves: those of a publication
// cut short after its tiles and before its checkpoint. Tiles are put only
// of a signed tree, so the row store must hold those n leaves, and the
// level-0 tile at their edge must be its own; it holds the hashes of the
// last leaves published, which a fork (a row store restored from an
// older backup and grown again) recorded as other rows. An error wrapping
// ErrLogDiverged otherwise.
//
// Tiles carry no signature: anyone who may put objects in the bucket can
// put one past the log's edge. A publication puts the checkpoint of its
// tree at PendingKey before its tiles (putPending), so tiles this ledger
// put are vouched for by a checkpoint its key signed, at least as large,
// which is compared as every other (comparePublished). Tiles no such
// checkpoint vouches for, and an edge tile other than the row store's
// under one that does, are an error wrapping ErrForeignObject: they
// refuse the publication, not the signing. (A publication cut short by
// a version before the pending checkpoint was put reads so too.)
func (l *Ledger) checkTilesCover(ctx context.Context, n int64) error {
	lister, ok := l.objects.(KeptLister)
	if !ok {
		return nil
	}
	raw, err := l.readPending(ctx, lister)
	if err != nil {
		return err
	}
	if raw == nil {
		return fmt.Errorf("%w: the bucket's tiles cover %d leaves, more than any checkpoint it keeps, and it holds no record of a publication (%s) vouching for them: tiles put outside this ledger", ErrForeignObject, n, PendingKey)
	}
	pending, err := l.ownCheckpoint(PendingKey, raw)
	if err != nil {
		return fmt.Errorf("%w (the bucket's tiles cover %d leaves, more than any checkpoint it keeps, and nothing this ledger signed vouches for them)", err, n)
	}
	// Compared whatever its size: a checkpoint this ledger signed, which
	// its log must extend, however many leaves the tiles claim.
	if _, err := l.comparePublished(ctx, PendingKey, raw); err != nil {
		return err
	}
	if pending.Size < n {
		return fmt.Errorf("%w: the bucket's tiles cover %d leaves, more than any checkpoint it keeps, and the latest publication this ledger began (%s) was of %d: tiles put outside this ledger", ErrForeignObject, n, PendingKey, pending.Size)
	}
	t := tlog.Tile{H: TileHeight, L: 0, N: (n - 1) >> TileHeight, W: int((n-1)&(1<<TileHeight-1)) + 1}
	key := LogPrefix + tilePath(t)
	kept, err := keptKey(ctx, lister, key)
	if err != nil {
		return err
	}
	if kept == nil {
		return fmt.Errorf("the bucket's %s, which covers its tiles' %d leaves, was not found when read again", key, n)
	}
	theirs, err := l.readKept(ctx, *kept)
	if err != nil {
		return err
	}
	ours, err := l.tileData(ctx, tilePath(t), false)
	if err != nil {
		return fmt.Errorf("the row store's %s: %w", tilePath(t), err)
	}
	if !bytes.Equal(theirs, ours) {
		return fmt.Errorf("%w: the bucket's %s, past every checkpoint it keeps, is not the row store's tile, though the publication this ledger began of %d leaves is of its log: a tile put outside this ledger",
			ErrForeignObject, key, pending.Size)
	}
	return nil
}

// readPending reads the bucket's PendingKey: its latest version, or the
// newest kept behind a delete marker; nil when it holds none.
func (l *Ledger) readPending(ctx context.Context, lister KeptLister) ([]byte, error) {
	raw, err := l.objects.Get(ctx, PendingKey)
	switch {
	case err == nil:
		return raw, nil
	case !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("read the bucket's %s: %w", PendingKey, err)
	}
	kept, err := keptKey(ctx, lister, PendingKey)
	if kept == nil || err != nil {
		return nil, err
	}
	return l.readKept(ctx, *kept)
}

// publishedLog is what readPublished read of the log in the bucket.
type publishedLog struct {
	// latest is the live checkpoint, LogPrefix+"checkpoint", as a read
	// by name finds it: what the next publication replaces (nil: none).
	latest []byte
	// checkpoints are the checkpoints to compare with the row store's
	// log: the live one, or the newest version kept of it behind a
	// delete marker, and the largest kept by size.
	checkpoints []publishedCheckpoint
	// hidden names the log's checkpoints a delete marker hides, up to
	// maxNamedHidden of them, of hiddenCount.
	hidden      []string
	hiddenCount int
	// missing: no live checkpoint reads by name, though the bucket keeps
	// checkpoints of the log and a publication of the row store's log
	// ended (which put it).
	missing bool
	// tilesCover is how many leaves the bucket's level-0 tiles cover when
	// that is more than its largest checkpoint read (a publication cut
	// short between its tiles and its checkpoint); 0 otherwise.
	tilesCover int64
}

// publishedCheckpoint is a checkpoint read from the bucket and its key.
type publishedCheckpoint struct {
	key string
	raw []byte
}

// maxNamedHidden bounds the hidden checkpoints a report names one by
// one, of the first maxHeldHidden a listing found.
const (
	maxNamedHidden = 5
	maxHeldHidden  = 1000
)

// listKeptTimeout bounds the listings of readPublished.
const listKeptTimeout = 2 * time.Minute

// errFound ends a listing once it found what it looked for.
var errFound = errors.New("found")

// keptKey returns the newest version the bucket keeps of key, hidden by a
// delete marker or not; nil when it keeps none.
func keptKey(ctx context.Context, lister KeptLister, key string) (*KeptKey, error) {
	var kept *KeptKey
	if err := lister.ListKept(ctx, key, func(k KeptKey) error {
		if k.Key != key {
			return nil
		}
		kept = &k
		return errFound
	}); err != nil && !errors.Is(err, errFound) {
		return nil, fmt.Errorf("list the versions of the bucket's %s: %w", key, err)
	}
	return kept, nil
}

// readPublished reads the bucket's live checkpoint (the object
// "checkpoint"; nothing when the store keeps no versions). When thorough,
// or when no live checkpoint reads by name, it also reads what the bucket
// keeps out of sight of a read by name, where the store lists it
// (KeptLister):
//
//   - the newest version of "checkpoint" kept behind a delete marker: on
//     S3 with Object Lock a plain DELETE hides a key and removes nothing;
//   - the largest of the write-once checkpoints kept by size,
//     "checkpoints/<size>", hidden ones included (largestKept); with
//     listAll, found by listing them all, which also finds every one a
//     delete marker hides (fsck).
//
// The integrator reads thoroughly once for each holder of its lease
// before it signs, while the logs differ, and when the live checkpoint
// is found missing; a publication otherwise reads the live checkpoint
// alone.
func (l *Ledger) readPublished(ctx context.Context, thorough, listAll bool) (publishedLog, error) {
	var p publishedLog
	if _, ok := l.objects.(versionedStore); !ok {
		return p, nil
	}
	// Whether a publication of this row store's log has ended, read
	// before the bucket: one that ends after the read of the live
	// checkpoint below put it after that read, and is no deletion.
	var done int64
	if err := l.store.View(ctx, func(tx Tx) error {
		var err error
		done, err = tx.TilesPublished()
		return err
	}); err != nil {
		return publishedLog{}, err
	}
	key := LogPrefix + "checkpoint"
	raw, err := l.objects.Get(ctx, key)
	switch {
	case err == nil:
		p.latest = raw
		p.checkpoints = append(p.checkpoints, publishedCheckpoint{key: key, raw: raw})
	case errors.Is(err, ErrNotFound):
		thorough = true
	default:
		return p, fmt.Errorf("read the bucket's latest checkpoint: %w", err)
	}
	lister, ok := l.objects.(KeptLister)
	if !(thorough || listAll) || !ok {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, listKeptTimeout)
	defer cancel()
	if p.latest == nil {
		kept, err := keptKey(ctx, lister, key)
		if err != nil {
			return p, err
		}
		if kept != nil {
			raw, err := l.readKept(ctx, *kept)
			if err != nil {
				return p, err
			}
			p.checkpoints = append(p.checkpoints, publishedCheckpoint{key: key, raw: raw})
			if kept.Hidden {
				p.hidden, p.hiddenCount = append(p.hidden, key), 1
			}
		}
	}
	largest, found, err := l.largestKept(ctx, lister, &p, listAll)
	if err != nil {
		return p, err
	}
	if found {
		raw, err := l.readKept(ctx, largest)
		if err != nil {
			return p, err
		}
		p.checkpoints = append(p.checkpoints, publishedCheckpoint{key: largest.Key, raw: raw})
	}
	if l.anyForeign(p.checkpoints) {
		// A checkpoint this ledger did not sign stands where its own would
		// be read (the live one put over, one kept by size put ahead of
		// the log): the largest of its own kept by size is found by
		// listing them, so that objects anyone may put there cannot hide
		// a log its row store does not extend.
		if c, ok := l.largestOwnKept(ctx, lister); ok {
			p.checkpoints = append(p.checkpoints, c)
		}
	}
	// The largest first, so that a divergence is reported of it (fsck
	// lists the published leaves up to it); one that does not read as a
	// checkpoint first of all.
	slices.SortStableFunc(p.checkpoints, func(a, b publishedCheckpoint) int {
		return cmp.Compare(publishedSize(b.raw), publishedSize(a.raw))
	})
	// Named in a stable order: the live checkpoint, then by size.
	slices.SortFunc(p.hidden, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b))
	})
	if len(p.hidden) > maxNamedHidden {
		p.hidden = p.hidden[:maxNamedHidden]
	}
	if p.latest == nil && len(p.checkpoints) > 0 {
		// Missing, unless no publication of this row store's log had
		// ended before the live checkpoint was read: the first one puts
		// its checkpoints by size before the latest, so one under way (or
		// cut short) shows the same.
		p.missing = done > 0
	}
	return p, nil
}

// anyForeign reports whether one of cs is not a checkpoint this ledger's
// log key signed.
func (l *Ledger) anyForeign(cs []publishedCheckpoint) bool {
	for _, c := range cs {
		if _, err := l.ownCheckpoint(c.key, c.raw); errors.Is(err, ErrForeignObject) {
			return true
		}
	}
	return false
}

// maxForeignSkipped bounds the checkpoints kept by size largestOwnKept
// reads and finds not this ledger's before it gives up.
const maxForeignSkipped = 32

// largestOwnKept lists every checkpoint the bucket keeps by size and
// returns the largest this ledger's log key signed (false: none found, or
// the listing failed or took too long, which is logged: a bucket of a log
// years old holds millions).
func (l *Ledger) largestOwnKept(ctx context.Context, lister KeptLister) (publishedCheckpoint, bool) {
	bySize := LogPrefix + "checkpoints/"
	var keys []KeptKey
	err := lister.ListKept(ctx, bySize, func(k KeptKey) error {
		name := strings.TrimPrefix(k.Key, bySize)
		if n, err := strconv.ParseInt(name, 10, 64); err == nil && n >= 0 && strconv.FormatInt(n, 10) == name {
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		l.cfg.Logger.WarnContext(ctx, "the checkpoints kept by size were not all listed, to find the largest this ledger signed behind checkpoints it did not", slog.String("error", err.Error()))
		return publishedCheckpoint{}, false
	}
	size := func(k KeptKey) int64 {
		n, _ := strconv.ParseInt(strings.TrimPrefix(k.Key, bySize), 10, 64)
		return n
	}
	slices.SortFunc(keys, func(a, b KeptKey) int { return cmp.Compare(size(b), size(a)) })
	for i, k := range keys {
		if i == maxForeignSkipped {
			break
		}
		raw, err := l.readKept(ctx, k)
		if err != nil {
			l.cfg.Logger.WarnContext(ctx, "a checkpoint kept by size could not be read", slog.String("error", err.Error()))
			return publishedCheckpoint{}, false
		}
		if _, err := l.ownCheckpoint(k.Key, raw); err == nil {
			return publishedCheckpoint{key: k.Key, raw: raw}, true
		}
	}
	return publishedCheckpoint{}, false
}

// largestKept finds the largest of the checkpoints the bucket keeps by
// size, "checkpoints/<size>", hidden ones included (false: none).
//
// The sizes are decimal without leading zeros, so a listing's order
// (lexical: "10" before "9") is not theirs, and no prefix or start key
// selects the largest without the smaller ones around it: with listAll,
// or when nothing narrower finds it, every one is listed (one request
// per thousand on S3) and the largest kept. Otherwise the size is found
// from the level-0 hash tiles, whose keys are of fixed width: the ledger
// puts a checkpoint only after the tiles of its tree, each write-once, so
// no checkpoint is larger than the leaves the tiles cover (tilesCover).
// When they cover no more than the largest checkpoint p holds already,
// none kept by size is larger; else the checkpoint of the size they
// cover is the one the last publication put, read by its key.
func (l *Ledger) largestKept(ctx context.Context, lister KeptLister, p *publishedLog, listAll bool) (KeptKey, bool, error) {
	bySize := LogPrefix + "checkpoints/"
	if !listAll {
		held := int64(0)
		for _, c := range p.checkpoints {
			cp, err := l.ownCheckpoint(c.key, c.raw)
			if errors.Is(err, ErrForeignObject) {
				continue // compared with nothing (comparePublished)
			}
			if err != nil || cp.Origin != l.Origin() {
				return KeptKey{}, false, nil // a divergence already
			}
			held = max(held, cp.Size)
		}
		covered, err := tilesCovered(ctx, lister, held)
		if err != nil {
			return KeptKey{}, false, err
		}
		if covered == held {
			return KeptKey{}, false, nil
		}
		key := bySize + strconv.FormatInt(covered, 10)
		found, err := keptKey(ctx, lister, key)
		if err != nil {
			return KeptKey{}, false, err
		}
		if found != nil {
			kept := *found
			if kept.Hidden {
				p.hidden, p.hiddenCount = append(p.hidden, kept.Key), p.hiddenCount+1
			}
			return kept, true, nil
		}
		// Tiles without their checkpoint: a publication cut short
		// between them (a restart, the lease handed over), or tiles
		// someone else put there. They are held to the checkpoint the
		// publication put before them (checkTilesCover), rather than to
		// every checkpoint listed: a bucket of a log years old holds
		// millions, more than a check before signing can list.
		p.tilesCover = covered
		return KeptKey{}, false, nil
	}
	var largest KeptKey
	most := int64(-1)
	if err := lister.ListKept(ctx, bySize, func(k KeptKey) error {
		name := strings.TrimPrefix(k.Key, bySize)
		n, err := strconv.ParseInt(name, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != name {
			return nil // no key the ledger writes
		}
		if k.Hidden {
			p.hiddenCount++
			if len(p.hidden) < maxHeldHidden {
				p.hidden = append(p.hidden, k.Key)
			}
		}
		if n > most {
			most, largest = n, k
		}
		return nil
	}); err != nil {
		return KeptKey{}, false, fmt.Errorf("list the bucket's checkpoints (%s): %w", bySize, err)
	}
	return largest, most >= 0, nil
}

// tilesCovered returns how many leaves the level-0 hash tiles the bucket
// keeps cover, hidden ones included, from held, a size they are known to
// cover, on. A publication puts every tile its tree needs, the partial
// one at its right edge included (".p/<width>"), and a later one the same
// tiles wider or full, so the tiles cover every size up to the largest
// published and none above: the largest is found by doubling the step
// from held while they cover it, then halving the gap, two listings of a
// tile's keys at most for each size tried.
func tilesCovered(ctx context.Context, lister KeptLister, held int64) (int64, error) {
	lo, step := held, int64(1) // the tiles cover lo
	hi := int64(-1)            // the least size found uncovered
	for hi < 0 {
		n := lo + step
		if n <= lo { // beyond int64
			return 0, errors.New("the bucket's tiles cover more leaves than a log can hold")
		}
		ok, err := tilesCover(ctx, lister, n)
		if err != nil {
			return 0, err
		}
		if ok {
			lo, step = n, 2*step
		} else {
			hi = n
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := tilesCover(ctx, lister, mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// tilesCover reports whether the bucket keeps, hidden or not, the level-0
// hash tile that holds leaf n-1 at a width that holds it: the full tile,
// or a partial one at least as wide.
func tilesCover(ctx context.Context, lister KeptLister, n int64) (bool, error) {
	t := tlog.Tile{H: TileHeight, L: 0, N: (n - 1) >> TileHeight, W: 1 << TileHeight}
	width := int((n-1)&(1<<TileHeight-1)) + 1
	full := LogPrefix + tilePath(t)
	partial := full + ".p/"
	found := false
	look := func(prefix string, match func(k KeptKey) bool) error {
		err := lister.ListKept(ctx, prefix, func(k KeptKey) error {
			if !match(k) {
				return nil
			}
			found = true
			return errFound
		})
		if err != nil && !errors.Is(err, errFound) {
			return fmt.Errorf("list the bucket's tiles (%s): %w", prefix, err)
		}
		return nil
	}
	if err := look(full, func(k KeptKey) bool { return k.Key == full }); err != nil || found || width == 1<<TileHeight {
		return found, err
	}
	err := look(partial, func(k KeptKey) bool {
		// Only a width written as the ledger writes it: one with a sign
		// or leading zeros names no tile a reader asks for.
		s := strings.TrimPrefix(k.Key, partial)
		w, err := strconv.Atoi(s)
		return err == nil && strconv.Itoa(w) == s && w >= width && w < 1<<TileHeight
	})
	return found, err
}

// publishedSize is the size of a checkpoint read from the bucket, for
// ordering only (comparePublished judges it): the largest possible for
// one that does not read as a checkpoint.
func publishedSize(raw []byte) int64 {
	cp, err := checkpointBody(raw)
	if err != nil {
		return math.MaxInt64
	}
	return cp.Size
}

// readKept reads the version of k a listing found: by its version where
// the store keeps them (a hidden key reads by no other means), else by
// name.
func (l *Ledger) readKept(ctx context.Context, k KeptKey) ([]byte, error) {
	var raw []byte
	var err error
	if vr, ok := l.objects.(VersionReader); ok && k.Version != "" {
		raw, err = vr.GetVersion(ctx, k.Key, k.Version)
	} else {
		raw, err = l.objects.Get(ctx, k.Key)
	}
	if err != nil {
		return nil, fmt.Errorf("read the bucket's %s (version %q): %w", k.Key, k.Version, err)
	}
	return raw, nil
}

// deletions says in words which of the log's checkpoints were deleted
// from the bucket, "" when none was.
func (p publishedLog) deletions() string {
	var parts []string
	live := LogPrefix + "checkpoint"
	hidden := p.hidden
	if len(hidden) > 0 && hidden[0] == live {
		parts = append(parts, "a delete marker hides the bucket's latest checkpoint "+live+", whose versions are kept behind it")
		hidden = hidden[1:]
	} else if p.missing {
		parts = append(parts, "the bucket's latest checkpoint "+live+" is missing, though the bucket keeps checkpoints of the log")
	}
	if n := p.hiddenCount - (len(p.hidden) - len(hidden)); n > 0 {
		more := ""
		if n > len(hidden) {
			more = fmt.Sprintf(" and %d more", n-len(hidden))
		}
		parts = append(parts, fmt.Sprintf("delete markers hide %d of its checkpoints by size (%s%s)", n, strings.Join(hidden, ", "), more))
	}
	return strings.Join(parts, "; ")
}

// noteDeleted logs, once for each new finding, that checkpoints of the
// log were deleted from the bucket.
func (l *Ledger) noteDeleted(ctx context.Context, p publishedLog) {
	d := p.deletions()
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	if d == "" || d == s.deleted {
		s.deleted = d
		return
	}
	s.deleted = d
	l.cfg.Logger.WarnContext(ctx, "checkpoints of the Merkle log were deleted from write-once storage: someone with delete access to the bucket removed the log's record from sight (on S3 the locked versions stay behind the delete markers). "+
		"This ledger compares its log with the largest checkpoint the bucket keeps, signs nothing that does not extend it, and writes "+LogPrefix+"checkpoint again at its next publication; "+
		"find who deleted them in the bucket's access logs, and remove the delete markers so that readers of the bucket see the log again (docs/operations.md, \"Deleted checkpoints\")",
		slog.String("found", d))
}

// noteRefused records the outcome of a publication for
// LogPublicationRefused: an error wrapping ErrForeignObject or
// ErrPublishedLogMissing sets it, a publication that passes clears it,
// other errors leave it.
func (l *Ledger) noteRefused(err error) {
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	switch {
	case err == nil:
		s.refused = nil
	case errors.Is(err, ErrForeignObject), errors.Is(err, ErrPublishedLogMissing):
		if s.refused == nil {
			s.refusedSince = l.cfg.Now()
		}
		s.refused = err
	}
}

// LogPublicationRefused returns since when and why this process's
// integrator publishes nothing more of the log to write-once storage:
// objects there it did not write (an error wrapping ErrForeignObject), or
// a store that does not hold the log published so far (an error wrapping
// ErrPublishedLogMissing).
// The log is still signed in the row store meanwhile, and served as far
// as it was published. Nil when its last publication passed, or it has
// none.
func (l *Ledger) LogPublicationRefused() (since time.Time, err error) {
	if l.log == nil {
		return time.Time{}, nil
	}
	s := l.log
	s.divergedMu.Lock()
	defer s.divergedMu.Unlock()
	return s.refusedSince, s.refused
}

// maxForeignNoted bounds the foreign objects a process remembers having
// reported; past it each is reported every time it is found.
const maxForeignNoted = 1000

// noteForeign reports err, an object under the log's keys this ledger
// did not write (ErrForeignObject), once: at ERROR, and in the metric
// pactledger_log_foreign_objects_total.
func (l *Ledger) noteForeign(ctx context.Context, err error) {
	s := l.log
	s.divergedMu.Lock()
	seen := s.foreign[err.Error()]
	if !seen && len(s.foreign) < maxForeignNoted {
		if s.foreign == nil {
			s.foreign = map[string]bool{}
		}
		s.foreign[err.Error()] = true
	}
	s.divergedMu.Unlock()
	if seen {
		return
	}
	l.cfg.Metrics.logForeign()
	l.cfg.Logger.ErrorContext(ctx, "write-once storage holds an object under the Merkle log's keys that this ledger did not write: someone with write access to the bucket (or the evidence directory) put it, or another ledger publishes there. "+
		"It is no evidence of whose log this is, so this ledger goes on signing its log in the row store, serves it only as far as it was published, and publishes nothing more to the bucket while it is there; "+
		"find who wrote it in the bucket's access logs (docs/operations.md, \"Objects the ledger did not write\")",
		slog.String("error", err.Error()))
}

// comparePublished returns the size of raw, the bucket's checkpoint at
// key, or an error wrapping ErrLogDiverged unless it is of a tree this
// ledger's log extends (see checkPublished).
//
// A checkpoint this ledger's log key did not sign is no evidence of
// another log, and is an error wrapping ErrForeignObject instead:
// whoever may put objects in the bucket, with no log key, could write
// one of the log's origin and any size, and on S3 under Object Lock
// nobody could remove it. Signing stops only where this ledger would
// contradict a checkpoint its own key signed.
func (l *Ledger) comparePublished(ctx context.Context, key string, raw []byte) (int64, error) {
	theirs, err := l.ownCheckpoint(key, raw)
	if err != nil {
		return 0, err
	}
	if origin := l.Origin(); theirs.Origin != origin {
		return 0, fmt.Errorf("%w: the bucket's %s is of the log %q, this ledger's is %q: another ledger publishes its log to this bucket (or this ledger's merkleLog.origin was changed)", ErrLogDiverged, key, theirs.Origin, origin)
	}
	if theirs.Size == 0 {
		return 0, nil
	}
	// The head is read after the checkpoint: whatever this log published,
	// its row store held first.
	var head int64
	var ours tlog.Hash
	if err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if head, _, err = tx.LogHead(); err != nil || theirs.Size > head {
			return err
		}
		// Most often the bucket's checkpoint is the one this ledger
		// signed at that size.
		if mine, err := tx.CheckpointAt(theirs.Size); err == nil && bytes.Equal(mine, raw) {
			ours = theirs.Hash
			return nil
		}
		lr, err := l.logReader(ctx, tx)
		if err != nil {
			return err
		}
		ours, err = tlog.TreeHash(theirs.Size, lr)
		return err
	}); err != nil {
		return 0, fmt.Errorf("this log's tree of size %d: %w", theirs.Size, err)
	}
	if theirs.Size > head {
		return 0, fmt.Errorf("%w: the bucket's %s has %d leaves, this ledger's log %d: the bucket holds a log this row store has not got all of (a row store restored from an older backup, a new log after a lost row store or signing key, or another ledger with the same origin)", ErrLogDiverged, key, theirs.Size, head)
	}
	if ours != theirs.Hash {
		return 0, fmt.Errorf("%w: the bucket's %s of size %d has root %x, this ledger's tree of that size %x: the logs differ (a new log after a lost row store or signing key, a row store restored from an older backup that took other rows since, or another ledger with the same origin)", ErrLogDiverged, key, theirs.Size, theirs.Hash[:], ours[:])
	}
	return theirs.Size, nil
}

// ErrForeignObject: write-once storage holds, under a key of the log, an
// object this ledger did not write: a checkpoint its log key did not
// sign, or a tile other than its own (another ledger's log in the same
// bucket, or objects put there by someone with write access to it).
// Nothing of this ledger's log is published over it, but it is no
// evidence that this ledger would contradict a checkpoint it signed: it
// stops neither signing nor serving (see comparePublished).
var ErrForeignObject = errors.New("write-once storage holds objects under the Merkle log's keys that this ledger did not write")

// ownCheckpoint returns the body of raw, the bucket's checkpoint at key,
// or an error wrapping ErrForeignObject unless this ledger's log key
// signed it.
func (l *Ledger) ownCheckpoint(key string, raw []byte) (proof.Checkpoint, error) {
	cp, err := checkpointBody(raw)
	if err != nil {
		return proof.Checkpoint{}, fmt.Errorf("%w: the bucket's %s is not a checkpoint (%v)", ErrForeignObject, key, err)
	}
	if _, err := note.Open(raw, note.VerifierList(l.log.verifier)); err != nil {
		return proof.Checkpoint{}, fmt.Errorf("%w: the bucket's %s (of the log %q, %d leaves) is signed by %s, not by this ledger's log key %s",
			ErrForeignObject, key, cp.Origin, cp.Size, signersOf(raw), keyName(l.log.verifier.Name(), l.log.verifier.KeyHash()))
	}
	return cp, nil
}

// versionedStore is an object store that can write a new version of a key
// (each version retained as written): S3 with versioning, or a local
// directory replacing the file atomically. SwapVersion writes it only
// while the key's latest version holds prev (nil: while it has none),
// else returns an error wrapping ErrObjectChanged.
type versionedStore interface {
	SwapVersion(ctx context.Context, key string, body []byte, retainUntil time.Time, prev []byte) (Location, error)
}
