// Package bolt is the embedded row store: rows, their secondary indexes,
// evidence bundles, JWKS snapshots and the evidence outbox in one bbolt
// file, written with group commit (many rows per transaction and fsync).
package bolt

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
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
	bRows     = []byte("rows")
	bEvidence = []byte("evidence")
	bJWKS     = []byte("jwks")
	bObjects  = []byte("objects")
	bOutbox   = []byte("outbox")
	bReqJWT   = []byte("request_jwt")
	bMeta     = []byte("meta")
	bDrills   = []byte("drills")
	bGrants   = []byte("grants")
	bIncident = []byte("incidents")
	bHolds    = []byte("holds")
	bExpiry   = []byte("ix_expiry")
	bTombs    = []byte("tombstones")
	bSegments = []byte("segments")
	bSnapRefs = []byte("snapshot_refs")
	bDeletes  = []byte("deletions")
	bSnapKeep = []byte("snapshot_retain")

	ixPrincipal = []byte("ix_principal")
	ixGrant     = []byte("ix_grant")
	ixTarget    = []byte("ix_target")
	ixAgent     = []byte("ix_agent")
	ixStatus    = []byte("ix_status")
	ixClass     = []byte("ix_class")
	ixTime      = []byte("ix_time")

	allBuckets = [][]byte{bRows, bEvidence, bJWKS, bObjects, bOutbox, bReqJWT, bMeta, bDrills, bGrants, bIncident, bHolds, bExpiry, bTombs, bSegments, bSnapRefs, bDeletes, bSnapKeep,
		ixPrincipal, ixGrant, ixTarget, ixAgent, ixStatus, ixClass, ixTime, bPlans, bOutboxFail, bDead}

	kIncidentSeq = []byte("incident_seq")
	kOutboxN     = []byte("outbox_n")
)

// Config tunes the store. The zero value is the default.
type Config struct {
	// MaxBatch caps how many Update calls share one transaction; default 512.
	MaxBatch int
	// OpenTimeout bounds waiting for the file lock; default 5 s.
	OpenTimeout time.Duration
	// OnCommit, when set, is told the size of each committed batch.
	OnCommit func(batch int)
}

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
}

type request struct {
	fn    func(ledger.Tx) error
	fence *ledger.Fence // the lease the write is fenced by, if any
	err   chan error
}

// ErrLocked: another process holds the bbolt file.
var ErrLocked = errors.New("bbolt file is locked by another process")

// Open opens (creating if needed) the store at path.
func Open(path string, cfg Config) (*Store, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.OpenTimeout <= 0 {
		cfg.OpenTimeout = 5 * time.Second
	}
	// The free list is written with every commit (NoFreelistSync false):
	// opening then reads it from its page instead of walking every page of
	// the file, and a failed commit reloads it from there instead of walking
	// the file again (docs/design/010-faults-and-readiness.md).
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: cfg.OpenTimeout, FreelistType: bolt.FreelistMapType, NoFreelistSync: false, InitialMmapSize: 1 << 30})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = openSnapshotLinks(db)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init %s: %w", path, err)
	}
	s := &Store{db: db, cfg: cfg, reqs: make(chan *request, cfg.MaxBatch), quit: make(chan struct{}), done: make(chan struct{}), leases: newLeases()}
	go s.commitLoop()
	return s, nil
}

// Close waits for queued writes to commit, then closes the file. Update
// calls after Close fail with ledger.ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.quit)
		<-s.done
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Path returns the file path.
func (s *Store) Path() string { return s.db.Path() }

// Update implements ledger.Store with group commit. A write fenced by a
// lease (ledger.WithFence) is checked against the lease table in its
// transaction; the members of one batch are independent.
func (s *Store) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	r := &request{fn: fn, err: make(chan error, 1)}
	if f, ok := ledger.FenceFrom(ctx); ok {
		r.fence = &f
	}
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
	return s.db.View(func(btx *bolt.Tx) error { return fn(&tx{btx}) })
}

var errBatchFailed = errors.New("batch member failed")

// commitLoop commits the waiting Update calls in batches until Close;
// then it commits what is still queued.
func (s *Store) commitLoop() {
	defer close(s.done)
	batch.Loop(s.reqs, s.quit, s.cfg.MaxBatch, s.run)
}

