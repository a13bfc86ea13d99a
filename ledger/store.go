package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Errors of the ledger.
var (
	// ErrNotFound: no row, snapshot or object with that id.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input cannot be recorded; nothing was stored.
	ErrInvalid = errors.New("invalid input")
	// ErrConflict: the input is well formed but the ledger's state does not
	// allow it, such as closing an incident already closed; nothing changed.
	ErrConflict = errors.New("conflicts with the ledger's state")
	// ErrUnavailable: a store is down; the caller may retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrStarting: a store has not finished the check it runs as ledgerd
	// starts (storage/s3's bucket check), so it takes no request yet. It
	// wraps ErrUnavailable. The store reports its own check's failures;
	// a step that meets this retries quietly.
	ErrStarting = fmt.Errorf("%w: not checked yet", ErrUnavailable)
	// ErrClosed: the ledger is shutting down.
	ErrClosed = errors.New("ledger closed")
	// ErrNoSpace: the row store's disk is full; nothing was stored. The
	// wrapped text names the disk. Writes succeed again once space is freed.
	ErrNoSpace = errors.New("no space left for the row store")
	// ErrObjectExists: a different object already holds the key in
	// write-once storage, so a put under that key can never succeed.
	ErrObjectExists = errors.New("a different object already holds the key")
	// ErrKeysUnavailable: the verifier could not decide because a signer's
	// keys could not be fetched (no cached set, or an unknown kid whose
	// refetch failed). Nothing was stored; the writer should retry.
	ErrKeysUnavailable = errors.New("signing keys unavailable; retry")
	// ErrLeaseHeld: another holder holds the lease and it has not expired.
	ErrLeaseHeld = errors.New("lease held by another holder")
	// ErrLeaseLost: a fenced write's lease was taken over or expired;
	// nothing of the write persists.
	ErrLeaseLost = errors.New("lease lost")
	// ErrObjectChanged: a conditional put of a new version found the
	// key's latest version other than the one the writer had read.
	ErrObjectChanged = errors.New("the object changed since it was read")
	// ErrLogDiverged: the Merkle log in write-once storage is not a prefix
	// of this ledger's (another log's, or one this row store has not got
	// all of), so nothing of this ledger's log is published over it. The
	// wrapped text says what differs.
	ErrLogDiverged = errors.New("the Merkle log in write-once storage is not this ledger's")
	// ErrLogKey: the row store's latest checkpoint is not signed by this
	// ledger's log key (LogConfig.Signer), so this ledger signs and
	// publishes nothing of the log: a replica given another key than the
	// others. The wrapped text names both keys.
	ErrLogKey = errors.New("the row store's Merkle log is signed by another key")
	// ErrStoreEdited: the row store holds an entry the ledger never wrote
	// there, such as an index entry that leads to another record than the
	// row's id does: the store was edited outside the ledger. The row is
	// not served; the wrapped text names it, and `ledgerctl fsck` lists
	// every such entry.
	ErrStoreEdited = errors.New("the row store was edited outside the ledger")
)

// Store keeps rows, their indexes, evidence bytes, JWKS snapshots, the
// outbox, reports and leases. It is the ledger's whole view of row storage;
// a backend implements it (storage/bolt, storage/postgres) and passes the
// conformance suite in ledger/storetest. A backend stores and finds: every
// decision (what becomes deletable, that retention only grows, when an
// outbox entry is dead) is the ledger's (docs/design/016-store-boundary.md).
type Store interface {
	// Update runs fn in a write transaction that may be shared with other
	// Update calls (group commit: one fsync for many rows). When fn returns
	// an error none of its writes persist. fn may run more than once and must
	// not keep state between runs. Update returns after the commit is durable.
	//
	// When ctx carries a Fence (WithFence), fn's writes commit only while
	// that lease is still held under that token and unexpired; otherwise
	// Update returns an error wrapping ErrLeaseLost and nothing of fn
	// persists. The check is made inside the transaction, so it conflicts
	// with a takeover of the lease.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	Leases
}

// Tx is one transaction of a Store: the small interfaces the ledger's
// parts work on.
type Tx interface {
	Rows
	Indexes
	Outbox
	References
	Reports
	LogTx
}

