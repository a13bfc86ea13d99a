// Package bolt is the embedded row store: rows, their secondary indexes,
// evidence bundles, JWKS snapshots and the evidence outbox in one bbolt
// file, written with group commit (many rows per transaction and fsync).
package bolt

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/pactledger/pactledger/internal/batch"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

var (
	bEvidence = []byte("evidence")
	bJWKS     = []byte("jwks")
	bObjects  = []byte("object_records") // object key (objectKey) -> its location
	bOutbox   = []byte("outbox")
	bMeta     = []byte("meta")
	bDrills   = []byte("drills")
	bGrants   = []byte("grants")
	bIncident = []byte("incidents")
	bHolds    = []byte("holds")
	// bRepeats: a receipt's first row id -> the incidents its repeats
	// opened (ledger.RefRepeatIncident).
	bRepeats  = []byte("repeat_incidents")
	bTombs    = []byte("tombstones")
	bSegments = []byte("segments")
	bDeletes  = []byte("deletions")
	bSnapKeep = []byte("snapshot_retain")

	// Rows (layout 2, docs/design/017-row-store-layout.md): each row has a
	// sequence number, given in commit order. bRowData holds the row by
	// its number, bRowSeq the number by the row's id (8 bytes); every
	// index entry ends with the number. Layout 4 (docs/design/019) keys
	// what else belongs to a row by its number too: its leaf index
	// (bRowLeaf), its evidence bundle and the record of its evidence
	// object.
	bRowData = []byte("row_data")
	bRowSeq  = []byte("row_seq")
	// bRowLeaves: a row's number -> the index of its leaf in the Merkle
	// log, in runs (runs.go; layout 6). Layouts 4 and 5 kept a key per
	// row in bRowLeaf (layout 4: the integrator appends here instead of
	// rewriting the row's bRowSeq entry at a random key).
	bRowLeaves = []byte("row_leaves")
	// bReqJWT: a request JWT's hash -> the number of the first row that
	// used it, keyed by the hash's first 16 bytes (reqKey, numbers.go;
	// layout 7).
	bReqJWT = []byte("request_jwts")
	// bExpiry: runs (runs.go) of retain-until and row number, under no
	// value prefix.
	bExpiry = []byte("by_expiry")
	// bDrillPool: a bitmap of the numbers of the rows the monthly drill
	// may sample (ledger.Drillable); a row's position in the pool is its
	// number (layout 3, drillpool.go).
	bDrillPool = []byte("drill_pool")

	// The indexes: value, 0x00, time (8 bytes), row number.
	ixPrincipal = []byte("by_principal")
	ixGrant     = []byte("by_grant")
	ixTarget    = []byte("by_target")
	ixAgent     = []byte("by_agent")
	ixStatus    = []byte("by_status")
	ixClass     = []byte("by_class")
	ixTime      = []byte("by_time")
	// ixSigned: the receipt rows whose receipt signature passed
	// (ledger.Row.ReceiptVerified), by grant: the rows that can count
	// toward a grant's countMax (layout 11, ledger.Query.Signed).
	ixSigned = []byte("by_grant_signed")

	allBuckets = [][]byte{bRowData, bRowSeq, bPending, bRowLeaves, bEvidence, bJWKS, bObjects, bOutbox, bReqJWT, bMeta, bDrills, bGrants, bIncident, bHolds, bRepeats, bExpiry, bTombs, bSegments, bDeletes, bSnapKeep,
		ixPrincipal, ixGrant, ixTarget, ixAgent, ixStatus, ixClass, ixTime, ixSigned, bPlans, bOutboxFail, bDead, bDrillPool}

	kIncidentSeq = []byte("incident_seq")
	kOutboxN     = []byte("outbox_n")
	kRowSeqN     = []byte("row_seq_n")
)

// Config tunes the store. The zero value is the default.
type Config struct {
	// MaxBatch caps how many Update calls share one transaction; default 512.
	MaxBatch int
	// OpenTimeout bounds waiting for the file lock; default 5 s.
	OpenTimeout time.Duration
	// CommitDelay is how long a batch waits for more writes before it
	// commits while others are writing (batch.Loop's linger); default
	// DefaultCommitDelay, negative for none. Every commit rewrites the
	// pages it touches and syncs the file, so at a moderate rate (a
	// few writes a commit) this cost is shared by more rows; a lone
	// write that finds the store idle is never held back.
	CommitDelay time.Duration
	// OnCommit, when set, is told the size of each committed batch and
	// how long its commit took: running its writes, writing the pages
	// and syncing the file.
	OnCommit func(batch int, took time.Duration)

	// genRows: rows a generation of pending keys takes (pending.go);
	// 0: genRows of the rows the file holds. Tests set a few.
	genRows int
}

// DefaultCommitDelay is Config.CommitDelay's default. At 1,000 rows/s it
// made a commit carry 1.4 to 2 times the writes, which cut ledgerd's CPU a
// row by about 8 % and the bytes written a row by about a quarter
// (docs/performance-history.md, "A group commit that waits for company").
const DefaultCommitDelay = 2 * time.Millisecond

// Store is a ledger.Store on one bbolt file.
type Store struct {
	db   *bolt.DB
	cfg  Config
	reqs chan *request
	quit chan struct{}
	done chan struct{}

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	noSpace error // the last commit's error when it failed for lack of space; nil after a commit succeeds

	leases *leases

	// codec compresses and decompresses values; it changes once, when
	// the file gets its own dictionary (maybeTrain).
	codec atomic.Pointer[Codec]
	// trained: the file has its own dictionary. trainRetry: the row
	// number at which a failed attempt to make it is tried again. Both
	// belong to the commit loop.
	trained    bool
	trainRetry uint64
	// recent: the numbers of the rows the commit loop created last
	// (numbers.go); it belongs to the commit loop.
	recent *recent
	// filters: the key filter in use and the one being built (filter.go);
	// builds: the goroutines building one.
	filters keyFilters
	builds  sync.WaitGroup
	// openRows: the rows the file had numbered when it was opened.
	openRows uint64
	// pending: the keys rows added to bRowSeq and bReqJWT that are not
	// written there yet (pending.go). merge: the generation being
	// merged, nil when none; mergeRetryAt: no step runs before then
	// (after a failed one). Both belong to the commit loop.
	pending      *pendingIDs
	merge        *mergeState
	mergeRetryAt time.Time
	// merges and mergeFailures count the generations merged and the
	// merges that failed since Open.
	merges, mergeFailures atomic.Uint64
}

type request struct {
	fn    func(ledger.Tx) error
	fence *ledger.Fence // the lease the write is fenced by, if any
	err   chan error
	// own: the store's own step between writes (the key filter's), not
	// counted as a write by OnCommit.
	own bool
}