// run commits batch in one transaction; when a member fails, each member is
// retried in a transaction of its own so one bad write cannot sink others.
// A commit that fails for lack of space fails every member at once with an
// error wrapping ledger.ErrNoSpace: alone, each would fail the same way.
func (s *Store) run(batch []*request) {
	errs := make([]error, len(batch))
	err := s.commit(batch, errs)
	if err == nil {
		s.setNoSpace(nil)
		if s.cfg.OnCommit != nil {
			s.cfg.OnCommit(len(batch))
		}
		for _, r := range batch {
			r.err <- nil
		}
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
	return s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{btx}
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
}

// tx implements ledger.Tx.
type tx struct{ tx *bolt.Tx }

// b returns bucket name of the transaction. Buckets whose keys only grow
// (sequence numbers and log indexes, appended at the end) fill their pages
// before splitting them; the others keep bbolt's default half.
func (t *tx) b(name []byte) *bolt.Bucket {
	b := t.tx.Bucket(name)
	if appendOrdered(name) {
		b.FillPercent = 1.0
	}
	return b
}

// appendOrderedBuckets are keyed by a number that only grows: outbox and
// pending-leaf sequence numbers, incident numbers, access records, leaf
// and stored-hash indexes, checkpoint sizes.
var appendOrderedBuckets = map[string]bool{}

func init() {
	for _, b := range [][]byte{bOutbox, bIncident, bAccess, bLogPending, bLogHashes, bLogLeaves, bLogCPs} {
		appendOrderedBuckets[string(b)] = true
	}
}

// appendOrdered reports whether new keys of bucket name sort after all
// its keys.
func appendOrdered(name []byte) bool { return appendOrderedBuckets[string(name)] }

func (t *tx) Row(id string) (*ledger.Row, error) {
	v := t.b(bRows).Get([]byte(id))
	if v == nil {
		return nil, ledger.ErrNotFound
	}
	var r ledger.Row
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("decode row %s: %w", id, err)
	}
	return &r, nil
}

// timeKey orders newest first: the inverted nanoseconds since the epoch.
func timeKey(t time.Time) uint64 {
	n := t.UnixNano()
	if n < 0 {
		n = 0
	}
	return math.MaxUint64 - uint64(n)
}

func indexKey(value string, t time.Time, id string) []byte {
	k := make([]byte, 0, len(value)+1+8+len(id))
	k = append(k, value...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, timeKey(t))
	return append(k, id...)
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
	if t.b(bRows).Get([]byte(r.ID)) != nil {
		return fmt.Errorf("create row %s: already exists", r.ID)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode row %s: %w", r.ID, err)
	}
	if err := t.b(bRows).Put([]byte(r.ID), v); err != nil {
		return err
	}
	for _, e := range indexEntries(r) {
		if err := t.b(e.bucket).Put(indexKey(e.value, r.IssuedAt, r.ID), nil); err != nil {
			return err
		}
	}
	if r.RequestJWTSHA256 != "" && t.b(bReqJWT).Get([]byte(r.RequestJWTSHA256)) == nil {
		if err := t.b(bReqJWT).Put([]byte(r.RequestJWTSHA256), []byte(r.ID)); err != nil {
			return err
		}
	}
	if !r.RetainUntil.IsZero() {
		if err := t.b(bExpiry).Put(expiryKey(r.RetainUntil, r.ID), nil); err != nil {
			return err
		}
	}
	return t.linkSnapshots(r)
}

func expiryKey(t time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64(nil, uint64(max(t.UnixNano(), 0)))
	return append(k, id...)
}

// count adds delta to a counter keyed by key in bucket and returns it; a
// counter at zero is removed.
func (t *tx) count(bucket []byte, key string, delta int) (int, error) {
	n := 0
	if v := t.b(bucket).Get([]byte(key)); len(v) == 8 {
		n = int(binary.BigEndian.Uint64(v))
	}
	n = max(n+delta, 0)
	if n == 0 {
		return 0, t.b(bucket).Delete([]byte(key))
	}
	return n, t.b(bucket).Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// putRow rewrites a stored row whose indexed fields did not change.
func (t *tx) putRow(r *ledger.Row) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode row %s: %w", r.ID, err)
	}
	return t.b(bRows).Put([]byte(r.ID), v)
}