// Indexes checks a store's own indexes against its rows, for fsck.
type Indexes interface {
	// CheckIndexes calls fn, until it returns an error, with each entry
	// of the store's indexes that leads to another record than the row's
	// id does, each record no id leads to, and each record an id leads
	// to that the index listing every row does not list: what an edit of
	// the store outside the ledger leaves. A store whose indexes cannot
	// lead elsewhere than the row (SQL indexes over one table row)
	// reports none.
	CheckIndexes(fn func(IndexFinding) error) error
}

// IndexFinding is one place where a row store's indexes and its rows
// disagree (Indexes.CheckIndexes).
type IndexFinding struct {
	// RowID is the id the record holds.
	RowID string
	// Index is the store's name for the index: the one whose entry
	// leads to the record, the index of ids, or the index listing every
	// row, by Problem.
	Index   string
	Problem IndexProblem
}

// IndexProblem is what an IndexFinding found.
type IndexProblem int

const (
	// IndexOtherRecord: an entry of the index leads to a record of the
	// row that the row's id does not lead to, such as an edited copy.
	IndexOtherRecord IndexProblem = iota + 1
	// IndexUnnamedRecord: the index of ids leads to no record of the row
	// it holds: a record written outside the ledger under another
	// number, or the one the row's id led to before an edit.
	IndexUnnamedRecord
	// IndexUnlistedRecord: the record the row's id leads to has no entry
	// in the index listing every row, so no listing shows it.
	IndexUnlistedRecord
	// IndexMissingEntry: the record the row's id leads to has no entry
	// in the index of one of its values (its customer, grant, order,
	// agent, status or class), so the lookups of that value miss it.
	IndexMissingEntry
)