// openDB opens the bbolt file at path as the store does. The free list is
// written with every commit (NoFreelistSync false): opening then reads it
// from its page instead of walking every page of the file, and a failed
// commit reloads it from there instead of walking the file again
// (docs/design/010-faults-and-readiness.md). It is bbolt's array free
// list, which hands out the lowest free pages first: a commit's pages then
// lie together at the start of the free space, where the hashmap free list
// takes free pages from anywhere in the file, and a disk syncs scattered
// pages more slowly the larger the span they lie over (docs/performance-history.md,
// "The free list's order").
func openDB(path string, timeout time.Duration) (*bolt.DB, error) {
	return openLocked(path, bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistArrayType, NoFreelistSync: false, InitialMmapSize: 1 << 30})
}

// GrowStep is how far past the pages it uses a file opened by openDB
// grows when it needs room: bbolt's allocation size (DB.AllocSize, 16
// MiB), since the initial map (1 GiB) is larger. A new file is this
// size, and a compacted copy (CompactFile) is its pages in use and about
// this much more: compaction cannot make a file smaller than that.
const GrowStep = 16 << 20

// openLocked opens the bbolt file at path with opts, waiting up to
// opts.Timeout (0: for as long as it takes) for its lock, and returns it
// once the lock it holds is on the file path names. A compaction renames
// its copy over the file while it holds the file's lock, and releases it
// only then (compactIfPending): an open that waited for that lock holds
// the old file, no longer at path, and opens path again. A file removed
// from path while the open waited is an error, not a new file made in
// its place.
func openLocked(path string, opts bolt.Options) (*bolt.DB, error) {
	var deadline time.Time
	if opts.Timeout > 0 {
		deadline = time.Now().Add(opts.Timeout)
	}
	if err := checkLength(path); err != nil {
		return nil, err
	}
	for {
		var f *os.File
		o := opts
		o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
			var err error
			f, err = os.OpenFile(name, flag, perm)
			if opened := fileOpened.Load(); err == nil && opened != nil {
				(*opened)(name)
			}
			return f, err
		}
		db, err := bolt.Open(path, 0o600, &o)
		if err != nil {
			return nil, err
		}
		same, err := namesFile(path, f)
		switch {
		case err != nil:
			db.Close()
			return nil, err
		case same:
			return db, nil
		}
		db.Close()
		if !deadline.IsZero() {
			if opts.Timeout = time.Until(deadline); opts.Timeout <= 0 {
				return nil, bolterrors.ErrTimeout
			}
		}
	}
}

// fileOpened, when set (tests), is told of each file openLocked opens,
// before it waits for the file's lock.
var fileOpened atomic.Pointer[func(path string)]

// namesFile reports whether path names the open file f.
func namesFile(path string, f *os.File) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	named, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("%s was removed while waiting for its lock", path)
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(held, named), nil
}

// ErrLocked: another process holds the bbolt file.
var ErrLocked = errors.New("bbolt file is locked by another process")