func (t *tx) UpdateDispute(id string, status ledger.DisputeStatus, events []ledger.DisputeEvent) error {
	r, err := t.Row(id)
	if err != nil {
		return err
	}
	r.Dispute, r.DisputeEvents = status, events
	return t.putRow(r)
}

func (t *tx) RowByRequestJWT(sha string) (string, error) {
	return string(t.b(bReqJWT).Get([]byte(sha))), nil
}

func (t *tx) counter(k []byte, delta int64) (uint64, error) {
	n := int64(0)
	if v := t.b(bMeta).Get(k); len(v) == 8 {
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
	if t.b(bJWKS).Get([]byte(s.ID)) != nil {
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
	v := t.b(bJWKS).Get([]byte(id))
	if v == nil {
		return s, ledger.ErrNotFound
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return s, fmt.Errorf("decode snapshot %s: %w", id, err)
	}
	return s, nil
}

// List answers q from one index: the most selective filter given (target,
// grant, principal, agent, status, class, else time), with since/until as a
// key range; the other filters are checked on the rows it yields.
func (t *tx) List(q ledger.Query) ([]*ledger.Row, string, error) {
	bucket, value := ixTime, ""
	switch {
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
	prefix := append([]byte(value), 0)
	start := prefix
	if !q.Until.IsZero() {
		start = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), timeKey(q.Until)+1)
	}
	if q.PageToken != "" {
		tok, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(tok) < len(prefix)+8 || string(tok[:len(prefix)]) != string(prefix) {
			return nil, "", fmt.Errorf("%w: pageToken does not belong to this query", ledger.ErrInvalid)
		}
		start = append(tok, 0) // just after the last key returned
	}
	var stop uint64 = math.MaxUint64
	if !q.Since.IsZero() {
		stop = timeKey(q.Since)
	}
	var rows []*ledger.Row
	c := t.b(bucket).Cursor()
	var last []byte
	for k, _ := c.Seek(start); k != nil; k, _ = c.Next() {
		if len(k) < len(prefix)+8 || string(k[:len(prefix)]) != string(prefix) {
			break
		}
		if binary.BigEndian.Uint64(k[len(prefix):]) > stop {
			break
		}
		if len(rows) == q.PageSize {
			return rows, base64.RawURLEncoding.EncodeToString(last), nil
		}
		id := string(k[len(prefix)+8:])
		r, err := t.Row(id)
		if err != nil {
			return nil, "", err
		}
		last = append(last[:0], k...)
		if !matches(r, q) {
			continue
		}
		rows = append(rows, r)
	}
	return rows, "", nil
}

func matches(r *ledger.Row, q ledger.Query) bool {
	switch {
	case q.Principal != "" && r.Principal != q.Principal,
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
	c := t.b(bRows).Cursor()
	k, _ := c.Seek([]byte(key))
	if k == nil {
		if k, _ = c.First(); k == nil {
			return nil, nil
		}
	}
	return t.Row(string(k))
}

func (t *tx) PutDrill(id string, body []byte) error {
	return t.b(bDrills).Put([]byte(id), body)
}

func (t *tx) Drill(id string) ([]byte, error) {
	v := t.b(bDrills).Get([]byte(id))
	if v == nil {
		return nil, ledger.ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

func (t *tx) Drills(n int, pageToken string) ([][]byte, string, error) {
	c := t.b(bDrills).Cursor()
	var k, v []byte
	if pageToken == "" {
		k, v = c.Last()
	} else {
		tok, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err != nil || len(tok) == 0 {
			return nil, "", fmt.Errorf("%w: bad pageToken", ledger.ErrInvalid)
		}
		// Position on the newest key before the last one returned.
		if sk, _ := c.Seek(tok); sk == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for k != nil && string(k) >= string(tok) {
			k, v = c.Prev()
		}
	}
	var out [][]byte
	var last []byte
	for ; k != nil; k, v = c.Prev() {
		if len(out) == n {
			return out, base64.RawURLEncoding.EncodeToString(last), nil
		}
		out = append(out, append([]byte(nil), v...))
		last = append(last[:0], k...)
	}
	return out, "", nil
}

func (t *tx) Revocation(grant string) (*ledger.Revocation, error) {
	v := t.b(bGrants).Get([]byte(grant))
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

func (t *tx) RowsByID(after string, n int) ([]*ledger.Row, string, error) {
	c := t.b(bRows).Cursor()
	var k, v []byte
	if after == "" {
		k, v = c.First()
	} else {
		k, v = c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
	}
	var out []*ledger.Row
	for ; k != nil; k, v = c.Next() {
		if len(out) == n {
			return out, out[len(out)-1].ID, nil
		}
		var r ledger.Row
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, "", fmt.Errorf("decode row %s: %w", k, err)
		}
		out = append(out, &r)
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
	v := t.b(bIncident).Get(seqKey(seq))
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
		k, v = c.Last()
	} else if k, _ = c.Seek(seqKey(before)); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	var out []*ledger.IncidentRecord
	for ; k != nil && len(out) < n; k, v = c.Prev() {
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
	ledger.RefHold:    bHolds,
	ledger.RefSegment: bSegments,
}

func (t *tx) Count(kind ledger.RefKind, key string, delta int) (int, error) {
	b, ok := countBuckets[kind]
	if !ok {
		return 0, fmt.Errorf("%w: unknown reference kind %q", ledger.ErrInvalid, kind)
	}
	return t.count(b, key, delta)
}

func (t *tx) UpdateRetention(id string, until time.Time) error {
	r, err := t.Row(id)
	if err != nil {
		return err
	}
	if !r.RetainUntil.IsZero() {
		if err := t.b(bExpiry).Delete(expiryKey(r.RetainUntil, id)); err != nil {
			return err
		}
	}
	if !until.IsZero() {
		if err := t.b(bExpiry).Put(expiryKey(until, id), nil); err != nil {
			return err
		}
	}
	r.RetainUntil = until
	return t.putRow(r)
}

func (t *tx) Expired(now time.Time, after string, n int) ([]*ledger.Row, string, error) {
	var out []*ledger.Row
	c := t.b(bExpiry).Cursor()
	limit := uint64(max(now.UnixNano(), 0))
	var k []byte
	if after == "" {
		k, _ = c.First()
	} else {
		pos, err := hex.DecodeString(after)
		if err != nil {
			return nil, "", fmt.Errorf("%w: bad sweep position", ledger.ErrInvalid)
		}
		if k, _ = c.Seek(pos); k != nil && string(k) == string(pos) {
			k, _ = c.Next()
		}
	}
	var last []byte
	for ; k != nil; k, _ = c.Next() {
		if len(k) < 8 || binary.BigEndian.Uint64(k) > limit {
			return out, "", nil
		}
		if len(out) == n {
			return out, hex.EncodeToString(last), nil
		}
		r, err := t.Row(string(k[8:]))
		if err != nil {
			return nil, "", err
		}
		out = append(out, r)
		last = append(last[:0], k...)
	}
	return out, "", nil
}

func (t *tx) RemoveRow(r *ledger.Row, tomb ledger.Tombstone) error {
	if err := t.b(bRows).Delete([]byte(r.ID)); err != nil {
		return err
	}
	for _, e := range indexEntries(r) {
		if err := t.b(e.bucket).Delete(indexKey(e.value, r.IssuedAt, r.ID)); err != nil {
			return err
		}
	}
	if !r.RetainUntil.IsZero() {
		if err := t.b(bExpiry).Delete(expiryKey(r.RetainUntil, r.ID)); err != nil {
			return err
		}
	}
	if r.RequestJWTSHA256 != "" && string(t.b(bReqJWT).Get([]byte(r.RequestJWTSHA256))) == r.ID {
		if err := t.b(bReqJWT).Delete([]byte(r.RequestJWTSHA256)); err != nil {
			return err
		}
	}
	if err := t.b(bEvidence).Delete([]byte(r.ID)); err != nil {
		return err
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
	v := t.b(bTombs).Get([]byte(id))
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
	v := t.b(bSnapKeep).Get([]byte(id))
	if len(v) != 8 {
		return time.Time{}, nil
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(), nil
}

func (t *tx) SetSnapshotRetain(id string, at time.Time) error {
	return t.b(bSnapKeep).Put([]byte(id), binary.BigEndian.AppendUint64(nil, uint64(max(at.UnixNano(), 0))))
}