// Rows keeps rows, their secondary indexes, evidence bundles, JWKS
// snapshots, revocations and tombstones.
type Rows interface {
	// Row returns the row with id, or ErrNotFound.
	Row(id string) (*Row, error)
	// CreateRow writes a new row with its index entries, its expiry entry
	// (when RetainUntil is set), a link to each JWKS snapshot it names
	// (SnapshotsOf; see SnapshotInUse) and, when IndexesRequestJWT holds
	// for it and no row holds its request-JWT hash yet, the request-JWT
	// index entry. Each entry r.RequestJWTTakenFrom lists (a hash of its
	// request JWT, with the row the entry was read naming) is made to name
	// r while it still names that row: the request JWT is then found
	// naming r, as if r had used it first; one that another writer took
	// since is a race lost, as for an entry read absent. A row with the
	// same id is an error, which a store that sends writes with its next
	// round trip reports from a later call of the same fn or from Update.
	CreateRow(r *Row) error
	// UpdateDispute sets the dispute status and events of row id; nothing
	// else of the row changes and indexes do not change.
	UpdateDispute(id string, status DisputeStatus, events []DisputeEvent) error
	// UpdateRetention sets row id's retain-until and moves its expiry entry.
	// The ledger only ever extends it.
	UpdateRetention(id string, until time.Time) error
	// RowByRequestJWT returns the id of the first row that used the request
	// JWT with that hex SHA-256, or "". The entry moves to a later row only
	// when CreateRow takes it over (Row.RequestJWTTakenFrom); it is cleared
	// only when the row it names is removed.
	RowByRequestJWT(sha string) (string, error)
	// List returns a page of rows matching q, newest first, and the token
	// of the next page ("" at the end). It reads at most q's read bound of
	// index entries (MaxListRead, or q.MaxRead when lower), each of which
	// may name a row that q's other filters leave out: once it has read
	// that many, the page ends with the rows matched so far, possibly
	// none, and a token that continues after the last entry read. A page
	// may so hold fewer than PageSize rows while more follow. A call
	// counts the entries up to and including the last one it passed over
	// for its page (its last row when the page filled, or ended before a
	// row past q.Budget; else the last entry within the bound), and the
	// next page continues after that entry: a token comes back only when
	// an entry follows it. When q.Read is not nil, List adds to it the
	// number of entries the call counted.
	List(q Query) ([]*Row, string, error)
	// RowAfter returns the first row whose id sorts at or after key,
	// wrapping around to the first row; nil when there are no rows.
	RowAfter(key string) (*Row, error)
	// RowsByID returns up to n rows in id order after the row id after
	// ("" from the start), and the id to continue after ("" at the end).
	RowsByID(after string, n int) ([]*Row, string, error)
	// Expired returns up to n rows whose retain-until is at or before now,
	// soonest first, after the position after ("" from the start), and the
	// position to continue from ("" when there are no more).
	Expired(now time.Time, after string, n int) ([]*Row, string, error)
	// RemoveRow removes row r with its index entries, its expiry entry, its
	// snapshot links, its request-JWT entry when r holds it, and its
	// evidence bundle, and writes its tombstone. Objects, counts and
	// snapshots are the caller's. A row not stored is ErrNotFound, which
	// a store that sends writes with its next round trip reports from a
	// later call of the same fn or from Update; no tombstone is written.
	RemoveRow(r *Row, tomb Tombstone) error
	// Tombstone returns the tombstone of a removed row, or ErrNotFound.
	Tombstone(id string) (*Tombstone, error)
	// PutEvidence stores a row's evidence bundle.
	PutEvidence(rowID string, bundle []byte) error
	// Evidence returns a row's evidence bundle, or ErrNotFound.
	Evidence(rowID string) ([]byte, error)
	// PutSnapshot stores a JWKS snapshot and reports whether it was new.
	// In a write transaction the snapshot it finds or stores stays stored
	// until the transaction ends: a transaction that deletes it (after
	// SnapshotInUse) either ends first, and then PutSnapshot stores it
	// again and reports it new, or waits for this one to end. Writers
	// putting one snapshot do not wait for each other once it is stored.
	PutSnapshot(s verifier.Snapshot) (bool, error)
	// Snapshot returns a snapshot, or ErrNotFound.
	Snapshot(id string) (verifier.Snapshot, error)
	// SnapshotInUse reports whether any stored row names snapshot id (a
	// link CreateRow wrote). In a write transaction the answer holds until
	// the transaction ends, also against other processes on the store: a
	// writer that links a new row to id and then calls PutSnapshot for it
	// is either seen here, or its PutSnapshot waits for this transaction
	// to end (and, when this one deleted the snapshot, stores it again and
	// reports it new).
	SnapshotInUse(id string) (bool, error)
	// DeleteSnapshot removes a snapshot and its retain-until record.
	DeleteSnapshot(id string) error
	// DrillPool describes the drill pool: the rows Drillable holds for,
	// each at a position that CreateRow gives it (a number no other row of
	// the store holds or will hold) and RemoveRow takes away. It returns
	// how many rows the pool holds and its lowest and highest positions.
	DrillPool() (n int, first, last uint64, err error)
	// DrillPoolRows returns the rows of the pool at those of positions
	// that hold one.
	DrillPoolRows(positions []uint64) (map[uint64]*Row, error)
	// DrillPoolPositions calls fn with each position of the pool, lowest
	// first.
	DrillPoolPositions(fn func(position uint64)) error
	// DrillPoolMembers returns the position in the pool of each of the
	// rows ids that the pool holds; a row the pool does not hold, or the
	// store does not, is left out.
	DrillPoolMembers(ids []string) (map[string]uint64, error)
	// Revocation returns a grant's recorded revocation, or nil.
	Revocation(grant string) (*Revocation, error)
	// PutRevocation records a grant's revocation.
	PutRevocation(grant string, r Revocation) error
	// HoldGrants holds grants for the rest of this write transaction: of
	// the transactions that hold one grant, one runs from its hold to its
	// end at a time, so that what a holder reads after its hold includes
	// what every earlier holder wrote. A store may hold several grants
	// with one hold, and may send the hold with the transaction's next
	// round trip, which runs once the hold is granted; what was read
	// ahead before (Prefetch) was read before the hold. The ledger holds
	// a grant before the first read of a receipt that counts the rows
	// under it (countMax), before it records the grant's revocation, and
	// in a sweep, before it decides on the rows of the grants it removes.
	// A store with one writer at a time holds every grant already.
	HoldGrants(grants ...string) error
}

