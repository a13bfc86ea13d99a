package ledger

import (
	"context"
	"errors"
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
	// ErrUnavailable: a store is down; the caller may retry.
	ErrUnavailable = errors.New("unavailable")
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
)

// Store keeps rows, their indexes, evidence bytes, JWKS snapshots and the
// outbox. It is the ledger's whole view of row storage; a backend
// implements it (storage/bolt).
type Store interface {
	// Update runs fn in a write transaction that may be shared with other
	// Update calls (group commit: one fsync for many rows). When fn returns
	// an error none of its writes persist. fn may run more than once and must
	// not keep state between runs. Update returns after the commit is durable.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
}

// Tx is one transaction of a Store.
type Tx interface {
	LogTx

	// Row returns the row with id, or ErrNotFound.
	Row(id string) (*Row, error)
	// CreateRow writes a new row with its index entries.
	CreateRow(r *Row) error
	// UpdateDispute rewrites a row whose dispute fields changed; indexes do
	// not change.
	UpdateDispute(r *Row) error
	// RowByRequestJWT returns the id of the first row that used the request
	// JWT with that hex SHA-256, or "".
	RowByRequestJWT(sha string) (string, error)
	// NextIncidentID allocates a new incident id.
	NextIncidentID() (string, error)
	// PutEvidence stores a row's evidence bundle.
	PutEvidence(rowID string, bundle []byte) error
	// Evidence returns a row's evidence bundle, or ErrNotFound.
	Evidence(rowID string) ([]byte, error)
	// PutSnapshot stores a JWKS snapshot and reports whether it was new.
	PutSnapshot(s verifier.Snapshot) (bool, error)
	// Snapshot returns a snapshot, or ErrNotFound.
	Snapshot(id string) (verifier.Snapshot, error)
	// Enqueue adds an entry to the outbox, assigning its Seq.
	Enqueue(e OutboxEntry) error
	// Outbox returns up to n entries, oldest first.
	Outbox(n int) ([]OutboxEntry, error)
	// Uploaded removes outbox entry e and records where its object is held.
	Uploaded(e OutboxEntry, loc Location) error
	// Object returns where an uploaded object is held, or ErrNotFound
	// while it waits in the outbox.
	Object(key string) (Location, error)
	// OutboxDepth returns the number of entries in the outbox.
	OutboxDepth() (int, error)
	// OldestQueued returns when the oldest outbox entry was queued: zero
	// when the outbox is empty or the entry predates the record.
	OldestQueued() (time.Time, error)
	// PlanSegment records a segment object before its put: its key and
	// member entries are fixed from then on.
	PlanSegment(p SegmentPlan) error
	// SegmentPlans returns the recorded segment plans, by key.
	SegmentPlans() ([]SegmentPlan, error)
	// DropSegmentPlan removes the plan of the segment key (done or dead).
	DropSegmentPlan(key string) error
	// OutboxFailed counts one more failure of outbox entry seq, at at,
	// and returns the entry's failure record so far.
	OutboxFailed(seq uint64, reason string, at time.Time) (OutboxFailure, error)
	// DeadLetter moves outbox entry e to the dead letters with reason and
	// the failures OutboxFailed recorded for it (at least one, at at). It
	// does nothing when e has already left the outbox.
	DeadLetter(e OutboxEntry, reason string, at time.Time) error
	// DeadLetters returns up to n dead letters whose entry Seq is above
	// after, in Seq order.
	DeadLetters(after uint64, n int) ([]DeadLetter, error)
	// DeadLetterCount returns the number of dead letters.
	DeadLetterCount() (int, error)
	// RemoveDeadLetter removes the dead letter of entry seq.
	RemoveDeadLetter(seq uint64) error
	// List returns a page of rows matching q, newest first.
	List(q Query) ([]*Row, string, error)
	// RowAfter returns the first row whose id sorts at or after key,
	// wrapping around to the first row; nil when there are no rows.
	RowAfter(key string) (*Row, error)
	// Revocation returns a grant's recorded revocation, or nil.
	Revocation(grant string) (*Revocation, error)
	// PutRevocation records a grant's revocation.
	PutRevocation(grant string, r Revocation) error
	// RowsByID returns up to n rows in id order after the row id after
	// ("" from the start), and the id to continue after ("" at the end).
	RowsByID(after string, n int) ([]*Row, string, error)
	// PutIncident writes an incident record.
	PutIncident(inc IncidentRecord) error
	// Incident returns an incident, or ErrNotFound.
	Incident(id string) (*IncidentRecord, error)
	// Incidents returns up to n incidents, newest first, after pageToken.
	Incidents(n int, pageToken string) ([]*IncidentRecord, string, error)
	// AddHold changes the number of open incidents holding an object and
	// returns the new number.
	AddHold(key string, delta int) (int, error)
	// UpdateRetention rewrites a row whose retain-until changed (extended
	// only); indexes and evidence do not change.
	UpdateRetention(r *Row) error
	// Expired returns up to n rows whose retain-until is at or before now,
	// soonest first, after the position after ("" from the start), and the
	// position to continue from ("" when there are no more).
	Expired(now time.Time, after string, n int) ([]*Row, string, error)
	// SweepRow removes a row with its index entries and evidence bundle,
	// leaves the tombstone, and queues for deletion (and returns) the
	// write-once objects no remaining row needs: its own evidence object,
	// its segment once no row in it is left, snapshots no row names.
	SweepRow(r *Row, tomb Tombstone) ([]Location, error)
	// Tombstone returns the tombstone of a swept row, or ErrNotFound.
	Tombstone(id string) (*Tombstone, error)
	// Deletions returns up to n objects queued for deletion.
	Deletions(n int) ([]Location, error)
	// Deleted removes an object from the deletion queue.
	Deleted(key string) error
	// SnapshotRetain returns the retain-until recorded for a snapshot's
	// object (zero when none).
	SnapshotRetain(id string) (time.Time, error)
	// SetSnapshotRetain records it.
	SetSnapshotRetain(id string, t time.Time) error
	// PutDrill stores a drill report under id (ids sort by time).
	PutDrill(id string, body []byte) error
	// Drill returns a drill report, or ErrNotFound.
	Drill(id string) ([]byte, error)
	// Drills returns up to n reports, newest first, after the page token.
	Drills(n int, pageToken string) ([][]byte, string, error)
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
	Since     time.Time
	Until     time.Time
	PageSize  int
	PageToken string
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