// Open opens (creating if needed) the store at path. A file a move
// marked as moved into PostgreSQL (MarkMoved) is refused with an error
// wrapping ErrMoved, and left as it was.
func Open(path string, cfg Config) (*Store, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = 5 * time.Second
	}
	switch {
	case cfg.CommitDelay == 0:
		cfg.CommitDelay = DefaultCommitDelay
	case cfg.CommitDelay < 0:
		cfg.CommitDelay = 0
	}
	db, err := openDB(path, cfg.OpenTimeout)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// A file moved into another store is refused before anything is
	// written to it (moved.go): the ledger lives there now.
	if err := db.View(func(btx *bolt.Tx) error { return refuseMoved(btx, path) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// A file of a newer layout is refused before anything is written to
	// it, such as a bucket this version has and that layout dropped; so
	// is a bbolt file that is not a ledger's.
	err = db.View(func(btx *bolt.Tx) error {
		if err := notALedger(btx); err != nil {
			return err
		}
		return newerLayout(fileLayout(btx))
	})
	if err == nil {
		err = db.Update(createBuckets)
	}
	var dicts map[uint32][]byte
	if err == nil {
		err = db.View(func(btx *bolt.Tx) error {
			dicts = fileDicts(btx)
			return nil
		})
	}
	var codec *Codec
	if err == nil {
		codec, err = newCodec(dicts)
	}
	if err == nil {
		err = convertLayout(db, codec, slog.Default())
	}
	if err == nil {
		db, err = compactIfPending(db, cfg.OpenTimeout, slog.Default())
	}
	if err != nil {
		if db != nil {
			db.Close()
		}
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	var pending *pendingIDs
	err = db.View(func(btx *bolt.Tx) error {
		var err error
		pending, err = readPending(btx)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: reading the pending row numbers: %w", path, err)
	}
	s := &Store{db: db, cfg: cfg, reqs: make(chan *request, cfg.MaxBatch), quit: make(chan struct{}), done: make(chan struct{}), leases: newLeases(),
		trained: len(dicts) > 1, recent: newRecent(recentRows), pending: pending}
	s.codec.Store(codec)
	_ = db.View(func(btx *bolt.Tx) error {
		s.openRows = metaUint(btx.Bucket(bMeta), kRowSeqN)
		return nil
	})
	go s.commitLoop()
	s.maybeBuildFilter(s.openRows)
	return s, nil
}

// ErrNotLedger: the bbolt file is not a ledger's row store.
var ErrNotLedger = errors.New("the bbolt file is not a ledger's row store")

// retiredBuckets are buckets the first versions made in every ledger file
// that no later version reads or removes: a layout-1 file may hold them.
var retiredBuckets = [][]byte{[]byte("grant_tool")}

// maxNamedBuckets bounds the buckets notALedger names.
const maxNamedBuckets = 5

// notALedger returns an error wrapping ErrNotLedger when the file of btx
// has no layout mark (every ledger's file since layout 2 has one) and
// holds a bucket no layout of the ledger has: another program's bbolt
// file (the Provider's provider.db, say) given as the store's path. A
// new, empty file, and a layout-1 file, pass.
func notALedger(btx *bolt.Tx) error {
	if fileLayout(btx) > 0 {
		return nil
	}
	known := map[string]bool{}
	for _, b := range slices.Concat(allBuckets, oldBuckets, retiredBuckets) {
		known[string(b)] = true
	}
	var foreign []string
	n := 0
	if err := btx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !known[string(name)] {
			if n++; len(foreign) < maxNamedBuckets {
				foreign = append(foreign, strconv.Quote(string(name)))
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	more := ""
	if n > len(foreign) {
		more = fmt.Sprintf(" and %d more", n-len(foreign))
	}
	return fmt.Errorf("%w: it has no ledger layout mark and holds buckets no ledger keeps (%s%s), so it is another program's file; nothing was written to it. Give store.path the ledger's own file (by default <dataDir>/ledger.db), or a path where no file exists yet for a new ledger",
		ErrNotLedger, strings.Join(foreign, ", "), more)
}

// createBuckets creates those of this version's buckets the file lacks.
func createBuckets(btx *bolt.Tx) error {
	for _, b := range allBuckets {
		if _, err := btx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// Close waits for queued writes to commit, then closes the file. Update
// calls after Close fail with ledger.ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.done
		s.builds.Wait()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// CommitDelay is how long a batch waits for more writes before it
// commits while others are writing; 0: none.
func (s *Store) CommitDelay() time.Duration { return s.cfg.CommitDelay }

// Path returns the file path.
func (s *Store) Path() string { return s.db.Path() }

// DiskTimes returns, summed over the transactions committed since Open,
// the time bbolt spent writing their pages and syncing the file (the
// changed pages, their fdatasync, the meta page and its fdatasync) and
// the time it spent turning their changed B+tree nodes into pages
// first. With a commit's own time (Config.OnCommit) they tell the disk's
// share of a commit from the CPU's.
func (s *Store) DiskTimes() (write, spill time.Duration) {
	st := s.db.Stats().TxStats
	return st.GetWriteTime(), st.GetSpillTime()
}

// FreePages returns how many pages of the file are free or freed by the
// last commits (free once no reader needs them): until commits reuse
// them, every commit writes their list, 8 bytes a page.
func (s *Store) FreePages() int {
	st := s.db.Stats()
	return st.FreePageN + st.PendingPageN
}

// Update implements ledger.Store with group commit. A write fenced by a
// lease (ledger.WithFence) is checked against the lease table in its
// transaction; the members of one batch are independent.
func (s *Store) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	r := &request{fn: fn, err: make(chan error, 1)}
	if f, ok := ledger.FenceFrom(ctx); ok {
		r.fence = &f
	}
	return s.queue(ctx, r)
}

// betweenWrites runs fn in the commit loop, between two writes' calls.
func (s *Store) betweenWrites(fn func()) error {
	return s.own(func(*tx) error { fn(); return nil })
}

// own runs fn in the commit loop as one of the store's own steps, with
// the transaction of the batch it joins.
func (s *Store) own(fn func(*tx) error) error {
	return s.queue(context.Background(), &request{fn: func(t ledger.Tx) error { return fn(t.(*tx)) }, err: make(chan error, 1), own: true})
}

// queue hands r to the commit loop and waits for its result.
func (s *Store) queue(ctx context.Context, r *request) error {
	select {
	case <-s.quit:
		return ledger.ErrClosed
	default:
	}
	select {
	case s.reqs <- r:
	case <-s.quit:
		return ledger.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued the write may commit: wait for its result even if ctx ends.
	select {
	case err := <-r.err:
		return err
	case <-s.done:
		// The commit loop answers every request it takes before it stops;
		// one queued after its last look was never run.
		select {
		case err := <-r.err:
			return err
		default:
			return ledger.ErrClosed
		}
	}
}

// Writable reports whether a write would be taken: nil, ledger.ErrClosed
// after Close, or, while the disk is full, the error (wrapping
// ledger.ErrNoSpace) of the last commit, until a commit succeeds again.
func (s *Store) Writable() error {
	select {
	case <-s.quit:
		return ledger.ErrClosed
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noSpace
}

// spaceError translates a commit error caused by a full disk or quota
// (ENOSPC, EDQUOT, EFBIG) into one wrapping ledger.ErrNoSpace that names
// the file; other errors are returned as they are.
func (s *Store) spaceError(err error) error {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG} {
		if errors.Is(err, errno) {
			return fmt.Errorf("%w: writing %s: %s", ledger.ErrNoSpace, s.db.Path(), errno.Error())
		}
	}
	return err
}

func (s *Store) setNoSpace(err error) {
	s.mu.Lock()
	s.noSpace = err
	s.mu.Unlock()
}

// View implements ledger.Store.
func (s *Store) View(_ context.Context, fn func(ledger.Tx) error) error {
	// The pending keys are taken before the transaction begins: those of
	// a generation dropped after it began are in its snapshot's buckets.
	ids := snapshotIDs(s.pending)
	return s.db.View(func(btx *bolt.Tx) error {
		return fn(&tx{tx: btx, c: s.codec.Load(), kf: s.filters.active.Load(), ids: ids.snapshot(btx)})
	})
}

var errBatchFailed = errors.New("batch member failed")

// commitLoop commits the waiting Update calls in batches until Close;
// then it commits what is still queued.
func (s *Store) commitLoop() {
	defer close(s.done)
	batch.Loop(s.reqs, s.quit, s.cfg.MaxBatch, s.cfg.CommitDelay, s.commitWithMerge)
}

// run commits batch in one transaction; when a member fails, each member is
// retried in a transaction of its own so one bad write cannot sink others.
// A commit that fails for lack of space fails every member at once with an
// error wrapping ledger.ErrNoSpace: alone, each would fail the same way.
func (s *Store) run(batch []*request) {
	errs := make([]error, len(batch))
	start := time.Now()
	err := s.commit(batch, errs)
	if err == nil {
		s.setNoSpace(nil)
		if n := writes(batch); s.cfg.OnCommit != nil && n > 0 {
			s.cfg.OnCommit(n, time.Since(start))
		}
		if a := s.filters.active.Load(); a == nil || a.added.Load() > a.capacity {
			s.maybeBuildFilter(s.openRows)
		}
		for _, r := range batch {
			r.err <- nil
		}
		s.maybeTrain()
		return
	}
	if !errors.Is(err, errBatchFailed) {
		if serr := s.spaceError(err); errors.Is(serr, ledger.ErrNoSpace) {
			s.setNoSpace(serr)
			for _, r := range batch {
				r.err <- serr
			}
			return
		}
	}
	if len(batch) == 1 {
		if errors.Is(err, errBatchFailed) {
			err = errs[0]
		}
		batch[0].err <- err
		return
	}
	for _, r := range batch {
		s.run([]*request{r})
	}
}

// writes counts the members of batch that are writes, not the store's own
// steps.
func writes(batch []*request) int {
	n := 0
	for _, r := range batch {
		if !r.own {
			n++
		}
	}
	return n
}

// maybeTrain gives the file its own dictionary once it holds trainAfter
// rows and the record of a row's evidence object, or trainAlone rows:
// made from its values and stored in one transaction, then
// used for every value written after it. Values written before keep the
// dictionary they name. A failed attempt is tried again trainAfter rows
// later.
func (s *Store) maybeTrain() {
	if s.trained {
		return
	}
	var rows uint64
	evidence := false
	_ = s.db.View(func(btx *bolt.Tx) error {
		rows = metaUint(btx.Bucket(bMeta), kRowSeqN)
		evidence = firstEvidenceRecord(btx.Bucket(bObjects)) != nil
		return nil
	})
	if rows < max(trainAfter, s.trainRetry) || (!evidence && rows < trainAlone) {
		return
	}
	var dicts map[uint32][]byte
	err := s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{tx: btx, c: s.codec.Load()}
		content, err := t.sampleDictionary()
		if err != nil {
			return err
		}
		if err := btx.Bucket(bMeta).Put(dictKey(fileDictID), content); err != nil {
			return err
		}
		dicts = fileDicts(btx)
		return nil
	})
	var c *Codec
	if err == nil {
		c, err = newCodec(dicts)
	}
	if err != nil {
		// The dictionary may be stored and unused: values keep naming
		// the one they were written with, so that is harmless.
		slog.Default().Warn("row store (bbolt): making the file's own compression dictionary failed; trying again later",
			slog.String("path", s.db.Path()), slog.Any("error", err))
		s.trainRetry = rows + trainAfter
		return
	}
	s.codec.Store(c)
	s.trained = true
}

// commit runs batch in one transaction and records each member's error in
// errs. While a member is fenced, the lease table stays locked for reading
// until the commit ends, so no takeover slips between check and commit.
func (s *Store) commit(batch []*request, errs []error) error {
	fenced := false
	for _, r := range batch {
		fenced = fenced || r.fence != nil
	}
	if fenced {
		s.leases.mu.RLock()
		defer s.leases.mu.RUnlock()
	}
	m := newMemo(s.recent)
	err := s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{tx: btx, c: s.codec.Load(), m: m, fs: &s.filters, ids: allIDs(s.pending)}
		for i, r := range batch {
			if r.fence != nil {
				if errs[i] = s.leases.checkLocked(*r.fence); errs[i] != nil {
					return errBatchFailed
				}
			}
			if errs[i] = r.fn(t); errs[i] != nil {
				return errBatchFailed
			}
		}
		return nil
	})
	if err == nil {
		m.committed(s.pending)
	}
	return err
}

// tx implements ledger.Tx.
type tx struct {
	tx *bolt.Tx
	c  *Codec // the file's values
	m  *memo  // the commit loop's row numbers (numbers.go); nil in other transactions
	// kf is the key filter in use when a read transaction began (nil:
	// none yet); fs, in a commit-loop transaction, gets the keys a write
	// adds and gives the filter in use (filter.go). Both nil in other
	// transactions.
	kf *keyFilter
	fs *keyFilters
	// ids: the keys of bRowSeq and bReqJWT not yet written there, as the
	// transaction sees them (pending.go); nil where there are none to
	// read (a file's conversion).
	ids *idsView
	// scratch is encodeRow's buffer for a row's JSON.
	scratch []byte
	// buckets and cursors are the transaction's buckets and cursors by
	// name (b, cursor).
	buckets map[string]*bolt.Bucket
	cursors map[string]*bolt.Cursor
}

// cursor returns the transaction's cursor on bucket name, made on first
// use. A cursor keeps the stack of pages it descends through from one
// seek to the next, where bbolt's Get, and every new cursor, grows a new
// one: a commit looks up and inserts into the same few buckets for each
// of its rows. Whoever takes it positions it afresh (Seek, First, Last)
// and holds no position across a call that may take it too.
func (t *tx) cursor(name []byte) *bolt.Cursor {
	if c, ok := t.cursors[string(name)]; ok {
		return c
	}
	c := t.b(name).Cursor()
	if t.cursors == nil {
		t.cursors = make(map[string]*bolt.Cursor)
	}
	t.cursors[string(name)] = c
	return c
}

// get is bucket name's Get(k) through the transaction's cursor on it.
func (t *tx) get(name, k []byte) []byte { return seekExact(t.cursor(name), k) }

// seekExact is what Get(k) of c's bucket returns: k's value, nil when k
// is not there or names a nested bucket.
func seekExact(c *bolt.Cursor, k []byte) []byte {
	sk, v := c.Seek(k)
	if !bytes.Equal(sk, k) {
		return nil
	}
	return v
}

// b returns bucket name of the transaction, with its split set for how
// its keys arrive (fillPercent).
//
// A transaction keeps the buckets it opened: bbolt keeps them in a write
// transaction but opens a bucket afresh, with a cursor, on every call in
// a read one.
func (t *tx) b(name []byte) *bolt.Bucket {
	if b, ok := t.buckets[string(name)]; ok {
		return b
	}
	b := t.tx.Bucket(name)
	if f, ok := fillPercent[string(name)]; ok {
		b.FillPercent = f
	}
	if t.buckets == nil {
		t.buckets = make(map[string]*bolt.Bucket)
	}
	t.buckets[string(name)] = b
	return b
}

// fillPercent is where bbolt splits a full page of a bucket whose keys
// arrive in order; buckets keyed at random keep bbolt's default half.
//
//   - 1.0 for keys that only grow (row numbers, among them the pending
//     keys' records, outbox and pending-leaf sequence numbers, incident
//     numbers, access records, leaf and stored-hash indexes, checkpoint
//     sizes, row numbers within a snapshot's links): the page they are
//     appended to is filled, and the page split off holds only the new
//     key.
//   - 0.9 for keys by a time that mostly grows within a few runs: the
//     receipt's time within a status, a class, an agent platform (a
//     deployment serves a handful) or the time index's one run, and
//     retain-until within a retention class. A receipt posted late (a
//     Provider's outbox draining after an outage) lands in a full page;
//     at 1.0 each such key would split off a page of its own, at 0.9 the
//     tenth left free takes it. Measured with 50 keys a transaction: in
//     order 0.9 takes 39 bytes a key against 35 at 1.0 and 71 at bbolt's
//     default; with one key in five up to an hour late, 51 against 107
//     and 67.
//   - 0.9 for the object records too: the records of stored rows'
//     evidence, most of the bucket, are appended by row number (layout
//     4); a swept row's record, a snapshot's or a segment's lands at a
//     random key in the tenth left free.
var fillPercent = map[string]float64{}

func init() {
	for _, b := range [][]byte{bRowData, bRowLeaves, bEvidence, bDrillPool, bOutbox, bIncident, bAccess, bLogPending, bLogHashes, bLogLeaves, bLogCPs, bPending} {
		fillPercent[string(b)] = 1.0
	}
	for _, b := range [][]byte{ixTime, ixStatus, ixClass, ixAgent, bExpiry, bObjects} {
		fillPercent[string(b)] = 0.9
	}
}

func (t *tx) Row(id string) (*ledger.Row, error) {
	r, seq, err := t.rowAndSeq(id)
	if err != nil {
		return nil, err
	}
	if err := t.checkListed(id, r, seq); err != nil {
		return nil, err
	}
	return r, nil
}

// rowAndSeq returns row id and its number's key.
func (t *tx) rowAndSeq(id string) (*ledger.Row, []byte, error) {
	seq := t.rowNumberOf(idKey(id))
	if seq == nil {
		return nil, nil, ledger.ErrNotFound
	}
	r, err := t.rowAt(seq)
	return r, seq, err
}

// rowNumber is the row number of a bRowSeq value (a copy).
func rowNumber(v []byte) []byte { return append([]byte(nil), v[:min(len(v), 8)]...) }

// seqOf returns the number of the stored row id, nil when there is none.
func (t *tx) seqOf(id string) []byte { return t.rowNumberOf(idKey(id)) }

// unlinkByNumber is RemoveRow's care of what row id's number keys (v is
// its bRowSeq value, seq the number): its leaf index moves to bLogIndex
// (the leaf stays in the log), the record of its evidence object to the
// key by id (the object stays until it is deleted), and its evidence
// bundle goes.
func (t *tx) unlinkByNumber(id string, v, seq []byte) error {
	if len(v) == 16 { // written before layout 4
		if err := t.b(bLogIndex).Put(idKey(id), append([]byte(nil), v[8:]...)); err != nil {
			return err
		}
	}
	v, err := takeRowLeaf(t.b(bRowLeaves), seq)
	if err != nil {
		return err
	}
	if v != nil {
		if err := t.b(bLogIndex).Put(idKey(id), v); err != nil {
			return err
		}
	}
	k := rowObjectKey(seq)
	if v := t.get(bObjects, k); v != nil {
		if err := t.b(bObjects).Put(objectKey(ledger.EvidenceKey(id)), append([]byte(nil), v...)); err != nil {
			return err
		}
		if err := t.b(bObjects).Delete(k); err != nil {
			return err
		}
	}
	if err := t.b(bEvidence).Delete(seq); err != nil {
		return err
	}
	return t.b(bEvidence).Delete([]byte(id))
}

// rowAt returns the row numbered seq.
func (t *tx) rowAt(seq []byte) (*ledger.Row, error) {
	v := t.get(bRowData, seq)
	if v == nil {
		return nil, fmt.Errorf("row %x: indexed but not stored (an entry a removal left behind: ledgerd compact, with ledgerd stopped, removes such entries)", seq)
	}
	return decodeRow(t.c, seq, v)
}

// checkIndexed returns an error wrapping ledger.ErrStoreEdited when row
// r, read at number seq through an index entry, is not the record its id
// leads to: a copy an operator wrote under another number and gave index
// entries is not served as the row, whichever of the two was edited.
// It costs a lookup of the row's id, which a read transaction pays for
// each row it serves; a write transaction reads rows to count or rewrite
// them, serves none, and skips it.
func (t *tx) checkIndexed(r *ledger.Row, seq uint64) error {
	if t.tx.Writable() {
		return nil
	}
	if n := t.seqOf(r.ID); n != nil && binary.BigEndian.Uint64(n) == seq {
		return nil
	}
	return fmt.Errorf("the row store's index entry for row %s points at another record than its id (%w; run ledgerctl fsck)", r.ID, ledger.ErrStoreEdited)
}

// checkListed returns an error wrapping ledger.ErrStoreEdited when row r,
// read at number seq through id, is another row's record or is listed by
// no entry of the time index, which lists every row the ledger wrote: a
// record an operator wrote under an id with no index entries, which no
// listing and no audit of the listings would ever show, is not served.
// The entry's key is the row's issue time and number, so it costs one
// seek of the index in a read transaction; a write transaction serves no
// row and skips it.
func (t *tx) checkListed(id string, r *ledger.Row, seq []byte) error {
	if t.tx.Writable() {
		return nil
	}
	if r.ID != id {
		return fmt.Errorf("the row store's index of ids leads row %s to a record of row %s (%w; run ledgerctl fsck)", id, r.ID, ledger.ErrStoreEdited)
	}
	if !nanosDefined(r.IssuedAt) {
		// Versions before times were held to an int64 of nanoseconds
		// (unixNanos) keyed such a row by UnixNano's undefined answer:
		// its entry is not where this version would put it. fsck's pass
		// over the index (CheckIndexes) still finds a record it lacks.
		return nil
	}
	ok, err := hasEntry(t.b(ixTime).Cursor(), indexPrefix(""), indexPosting(r.IssuedAt, seq))
	switch {
	case err != nil:
		return fmt.Errorf("row %s: %w", r.ID, err)
	case !ok:
		return fmt.Errorf("the row store's record of row %s is listed by no entry of its time index (%w; run ledgerctl fsck)", r.ID, ledger.ErrStoreEdited)
	}
	return nil
}

func decodeRow(c *Codec, seq, v []byte) (*ledger.Row, error) {
	raw, err := c.Decode(v)
	if err != nil {
		return nil, fmt.Errorf("decode row %x: %w", seq, err)
	}
	var r ledger.Row
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decode row %x: %w", seq, err)
	}
	return &r, nil
}

// encodeRow returns r as stored: its JSON, compressed. The JSON is
// written into the transaction's scratch buffer, which the compressed
// value does not share, so a batch's rows reuse one buffer.
func (t *tx) encodeRow(r *ledger.Row) ([]byte, error) {
	v, err := r.AppendJSON(t.scratch[:0])
	if err != nil {
		return nil, fmt.Errorf("encode row %s: %w", r.ID, err)
	}
	t.scratch = v
	return t.c.Encode(v), nil
}

// timeKey is an index key's time: nanoseconds since the epoch (none
// before it). Keys run oldest first within a value; List walks them
// newest first.
func timeKey(t time.Time) uint64 { return unixNanos(t) }

// unixNanos is t in nanoseconds since the epoch, held to what an int64
// of them holds: 0 before the epoch, and the last of them (April 2262)
// for every time after, where UnixNano's answer is undefined. The
// ledger takes times to the year 9000 (verifier.MaxTime); such a time
// sorts after every earlier one and with the others past 2262.
func unixNanos(t time.Time) uint64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

// nanosDefined reports whether t's UnixNano is defined: t within an
// int64 of nanoseconds of the epoch (1678 to 2262).
func nanosDefined(t time.Time) bool {
	return !t.Before(time.Unix(0, math.MinInt64)) && !t.After(time.Unix(0, math.MaxInt64))
}

// indexPrefix is the prefix of every key of value's entries in an index.
func indexPrefix(value string) []byte {
	return append([]byte(value), 0)
}

// indexPosting is the entry of row number seq, at time t, in an index.
func indexPosting(t time.Time, seq []byte) posting {
	return posting{timeKey(t), binary.BigEndian.Uint64(seq)}
}

type indexEntry struct {
	bucket []byte
	value  string
}

func indexEntries(r *ledger.Row) []indexEntry {
	var out []indexEntry
	add := func(b []byte, v string) {
		if v != "" {
			out = append(out, indexEntry{b, v})
		}
	}
	add(ixPrincipal, r.Principal)
	add(ixGrant, r.GrantID)
	if r.ReceiptVerified() {
		add(ixSigned, r.GrantID)
	}
	add(ixAgent, r.Agent.Platform)
	add(ixStatus, strconv.Itoa(int(r.Status)))
	add(ixClass, strconv.Itoa(int(r.Class)))
	out = append(out, indexEntry{ixTime, ""})
	for _, target := range r.Targets() {
		add(ixTarget, target)
	}
	return out
}

func (t *tx) CreateRow(r *ledger.Row) error {
	id := idKey(r.ID)
	if t.rowNumberOf(id) != nil {
		return fmt.Errorf("create row %s: already exists", r.ID)
	}
	n, err := t.counter(kRowSeqN, 1)
	if err != nil {
		return err
	}
	seq := seqKey(n)
	if err := t.putRowNumber(id, seq); err != nil {
		return err
	}
	if err := t.insertRow(r, seq); err != nil {
		return err
	}
	var jwtKey []byte
	if ledger.IndexesRequestJWT(r) {
		if err := t.takeRequestJWTs(r.RequestJWTTakenFrom); err != nil {
			return err
		}
		first, err := t.requestJWTRow(r.RequestJWTSHA256)
		if err != nil {
			return err
		}
		if first == nil {
			if jwtKey, err = t.putRequestJWT(r.RequestJWTSHA256, seq); err != nil {
				return err
			}
		}
	}
	if t.deferIDs() {
		if err := t.b(bPending).Put(seq, pendingRecord(id, jwtKey)); err != nil {
			return err
		}
	}
	if t.m != nil {
		t.m.created = append(t.m.created, createdRow{string(id), n, jwtKey})
	}
	return t.linkSnapshots(r)
}

// insertRow stores r as row number seq with its index and expiry
// entries.
func (t *tx) insertRow(r *ledger.Row, seq []byte) error {
	v, err := t.encodeRow(r)
	if err != nil {
		return err
	}
	if err := t.b(bRowData).Put(seq, v); err != nil {
		return err
	}
	if ledger.Drillable(r) {
		if err := setPoolBit(t.b(bDrillPool), binary.BigEndian.Uint64(seq), true); err != nil {
			return err
		}
	}
	for _, e := range indexEntries(r) {
		if err := insertAt(t.cursor(e.bucket), indexPrefix(e.value), indexPosting(r.IssuedAt, seq)); err != nil {
			return err
		}
	}
	if !r.RetainUntil.IsZero() {
		if err := insertAt(t.cursor(bExpiry), nil, indexPosting(r.RetainUntil, seq)); err != nil {
			return err
		}
	}
	return nil
}

// count adds delta to a counter keyed by key in bucket and returns it; a
// counter at zero is removed.
func (t *tx) count(bucket []byte, key string, delta int) (int, error) {
	n := 0
	if v := t.get(bucket, []byte(key)); len(v) == 8 {
		n = int(binary.BigEndian.Uint64(v))
	}
	if delta == 0 {
		return n, nil
	}
	n = max(n+delta, 0)
	if n == 0 {
		return 0, t.b(bucket).Delete([]byte(key))
	}
	return n, t.b(bucket).Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// putRow rewrites row number seq, whose indexed fields did not change.
func (t *tx) putRow(r *ledger.Row, seq []byte) error {
	v, err := t.encodeRow(r)
	if err != nil {
		return err
	}
	return t.b(bRowData).Put(seq, v)
}

func (t *tx) UpdateDispute(id string, status ledger.DisputeStatus, events []ledger.DisputeEvent) error {
	r, seq, err := t.rowAndSeq(id)
	if err != nil {
		return err
	}
	r.Dispute, r.DisputeEvents = status, events
	return t.putRow(r, seq)
}

func (t *tx) RowByRequestJWT(sha string) (string, error) {
	seq, err := t.requestJWTRow(sha)
	if seq == nil || err != nil {
		return "", err
	}
	r, err := t.rowAt(seq)
	if err != nil {
		return "", fmt.Errorf("request JWT %s: %w", sha, err)
	}
	return r.ID, nil
}

func (t *tx) counter(k []byte, delta int64) (uint64, error) {
	n := int64(0)
	if v := t.get(bMeta, k); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	n += delta
	if n < 0 {
		n = 0
	}
	return uint64(n), t.b(bMeta).Put(k, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

func (t *tx) NextIncidentSeq() (uint64, error) {
	return t.counter(kIncidentSeq, 1)
}

func (t *tx) PutSnapshot(s verifier.Snapshot) (bool, error) {
	if t.get(bJWKS, []byte(s.ID)) != nil {
		return false, nil
	}
	v, err := json.Marshal(s)
	if err != nil {
		return false, err
	}
	return true, t.b(bJWKS).Put([]byte(s.ID), v)
}

func (t *tx) Snapshot(id string) (verifier.Snapshot, error) {
	var s verifier.Snapshot
	v := t.get(bJWKS, []byte(id))
	if v == nil {
		return s, ledger.ErrNotFound
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return s, fmt.Errorf("decode snapshot %s: %w", id, err)
	}
	return s, nil
}

// List answers q from one index: the most selective filter given (the
// grant's signed rows, target, grant, principal, agent, status, class,
// else time), with since/until as a
// key range; the other filters are checked on the rows it yields. It reads
// at most q.ReadBound() entries: a page that reaches the bound before it
// is full ends there, with a token after the last entry read; one that
// ends before a row past q.Budget ends at its last row.
func (t *tx) List(q ledger.Query) ([]*ledger.Row, string, error) {
	if err := q.CheckSigned(); err != nil {
		return nil, "", err
	}
	bucket, value := ixTime, ""
	switch {
	case q.Signed:
		bucket, value = ixSigned, q.GrantID
	case q.Target != "":
		bucket, value = ixTarget, q.Target
	case q.GrantID != "":
		bucket, value = ixGrant, q.GrantID
	case q.Principal != "":
		bucket, value = ixPrincipal, q.Principal
	case q.Agent != "":
		bucket, value = ixAgent, q.Agent
	case q.Status != 0:
		bucket, value = ixStatus, strconv.Itoa(int(q.Status))
	case q.Class != 0:
		bucket, value = ixClass, strconv.Itoa(int(q.Class))
	}
	// Entries run oldest first; the listing walks them backwards from the
	// end of the value's entries, or from just before until.
	prefix := indexPrefix(value)
	bound := append([]byte(value), 1) // past the value's entries
	if !q.Until.IsZero() {
		bound = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), timeKey(q.Until))
	}
	if q.PageToken != "" {
		tok, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(tok) < 1+len(prefix)+8 || tok[0] != pageTokenVersion || string(tok[1:1+len(prefix)]) != string(prefix) {
			return nil, "", fmt.Errorf("%w: pageToken does not belong to this query", ledger.ErrInvalid)
		}
		// Just before the last entry returned.
		bound = tok[1:]
	}
	var since uint64
	if !q.Since.IsZero() {
		since = timeKey(q.Since)
	}
	rc := &runCursor{c: t.b(bucket).Cursor(), prefix: prefix}
	var rows []*ledger.Row
	last := []byte{pageTokenVersion}
	read, limit, used := 0, q.ReadBound(), 0
	// kept is the token after the last row kept, keptRead the entries
	// read up to it.
	var kept []byte
	keptRead := 0
	defer func() { q.CountRead(read) }()
	p, ok, err := rc.below(bound)
	for ; ok && err == nil; p, ok, err = rc.prev() {
		if p.time < since {
			break
		}
		// An entry follows: the page ends here when it is full or has
		// read its bound, and the token continues from the last read.
		if len(rows) == q.PageSize || read == limit {
			return rows, base64.RawURLEncoding.EncodeToString(last), nil
		}
		r, err := t.rowAt(seqKey(p.seq))
		if err != nil {
			return nil, "", err
		}
		if !matches(r, q) {
			read++
			last = append(last[:1], p.key(prefix)...)
			continue
		}
		if err := t.checkIndexed(r, p.seq); err != nil {
			return nil, "", err
		}
		if !q.Fits(&used, len(rows), r) {
			// Past the budget: the page ends at its last row, the
			// entries since counted by the next page.
			read = keptRead
			return rows, base64.RawURLEncoding.EncodeToString(kept), nil
		}
		read++
		last = append(last[:1], p.key(prefix)...)
		kept, keptRead = append(kept[:0], last...), read
		rows = append(rows, r)
	}
	if err != nil {
		return nil, "", fmt.Errorf("list: %w", err)
	}
	return rows, "", nil
}

// pageTokenVersion starts every page token of List: tokens of the
// layout-1 indexes (newest-first keys) are refused, not misread.
const pageTokenVersion = 2

func matches(r *ledger.Row, q ledger.Query) bool {
	switch {
	case q.Signed && !r.ReceiptVerified(),
		q.Principal != "" && r.Principal != q.Principal,
		q.GrantID != "" && r.GrantID != q.GrantID,
		q.Agent != "" && r.Agent.Platform != q.Agent,
		q.Status != 0 && r.Status != q.Status,
		q.Class != 0 && r.Class != retention.Class(q.Class):
		return false
	}
	if q.Target != "" {
		for _, t := range r.Targets() {
			if t == q.Target {
				return true
			}
		}
		return false
	}
	return true
}

func (t *tx) RowAfter(key string) (*ledger.Row, error) {
	for _, from := range [][]byte{seekKey(key), nil} {
		for _, v := range t.idEntries(bRowSeq, from) {
			return t.rowAt(rowNumber(v))
		}
	}
	return nil, nil
}

func (t *tx) PutDrill(id string, body []byte) error {
	return t.b(bDrills).Put([]byte(id), body)
}

func (t *tx) Drill(id string) ([]byte, error) {
	v := t.get(bDrills, []byte(id))
	if v == nil {
		return nil, ledger.ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

func (t *tx) Drills(n int, pageToken string) ([][]byte, string, error) {
	c := t.b(bDrills).Cursor()
	var k, v []byte
	if pageToken == "" {
		k, v = last(c)
	} else {
		tok, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err != nil || len(tok) == 0 {
			return nil, "", fmt.Errorf("%w: bad pageToken", ledger.ErrInvalid)
		}
		// Position on the newest key before the last one returned.
		if sk, _ := c.Seek(tok); sk == nil {
			k, v = last(c)
		} else {
			k, v = prev(c, sk)
		}
		for k != nil && string(k) >= string(tok) {
			k, v = prev(c, k)
		}
	}
	var out [][]byte
	var last []byte
	for ; k != nil; k, v = prev(c, k) {
		if len(out) == n {
			return out, base64.RawURLEncoding.EncodeToString(last), nil
		}
		out = append(out, append([]byte(nil), v...))
		last = append(last[:0], k...)
	}
	return out, "", nil
}

func (t *tx) Revocation(grant string) (*ledger.Revocation, error) {
	v := t.get(bGrants, []byte(grant))
	if v == nil {
		return nil, nil
	}
	var r ledger.Revocation
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("decode revocation of %s: %w", grant, err)
	}
	return &r, nil
}

func (t *tx) PutRevocation(grant string, r ledger.Revocation) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.b(bGrants).Put([]byte(grant), v)
}

// Revocations implements ledger.RevocationLister, in grant id order.
func (t *tx) Revocations(fn func(grant string, r *ledger.Revocation) error) error {
	return t.RevocationsAfter("", math.MaxInt, fn)
}

// RevocationsAfter implements ledger.RevocationLister.
func (t *tx) RevocationsAfter(after string, limit int, fn func(grant string, r *ledger.Revocation) error) error {
	c := t.cursor(bGrants)
	k, v := c.Seek([]byte(after))
	if k != nil && string(k) == after {
		k, v = c.Next()
	}
	for n := 0; k != nil && n < limit; k, v = c.Next() {
		n++
		var r ledger.Revocation
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode revocation of %s: %w", k, err)
		}
		if err := fn(string(k), &r); err != nil {
			return err
		}
	}
	return nil
}

// HoldGrants implements ledger.Rows: one write transaction runs at a
// time, so it holds every grant already.
func (t *tx) HoldGrants(...string) error {
	if !t.tx.Writable() {
		return bolterrors.ErrTxNotWritable
	}
	return nil
}

func (t *tx) RowsByID(after string, n int) ([]*ledger.Row, string, error) {
	if n <= 0 {
		return nil, "", nil
	}
	var start []byte
	if after != "" {
		start = idKey(after)
	}
	var out []*ledger.Row
	for _, v := range t.entriesAfter(bRowSeq, start) {
		if len(out) == n {
			return out, out[len(out)-1].ID, nil
		}
		r, err := t.rowAt(rowNumber(v))
		if err != nil {
			return nil, "", err
		}
		out = append(out, r)
	}
	return out, "", nil
}

func (t *tx) PutIncident(seq uint64, inc ledger.IncidentRecord) error {
	v, err := json.Marshal(inc)
	if err != nil {
		return err
	}
	return t.b(bIncident).Put(seqKey(seq), v)
}

func (t *tx) Incident(seq uint64) (*ledger.IncidentRecord, error) {
	v := t.get(bIncident, seqKey(seq))
	if v == nil {
		return nil, ledger.ErrNotFound
	}
	var inc ledger.IncidentRecord
	if err := json.Unmarshal(v, &inc); err != nil {
		return nil, fmt.Errorf("decode incident %d: %w", seq, err)
	}
	return &inc, nil
}

func (t *tx) Incidents(n int, before uint64) ([]*ledger.IncidentRecord, error) {
	c := t.b(bIncident).Cursor()
	var k, v []byte
	if before == 0 {
		k, v = last(c)
	} else if k, _ = c.Seek(seqKey(before)); k == nil {
		k, v = last(c)
	} else {
		k, v = prev(c, k)
	}
	var out []*ledger.IncidentRecord
	for ; k != nil && len(out) < n; k, v = prev(c, k) {
		var inc ledger.IncidentRecord
		if err := json.Unmarshal(v, &inc); err != nil {
			return nil, fmt.Errorf("decode incident %x: %w", k, err)
		}
		out = append(out, &inc)
	}
	return out, nil
}

// countBuckets keeps each kind of reference counter.
var countBuckets = map[ledger.RefKind][]byte{
	ledger.RefHold:           bHolds,
	ledger.RefSegment:        bSegments,
	ledger.RefRepeatIncident: bRepeats,
}

func (t *tx) Count(kind ledger.RefKind, key string, delta int) (int, error) {
	b, ok := countBuckets[kind]
	if !ok {
		return 0, fmt.Errorf("%w: unknown reference kind %q", ledger.ErrInvalid, kind)
	}
	return t.count(b, key, delta)
}

func (t *tx) UpdateRetention(id string, until time.Time) error {
	r, seq, err := t.rowAndSeq(id)
	if err != nil {
		return err
	}
	if !r.RetainUntil.IsZero() {
		if err := deleteEntry(t.b(bExpiry), nil, indexPosting(r.RetainUntil, seq)); err != nil {
			return err
		}
	}
	if !until.IsZero() {
		if err := insertEntry(t.b(bExpiry), nil, indexPosting(until, seq)); err != nil {
			return err
		}
	}
	r.RetainUntil = until
	return t.putRow(r, seq)
}

func (t *tx) Expired(now time.Time, after string, n int) ([]*ledger.Row, string, error) {
	var out []*ledger.Row
	limit := unixNanos(now)
	var bound []byte
	if after != "" {
		pos, err := hex.DecodeString(after)
		if err != nil || len(pos) != entryKeyLen {
			return nil, "", fmt.Errorf("%w: bad sweep position", ledger.ErrInvalid)
		}
		bound = pos
	}
	rc := &runCursor{c: t.b(bExpiry).Cursor()}
	var last []byte
	p, ok, err := rc.above(bound)
	for ; ok && err == nil; p, ok, err = rc.next() {
		if p.time > limit {
			return out, "", nil
		}
		if len(out) == n {
			return out, hex.EncodeToString(last), nil
		}
		r, err := t.rowAt(seqKey(p.seq))
		if err != nil {
			return nil, "", err
		}
		if err := t.checkIndexed(r, p.seq); err != nil {
			return nil, "", err
		}
		out = append(out, r)
		last = p.key(nil)
	}
	if err != nil {
		return nil, "", fmt.Errorf("expired rows: %w", err)
	}
	return out, "", nil
}

func (t *tx) RemoveRow(r *ledger.Row, tomb ledger.Tombstone) error {
	id := idKey(r.ID)
	v := t.rowSeqValue(id)
	if v == nil {
		return fmt.Errorf("remove row %s: %w", r.ID, ledger.ErrNotFound)
	}
	seq := rowNumber(v)
	// What the row's number keys moves to keys by its id: the leaf stays
	// in the log (its index moves to bLogIndex), and the record of its
	// evidence object stays until the object is deleted.
	if err := t.unlinkByNumber(r.ID, v, seq); err != nil {
		return err
	}
	if err := t.deleteRowNumber(id, seq); err != nil {
		return err
	}
	if err := t.b(bRowData).Delete(seq); err != nil {
		return err
	}
	if err := setPoolBit(t.b(bDrillPool), binary.BigEndian.Uint64(seq), false); err != nil {
		return err
	}
	for _, e := range indexEntries(r) {
		if err := deleteEntry(t.b(e.bucket), indexPrefix(e.value), indexPosting(r.IssuedAt, seq)); err != nil {
			return err
		}
	}
	if !r.RetainUntil.IsZero() {
		if err := deleteEntry(t.b(bExpiry), nil, indexPosting(r.RetainUntil, seq)); err != nil {
			return err
		}
	}
	if r.RequestJWTSHA256 != "" {
		if err := t.deleteRequestJWT(r.RequestJWTSHA256, seq); err != nil {
			return err
		}
	}
	if err := t.unlinkSnapshots(r); err != nil {
		return err
	}
	v, err := json.Marshal(tomb)
	if err != nil {
		return err
	}
	return t.b(bTombs).Put([]byte(r.ID), v)
}

func (t *tx) DeleteSnapshot(id string) error {
	if err := t.b(bJWKS).Delete([]byte(id)); err != nil {
		return err
	}
	return t.b(bSnapKeep).Delete([]byte(id))
}

func (t *tx) QueueDeletion(loc ledger.Location) error {
	v, err := json.Marshal(loc)
	if err != nil {
		return err
	}
	return t.b(bDeletes).Put([]byte(loc.Key), v)
}

func (t *tx) Tombstone(id string) (*ledger.Tombstone, error) {
	v := t.get(bTombs, []byte(id))
	if v == nil {
		return nil, ledger.ErrNotFound
	}
	var tomb ledger.Tombstone
	if err := json.Unmarshal(v, &tomb); err != nil {
		return nil, err
	}
	return &tomb, nil
}

func (t *tx) Deletions(n int) ([]ledger.Location, error) {
	var out []ledger.Location
	c := t.b(bDeletes).Cursor()
	for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
		var loc ledger.Location
		if err := json.Unmarshal(v, &loc); err != nil {
			return nil, err
		}
		out = append(out, loc)
	}
	return out, nil
}

func (t *tx) Deleted(key string) error { return t.b(bDeletes).Delete([]byte(key)) }

func (t *tx) SnapshotRetain(id string) (time.Time, error) {
	v := t.get(bSnapKeep, []byte(id))
	if len(v) != 8 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(), nil
}

func (t *tx) SetSnapshotRetain(id string, at time.Time) error {
	return t.b(bSnapKeep).Put([]byte(id), binary.BigEndian.AppendUint64(nil, unixNanos(at)))
}