// AccessNumbers is a transaction that tells how far its store's access
// log has numbered records (fsck checks that batches cover them).
type AccessNumbers interface {
	// LastAccessSeq returns the last number AppendAccess handed out (0
	// for none), and whether every number up to it went to a record this
	// transaction sees: bbolt's numbers come back with a write that
	// fails; PostgreSQL's sequence skips the numbers of a rolled-back
	// write, and stands past those of writes committed since the
	// transaction began.
	LastAccessSeq() (last uint64, gapless bool, err error)
}

// Prefetcher is a transaction that reads ahead, in one round trip, the
// records a write (or the uploader) is about to ask for: a store whose
// reads each cross the network implements it (PostgreSQL's); bbolt's
// reads are memory reads and it does not. Until the transaction's member
// writes, Row, Tombstone, RowByRequestJWT, Revocation and Evidence of a
// prefetched key answer exactly as they would have at the prefetch
// (taking the same locks there).
type Prefetcher interface {
	Prefetch(p Prefetch) error
}

// Prefetch names the records to read ahead.
type Prefetch struct {
	Rows        []string // row ids
	Tombstones  []string // ids of removed rows
	RequestJWTs []string // request-JWT hashes
	Grant       string   // a grant whose revocation is read; "" for none
	Evidence    []string // row ids whose evidence bundles are read
	Objects     []string // object keys whose recorded locations are read
}

// prefetch asks tx to read p ahead when it can.
func prefetch(tx Tx, p Prefetch) error {
	if pf, ok := tx.(Prefetcher); ok {
		return pf.Prefetch(p)
	}
	return nil
}

// KindOutbox is a transaction that reads the outbox entries of one kind
// alone, lowest Seq first, without holding the others in memory: fsck
// reads the batches of access records queued among what may be millions
// of evidence entries while write-once storage is away. Both stores'
// transactions implement it; of one that does not, the whole outbox is
// read.
type KindOutbox interface {
	OutboxOfKind(kind string) ([]OutboxEntry, error)
}

// EvidenceDropper is a transaction that removes a row's evidence bundle
// once its write-once copy is recorded (RecordUpload asks it to; bbolt's
// does). A store whose transactions do not keep every bundle, and reads
// take them from there.
type EvidenceDropper interface {
	// DropEvidence removes a row's evidence bundle; no error when there is
	// none.
	DropEvidence(rowID string) error
}

// Dequeuer is a transaction that removes many outbox entries in one round
// trip (PostgreSQL's); RecordUploads uses it where the transaction is one.
// bbolt's removals are memory writes and it does not.
type Dequeuer interface {
	// DequeueAll is Dequeue of each of seqs, in order: it reports for each
	// whether it was still queued.
	DequeueAll(seqs []uint64) ([]bool, error)
}

// Outbox keeps the evidence objects waiting for write-once storage, in
// sequence order, with their failure records, segment plans and dead
// letters.
type Outbox interface {
	// Enqueue adds an entry queued at at, assigning its Seq: larger than
	// the Seq of every entry enqueued in a transaction committed before.
	Enqueue(e OutboxEntry, at time.Time) error
	// Outbox returns up to n entries, lowest Seq first.
	Outbox(n int) ([]OutboxEntry, error)
	// Claim returns up to n entries, lowest Seq first, that no other holder
	// has claimed for a time not yet past, and claims them for holder for
	// ttl (judged by the store's clock). A store with one uploader (bbolt)
	// may return Outbox(n).
	Claim(n int, holder string, ttl time.Duration) ([]OutboxEntry, error)
	// HoldsClaim reports whether every entry of seqs (distinct Seqs) is
	// still queued and claimed by holder with a claim not yet past (the
	// store's clock), and keeps those it holds from other holders' claims
	// until the transaction ends, even once the claim runs out. A store
	// with one uploader, which keeps no claims, checks only that they are
	// queued.
	HoldsClaim(holder string, seqs []uint64) (bool, error)
	// Queued returns those of seqs (distinct Seqs) still queued, in
	// ascending order.
	Queued(seqs []uint64) ([]uint64, error)
	// QueuedPuts returns, for each of keys (distinct object keys) with a
	// put queued (an entry with no Op), the first such entry, in Seq
	// order. It may read the whole outbox: the uploader asks it, at most
	// once a round, only of operations whose object has no recorded
	// location.
	QueuedPuts(keys []string) ([]OutboxEntry, error)
	// ClaimEntries claims for holder for ttl those of the entries seqs
	// still queued that no other holder has a live claim on (as Claim),
	// and returns them in Seq order. A store with one uploader returns
	// those still queued.
	ClaimEntries(seqs []uint64, holder string, ttl time.Duration) ([]OutboxEntry, error)
	// Dequeue removes entry seq and its failure record, and reports whether
	// it was still queued.
	Dequeue(seq uint64) (bool, error)
	// OutboxDepth returns the number of entries in the outbox.
	OutboxDepth() (int, error)
	// OldestQueued returns when the oldest entry was queued: zero when the
	// outbox is empty or the entry predates the record.
	OldestQueued() (time.Time, error)
	// PlanSegment records a segment object before its put: its key and
	// member entries are fixed from then on.
	PlanSegment(p SegmentPlan) error
	// SegmentPlans returns the recorded segment plans, by key.
	SegmentPlans() ([]SegmentPlan, error)
	// DropSegmentPlan removes the plan of the segment key (done or dead).
	DropSegmentPlan(key string) error
	// Failure returns the failure record of entry seq (zero when none).
	Failure(seq uint64) (OutboxFailure, error)
	// SetFailure stores the failure record of entry seq.
	SetFailure(seq uint64, f OutboxFailure) error
	// PutDeadLetter stores a dead letter under its entry's Seq.
	PutDeadLetter(d DeadLetter) error
	// DeadLetters returns up to n dead letters whose entry Seq is above
	// after, in Seq order.
	DeadLetters(after uint64, n int) ([]DeadLetter, error)
	// DeadLetterCount returns the number of dead letters.
	DeadLetterCount() (int, error)
	// RemoveDeadLetter removes the dead letter of entry seq.
	RemoveDeadLetter(seq uint64) error
}

// RefKind names a counter of references to a key.
type RefKind string

// Reference counters.
const (
	// RefHold counts the open incidents holding an object.
	RefHold RefKind = "hold"
	// RefSegment counts the rows whose evidence is packed in a segment.
	RefSegment RefKind = "segment"
	// RefRepeatIncident counts, under a receipt's key (the lesser hash of
	// its encodings), the incident one of its repeats opened: one at most,
	// kept as long as the ledger, as incident records are
	// (docs/design/012).
	RefRepeatIncident RefKind = "repeat-incident"
)

// References keeps where uploaded objects are held, reference counts,
// snapshot retention and the queue of objects to delete.
type References interface {
	// Object returns where an uploaded object is held, or ErrNotFound
	// while it waits in the outbox.
	Object(key string) (Location, error)
	// SetObject records where the object of key is held.
	SetObject(key string, loc Location) error
	// DeleteObject forgets where the object of key is held.
	DeleteObject(key string) error
	// ObjectsUnder returns where up to n uploaded objects are held whose
	// keys start with prefix and sort after after (byte order), in key
	// order, each with its Key set.
	ObjectsUnder(prefix, after string, n int) ([]Location, error)
	// Count adds delta to the counter of kind and key and returns the new
	// value, never below zero; a counter at zero is removed. A delta of 0
	// only reads it, in a read transaction too.
	Count(kind RefKind, key string, delta int) (int, error)
	// SnapshotRetain returns the retain-until recorded for a snapshot's
	// object (zero when none).
	SnapshotRetain(id string) (time.Time, error)
	// SetSnapshotRetain records it.
	SetSnapshotRetain(id string, t time.Time) error
	// QueueDeletion queues an object for deletion once its retention passed.
	QueueDeletion(loc Location) error
	// Deletions returns up to n objects queued for deletion.
	Deletions(n int) ([]Location, error)
	// Deleted removes an object from the deletion queue.
	Deleted(key string) error
}

// Reports keeps drill reports, incidents and the read-access log.
type Reports interface {
	// PutDrill stores a drill report under id (ids sort by time).
	PutDrill(id string, body []byte) error
	// Drill returns a drill report, or ErrNotFound.
	Drill(id string) ([]byte, error)
	// Drills returns up to n reports, newest first, after the page token.
	Drills(n int, pageToken string) ([][]byte, string, error)
	// NextIncidentSeq allocates a new incident number, larger than any
	// before it.
	NextIncidentSeq() (uint64, error)
	// PutIncident writes the record of incident seq.
	PutIncident(seq uint64, inc IncidentRecord) error
	// Incident returns incident seq, or ErrNotFound.
	Incident(seq uint64) (*IncidentRecord, error)
	// Incidents returns up to n incidents whose number is below before (0:
	// from the newest), newest first.
	Incidents(n int, before uint64) ([]*IncidentRecord, error)
	// AppendAccess appends a read-access record written at at and returns
	// its sequence number, larger than any before it.
	AppendAccess(at time.Time, body []byte) (uint64, error)
	// AccessLog returns up to n access records whose Seq is above after,
	// oldest first.
	AccessLog(after uint64, n int) ([]AccessEntry, error)
	// PruneAccess removes up to n of the oldest access records written
	// before before, except those numbered within a span of keep (sorted
	// by First, not overlapping), and returns how many it removed.
	PruneAccess(before time.Time, keep []AccessSpan, n int) (int, error)
}

// AccessEntry is one stored read-access record: its sequence number, when
// it was written and its body (JSON written by the ledger).
type AccessEntry struct {
	Seq  uint64
	At   time.Time
	Body []byte
}

// AccessSpan is the access records numbered First to Last.
type AccessSpan struct{ First, Last uint64 }

// Leases keeps singleton jobs to one holder at a time across every process
// on the store. Expiry is judged by the store's clock, never by a holder's.
type Leases interface {
	// AcquireLease takes lease name for holder for ttl when it is free,
	// expired or already held by holder, and returns its fencing token:
	// larger than every token handed out for name before. Otherwise it
	// returns an error wrapping ErrLeaseHeld, a *LeaseHeldError when the
	// store can say who holds it.
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (uint64, error)
	// RenewLease extends the lease held by holder under token to ttl from
	// now, or returns ErrLeaseLost when it is no longer held so.
	RenewLease(ctx context.Context, name, holder string, token uint64, ttl time.Duration) error
	// ReleaseLease gives the lease up when holder still holds it under
	// token; otherwise it does nothing.
	ReleaseLease(ctx context.Context, name, holder string, token uint64) error
}

// CheckLeaseTTL refuses, for a store's AcquireLease and RenewLease, a ttl
// that would hand out a lease already expired.
func CheckLeaseTTL(name string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: lease %s: ttl must be positive", ErrInvalid, name)
	}
	return nil
}

// Fence names a lease and the token a fenced write holds it under.
type Fence struct {
	Lease string
	Token uint64
}

// LeaseHeldError is ErrLeaseHeld with the lease's holder and when its
// lease ends unless renewed, by the store's clock.
type LeaseHeldError struct {
	Lease   string
	Holder  string
	Expires time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease %s is held by %s until %s unless renewed", e.Lease, e.Holder, e.Expires.UTC().Format(time.RFC3339))
}

// Is reports whether target is ErrLeaseHeld.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

type fenceKey struct{}

// WithFence returns ctx carrying f: Store.Update with it commits only while
// the lease is still held under f.Token.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence ctx carries, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// SegmentPlan is a segment object fixed before it is put: its key, its
// retain-until and its member entries in order (which fix its bytes). The
// uploader records it before the put and re-puts exactly it until the
// members are recorded as uploaded, so a put that succeeded but was not
// recorded is repeated under the same key (an identical re-put of a
// create-only object is success) and never leaves an orphan object.
type SegmentPlan struct {
	Key         string        `json:"key"`
	RetainUntil time.Time     `json:"retainUntil"`
	Entries     []OutboxEntry `json:"entries"`
}

// OutboxFailure is the record of an outbox entry's consecutive counted
// failures (see UploaderConfig.MaxAttempts).
type OutboxFailure struct {
	Attempts int       `json:"attempts"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Reason   string    `json:"reason"`
}

// DeadLetter is an outbox entry that could not succeed, moved aside so it
// blocks nothing: the entry as it was queued, why it was moved, how many
// counted attempts failed and when the first and last did.
type DeadLetter struct {
	Entry        OutboxEntry `json:"entry"`
	Reason       string      `json:"reason"`
	Attempts     int         `json:"attempts"`
	FirstFailure time.Time   `json:"firstFailure"`
	LastFailure  time.Time   `json:"lastFailure"`
}

// Query filters ListRows. Empty fields do not filter.
type Query struct {
	Principal string
	GrantID   string
	Target    string
	Agent     string
	Status    Status
	Class     retention.Class
	// Signed, with GrantID, keeps only the grant's receipt rows whose
	// receipt signature passed (Row.ReceiptVerified): the rows that can
	// count toward its countMax, read from the stores' index of them, so
	// that rows no signature vouches for are not read at all. It is
	// refused without GrantID.
	Signed    bool
	Since     time.Time
	Until     time.Time
	PageSize  int
	PageToken string
	// MaxRead bounds the index entries one List call reads (and the rows
	// it decodes): 0, or more than MaxListRead, is MaxListRead. It is not
	// a filter: a token stays valid whatever MaxRead is.
	MaxRead int
	// Read, when not nil, is increased by the number of index entries a
	// List call read: what a caller that walks many pages counts against
	// a budget of its own.
	Read *int
	// Budget, when above 0, also ends a page before the row that would
	// take the sizes of its rows, as Size measures them, past Budget (the
	// page holds one row at least): the call then counts the entries up
	// to and including its last row, and its token continues after that
	// row. Like MaxRead it is not a filter.
	Budget int
	Size   func(*Row) int
}

// Fits reports whether r, a row matching q, still fits a page that holds
// kept rows whose sizes add up to *used (Budget), and when it does adds
// its size to *used. The first row always fits.
func (q Query) Fits(used *int, kept int, r *Row) bool {
	if q.Budget <= 0 || q.Size == nil {
		return true
	}
	n := q.Size(r)
	if kept > 0 && *used+n > q.Budget {
		return false
	}
	*used += n
	return true
}

// MaxListRead is the most index entries one List call reads. A listing by
// one filter reads an entry a row it returns; a listing by several reads
// the entries of one filter's index and checks the others on the rows,
// and any writer can post rows that one filter selects and another
// leaves out (receipts under a customer's order id for other
// principals), so without a bound one page could read every such row in
// one transaction. A page stops at the bound with the rows it has and a
// token that continues after the last entry read.
const MaxListRead = 10_000

// ReadBound returns the number of entries a List call for q may read.
func (q Query) ReadBound() int {
	if q.MaxRead <= 0 || q.MaxRead > MaxListRead {
		return MaxListRead
	}
	return q.MaxRead
}

// CheckSigned returns an error wrapping ErrInvalid when q asks for
// Signed without a GrantID: the stores index the rows that can count by
// grant only.
func (q Query) CheckSigned() error {
	if q.Signed && q.GrantID == "" {
		return fmt.Errorf("%w: a listing of signed rows names a grant", ErrInvalid)
	}
	return nil
}

// CountRead adds n to q.Read when it is set.
func (q Query) CountRead(n int) {
	if q.Read != nil {
		*q.Read += n
	}
}

// ObjectStore is write-once evidence storage (S3 Object Lock or a local
// directory).
type ObjectStore interface {
	// Put creates key with body, retained until retainUntil. An existing
	// object with the same bytes is success; other bytes are an error
	// wrapping ErrObjectExists.
	Put(ctx context.Context, key string, body []byte, retainUntil time.Time) (Location, error)
	// Get returns the bytes of key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
	// SetLegalHold places (on) or releases a legal hold on an object.
	SetLegalHold(ctx context.Context, loc Location, on bool) error
	// Delete removes an object version whose retention has passed; the
	// store refuses while it is retained or held.
	Delete(ctx context.Context, loc Location) error
	// ExtendRetention moves an object's retain-until to until when that is
	// later than the current one; it never shortens retention.
	ExtendRetention(ctx context.Context, loc Location, until time.Time) error
}
