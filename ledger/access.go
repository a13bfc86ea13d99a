package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pactledger/pactledger/retention"
)

// Access is one read of the ledger's rows, evidence, snapshots, drills,
// incidents or access log: who read, through which call, what the query
// named and how many rows came back. Records are append-only; only the
// access log's retention removes them, oldest first.
type Access struct {
	// Seq is the record's number in the log, set when it is stored.
	Seq uint64 `json:"-"`
	// At is when the read was made.
	At time.Time `json:"at"`
	// Key is the name of the API key that read; Roles are its roles.
	Key   string   `json:"key"`
	Roles []string `json:"roles,omitempty"`
	// RPC is the call ("ListRows", "GetEvidence", ...).
	RPC string `json:"rpc"`
	// What the query named.
	Principal string `json:"principal,omitempty"`
	Target    string `json:"target,omitempty"`
	Grant     string `json:"grant,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Row       string `json:"row,omitempty"`
	// RowPrincipal is the principal of the row the read named by its id,
	// when the read found it: whose row was read.
	RowPrincipal string `json:"rowPrincipal,omitempty"`
	// RowPrincipals are the principals of the rows the reply carried, for
	// a read that did not name one row by its id (a listing, a grant, an
	// incident, a drill): each once, at most MaxAccessPrincipals.
	// RowPrincipalsCut says the reply carried rows of more principals, or
	// of rows whose principal could not be read: the read may have
	// returned any customer's rows. Records written before these fields
	// have neither.
	RowPrincipals    []string `json:"rowPrincipals,omitempty"`
	RowPrincipalsCut bool     `json:"rowPrincipalsCut,omitempty"`
	// Object is a snapshot, drill or incident id the read named.
	Object string `json:"object,omitempty"`
	// AboutKey is the key whose reads an access-log listing asked for.
	AboutKey string `json:"aboutKey,omitempty"`
	// Rows is how many rows the reply carried.
	Rows int `json:"rows"`
	// Result is "ok", or why the read returned nothing ("not found", ...).
	Result string `json:"result"`
	// Truncated says Record cut a value the read named (cutAccessValue).
	Truncated bool `json:"truncated,omitempty"`
}

// cutAccessValue is a value a read named as the log keeps it: whole up to
// MaxFieldLength bytes, longer than any value the ledger holds; else its
// first bytes, cut between characters, and "… (N bytes more)", within
// MaxFieldLength in all. A read is recorded with what its request named,
// refused or not, and a request may name values up to the API's body
// limit: kept whole, a reading key's refused reads would fill the log's
// memory queue and its store.
func cutAccessValue(s string, cut *bool) string {
	if len(s) <= MaxFieldLength {
		return s
	}
	*cut = true
	n := MaxFieldLength - 32
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)-n) + " bytes more)"
}

// Cut cuts each value a names to MaxFieldLength bytes (cutAccessValue),
// setting Truncated when one was: what Record keeps, and what a log line
// of the read may show. A value cut once is not cut again.
func (a *Access) Cut() {
	for _, v := range []*string{&a.Principal, &a.Target, &a.Grant, &a.Agent, &a.Row, &a.RowPrincipal, &a.Object, &a.AboutKey} {
		*v = cutAccessValue(*v, &a.Truncated)
	}
	for i := range a.RowPrincipals {
		a.RowPrincipals[i] = cutAccessValue(a.RowPrincipals[i], &a.Truncated)
	}
}

// MaxAccessPrincipals is the most principals an access record lists of
// the rows a reply carried (Access.RowPrincipals).
const MaxAccessPrincipals = 64

// AccessQuery selects access records; empty fields match everything.
type AccessQuery struct {
	// After lists records whose Seq is above it (a page token).
	After uint64
	// Limit is the most records returned; 1 to 1000, 0 means 100.
	Limit int
	// Since skips records made before it.
	Since time.Time
	// Through ends the listing after the record numbered it; zero means
	// the last number the log handed out when the page is read (the first
	// page's, which its Next carries), so paging through the log ends even
	// while reads (these included) add records. The listing ends by
	// number, not by time: a record stamped by a clock ahead (a clock
	// stepped forward, a replica's) neither ends it nor is left out.
	Through uint64
	// Before is when the listing's first page was read; zero means now.
	// Next carries it, for page tokens that carry a time; it ends and
	// filters nothing (Through ends the listing).
	Before time.Time
	// Key, Principal, Target and Grant must equal the record's; Principal
	// may equal its RowPrincipal instead, or be one of its RowPrincipals,
	// and matches every record whose RowPrincipals were cut.
	Key, Principal, Target, Grant string
}

func (q AccessQuery) match(a *Access) bool {
	return !a.At.Before(q.Since) &&
		(q.Key == "" || a.Key == q.Key) && (q.Principal == "" || a.Principal == q.Principal || a.RowPrincipal == q.Principal ||
		a.RowPrincipalsCut || slices.Contains(a.RowPrincipals, q.Principal)) &&
		(q.Target == "" || a.Target == q.Target) && (q.Grant == "" || a.Grant == q.Grant)
}

// AccessLogConfig tunes an AccessLog. The zero value means defaults.
type AccessLogConfig struct {
	// Retention is how long records are kept; the zero Period keeps them.
	Retention retention.Period
	// FlushInterval is the longest a record waits in memory before it is
	// written; default 1s.
	FlushInterval time.Duration
	// Batch records waiting make a write start at once; default 256.
	Batch int
	// MaxQueued is the most records waiting in memory; a read that would
	// queue more waits until they are written. Default 10,000.
	MaxQueued int
	// MaxUnwritten is the longest the oldest record not yet written may
	// have waited for a read to be recorded: past it, Record refuses with
	// ErrAccessUnwritten, so that a stop or crash while the row store
	// refuses writes loses no more reads than that. Default
	// DefaultMaxUnwritten.
	MaxUnwritten time.Duration
	// Elapsed is the clock MaxUnwritten is measured by, one no step of
	// the wall clock moves; default the process's monotonic clock.
	Elapsed func() time.Duration
	// PruneInterval is how often records past the retention are removed;
	// default 1h.
	PruneInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Wake, when set, is called after a write queued its records' object
	// for write-once storage (Ledger.WakeUploader).
	Wake func()
	// CheckClock, when set, is called with the time a prune would remove
	// records by (Now) before it removes any: an error stops the prune,
	// which removes nothing and returns it (Ledger.CheckPruneClock: the
	// retention sweep's check against the reference clocks). Unset, the
	// log prunes by Now unchecked, as a ledger with no reference clocks
	// sweeps.
	CheckClock func(ctx context.Context, now time.Time) error
	// CheckRecordClock, when set, is called with Now before Record queues
	// a read: an error refuses the read, which Record returns (the read
	// is then not answered) and queues nothing (Ledger.CheckReadClock:
	// writes' check against the reference clocks, so that no read is
	// stamped by a clock off them, which the prune would take for older
	// or newer than it is). Unset, reads are stamped by Now unchecked.
	CheckRecordClock func(ctx context.Context, now time.Time) error
}

// DefaultMaxUnwritten is AccessLogConfig.MaxUnwritten's default: five
// writes' worth at the default FlushInterval, so that a write slow to
// commit does not refuse reads, while a row store that takes no writes
// refuses them within seconds.
const DefaultMaxUnwritten = 5 * time.Second

// ErrAccessUnwritten: a read was not recorded because the oldest record
// not yet written has waited longer than AccessLogConfig.MaxUnwritten
// (the row store takes no writes). It wraps ErrUnavailable: the read is
// not answered, and is taken again once the records are written.
var ErrAccessUnwritten = fmt.Errorf("%w: access records not written for longer than allowed", ErrUnavailable)

// Access log bounds.
const (
	maxAccessPage = 1000
	// maxAccessScan bounds the records one List reads while filtering; the
	// page token it returns continues from where it stopped.
	maxAccessScan = 10000
	pruneBatch    = 10000
)

// AccessLog keeps the read-access log. Reads queue their records in
// memory (Record does not wait for a disk write); Run writes them in
// batches, one transaction each, and writes what is left when it stops.
type AccessLog struct {
	store Store
	cfg   AccessLogConfig

	mu     sync.Mutex
	queued []Access
	space  chan struct{} // closed when queued records are taken for writing
	wake   chan struct{} // a batch is ready

	// queuedSince is when the oldest of queued was queued, and
	// writingSince when the oldest record a write has taken was, while
	// writingAny, by Elapsed: a record is not written until its write
	// commits.
	queuedSince, writingSince time.Duration
	writingAny                bool
	// lastAt is the latest time this log stamped a record with: none is
	// stamped earlier (Record).
	lastAt time.Time

	writing sync.Mutex // one write at a time, so records keep their order
}

// NewAccessLog returns the access log kept in store.
func NewAccessLog(store Store, cfg AccessLogConfig) *AccessLog {
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = 10000
	}
	if cfg.MaxUnwritten <= 0 {
		cfg.MaxUnwritten = DefaultMaxUnwritten
	}
	if cfg.Elapsed == nil {
		cfg.Elapsed = sinceStart
	}
	if cfg.PruneInterval <= 0 {
		cfg.PruneInterval = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &AccessLog{store: store, cfg: cfg, space: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// Record queues a read for the log and stamps its time, each value it
// names cut to MaxFieldLength bytes (cutAccessValue). It returns at
// once unless MaxQueued records are waiting; then it waits for the next
// write, or for ctx. It refuses with an error wrapping
// ErrAccessUnwritten, queuing nothing, while the oldest record not yet
// written has waited longer than MaxUnwritten, and with CheckRecordClock's
// error while that refuses Now: the read is then not to be answered, as
// one whose wait for room ends with ctx. A record is stamped with Now, or
// with the latest time this log stamped one with if Now is earlier (the
// clock stepped back since): a read is never dated earlier than one
// before it, so a step back does not age it toward the prune.
func (l *AccessLog) Record(ctx context.Context, a Access) error {
	for {
		l.mu.Lock()
		elapsed := l.cfg.Elapsed()
		if waited := l.unwrittenFor(elapsed); waited > l.cfg.MaxUnwritten {
			l.mu.Unlock()
			return fmt.Errorf("%w: the oldest has waited %s", ErrAccessUnwritten, waited.Round(time.Millisecond))
		}
		if len(l.queued) < l.cfg.MaxQueued {
			now := l.cfg.Now().UTC()
			if l.cfg.CheckRecordClock != nil {
				if err := l.cfg.CheckRecordClock(ctx, now); err != nil {
					l.mu.Unlock()
					return fmt.Errorf("record a read: %w", err)
				}
			}
			a.Cut()
			// Stamped under the lock, never earlier than the record before:
			// the log stays in time order.
			if now.Before(l.lastAt) {
				now = l.lastAt
			}
			a.At, l.lastAt = now, now
			if len(l.queued) == 0 {
				l.queuedSince = elapsed
			}
			l.queued = append(l.queued, a)
			n := len(l.queued)
			l.mu.Unlock()
			if n >= l.cfg.Batch {
				select {
				case l.wake <- struct{}{}:
				default:
				}
			}
			return nil
		}
		space := l.space
		l.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return fmt.Errorf("access log full: %w", ctx.Err())
		}
	}
}

// unwrittenFor is how long the oldest record not yet written, queued or
// taken by a write, has waited at elapsed (by Elapsed); 0 when there is
// none. l.mu is held.
func (l *AccessLog) unwrittenFor(elapsed time.Duration) time.Duration {
	switch {
	case l.writingAny:
		return elapsed - l.writingSince // taken before any queued now
	case len(l.queued) > 0:
		return elapsed - l.queuedSince
	}
	return 0
}

// Flush writes every queued record in one transaction. On an error the
// records stay queued, in order, for the next write.
func (l *AccessLog) Flush(ctx context.Context) error {
	l.writing.Lock()
	defer l.writing.Unlock()
	l.mu.Lock()
	recs := l.queued
	l.queued = nil
	if len(recs) > 0 {
		l.writingSince, l.writingAny = l.queuedSince, true
	}
	l.mu.Unlock()
	if len(recs) == 0 {
		return nil
	}
	bodies := make([][]byte, len(recs))
	for i := range recs {
		b, err := json.Marshal(&recs[i])
		if err != nil {
			l.mu.Lock()
			l.writingAny = false
			l.mu.Unlock()
			return fmt.Errorf("access record: %w", err)
		}
		bodies[i] = b
	}
	keep := l.cfg.Retention
	if keep.Months <= 0 && keep.Days <= 0 {
		keep = accessObjectKeep
	}
	retain := keep.After(recs[0].At)
	queuedAt := l.cfg.Now()
	err := l.store.Update(ctx, func(tx Tx) error {
		var first, last uint64
		n := 0
		// The object's bytes as the records are written, hashed for the
		// uploader to check (enqueueAccess).
		sum := sha256.New()
		var line []byte
		for i := range recs {
			seq, err := tx.AppendAccess(recs[i].At, bodies[i])
			if err != nil {
				return err
			}
			if n > 0 && (seq != last+1 || n == maxAccessObject) {
				if err := enqueueAccess(tx, first, last, sum.Sum(nil), retain, queuedAt); err != nil {
					return err
				}
				n = 0
				sum.Reset()
			}
			if n == 0 {
				first = seq
			}
			if line, err = appendAccessLine(line[:0], seq, recs[i].At, bodies[i]); err != nil {
				return err
			}
			sum.Write(line)
			last = seq
			n++
		}
		return enqueueAccess(tx, first, last, sum.Sum(nil), retain, queuedAt)
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writingAny = false
	if err != nil {
		l.queued = append(recs, l.queued...)
		l.queuedSince = l.writingSince
		return fmt.Errorf("write %d access records: %w", len(recs), err)
	}
	close(l.space)
	l.space = make(chan struct{})
	if l.cfg.Wake != nil {
		l.cfg.Wake()
	}
	return nil
}

// ObjectAccess is the object kind of a batch of access records.
const ObjectAccess = "access"

// accessPrefix starts the key of every access-record object.
const accessPrefix = "access/"

// maxAccessObject is the most records one access object holds: a write of
// more queues several objects.
const maxAccessObject = 1000

// accessObjectKeep is how long an access object is retained when the log
// keeps its records for ever (no Retention).
var accessObjectKeep = retention.Period{Months: 12}

// AccessKey is the object key of the access records first to last: the
// numbers zero-padded, so that keys sort by them.
func AccessKey(first, last uint64) string {
	return fmt.Sprintf("%s%020d-%020d.jsonl", accessPrefix, first, last)
}

// accessKeyOfBytes is the key of the object of access records first to
// last whose bytes have hex SHA-256 sum, where their AccessKey holds
// other bytes: after the row store was put back to an older copy, its
// access log numbers reads again that a batch in write-once storage
// already holds. The key names the bytes, so no other batch takes it, and
// the same batch put again lands on it.
func accessKeyOfBytes(first, last uint64, sum string) string {
	return fmt.Sprintf("%s%020d-%020d-%s.jsonl", accessPrefix, first, last, sum)
}

// accessRange parses an access object's key or outbox ref ("first-last").
func accessRange(s string) (first, last uint64, ok bool) {
	first, last, _, ok = parseAccessKey(s)
	return first, last, ok
}

// parseAccessKey parses an access object's key (AccessKey, or
// accessKeyOfBytes, whose hash it returns too) or outbox ref.
func parseAccessKey(s string) (first, last uint64, sum string, ok bool) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, accessPrefix), ".jsonl")
	parts := strings.Split(s, "-")
	switch {
	case len(parts) == 3 && len(parts[2]) == 2*sha256.Size && strings.Trim(parts[2], "0123456789abcdef") == "":
		sum = parts[2]
	case len(parts) != 2:
		return 0, 0, "", false
	}
	first, err1 := strconv.ParseUint(parts[0], 10, 64)
	last, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || first == 0 || last < first || last-first >= maxAccessObject {
		return 0, 0, "", false
	}
	return first, last, sum, true
}

// enqueueAccess queues the object of access records first to last, which
// the same transaction appended with no other record between them, and
// whose bytes (accessObjectBody) have SHA-256 sum as written: the
// uploader reads them from the row store and puts them, create-only, only
// when they still hash to sum, so the records stand in write-once storage
// as they were written (docs/design/034-access-log-anchored.md).
func enqueueAccess(tx Tx, first, last uint64, sum []byte, retain, at time.Time) error {
	return tx.Enqueue(OutboxEntry{Kind: ObjectAccess, Ref: fmt.Sprintf("%d-%d", first, last), Key: AccessKey(first, last), RetainUntil: retain, SHA256: hex.EncodeToString(sum)}, at)
}

// accessLine is one record of an access object: its number, when it was
// written and its stored body, byte for byte (a JSON string).
type accessLine struct {
	Seq  uint64    `json:"seq"`
	At   time.Time `json:"at"`
	Body string    `json:"body"`
}

// accessObjectBody reads access records first to last from tx and returns
// the object that holds them: one JSON line each, in order. Records
// missing from the row store are an error wrapping ErrNotFound.
func accessObjectBody(tx Tx, first, last uint64) ([]byte, error) {
	recs, err := tx.AccessLog(first-1, int(last-first+1))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for i, want := 0, first; want <= last; i, want = i+1, want+1 {
		if i >= len(recs) || recs[i].Seq != want {
			return nil, fmt.Errorf("access record %d: %w", want, ErrNotFound)
		}
		if !utf8.Valid(recs[i].Body) {
			return nil, fmt.Errorf("access record %d is not UTF-8: %w", want, errUnknownEntry)
		}
		line, err := appendAccessLine(nil, want, recs[i].At, recs[i].Body)
		if err != nil {
			return nil, err
		}
		buf.Write(line)
	}
	return buf.Bytes(), nil
}

// appendAccessLine appends to b access record seq's line of its object,
// newline included.
func appendAccessLine(b []byte, seq uint64, at time.Time, body []byte) ([]byte, error) {
	line, err := json.Marshal(accessLine{Seq: seq, At: at.UTC(), Body: string(body)})
	if err != nil {
		return b, err
	}
	return append(append(b, line...), '\n'), nil
}

// parseAccessObject reads the records of an access object.
func parseAccessObject(b []byte) ([]accessLine, error) {
	var out []accessLine
	for n, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var a accessLine
		if err := json.Unmarshal(line, &a); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Run writes queued records every FlushInterval, or as soon as a batch is
// ready, and removes records past the retention at start and every
// PruneInterval, until ctx is done; then it writes what is left (with
// its own deadline) and returns.
func (l *AccessLog) Run(ctx context.Context) error {
	flush := time.NewTicker(l.cfg.FlushInterval)
	defer flush.Stop()
	prune := time.NewTicker(l.cfg.PruneInterval)
	defer prune.Stop()
	l.pruneLogged(ctx)
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			err := l.Flush(fctx)
			if err != nil {
				l.cfg.Logger.ErrorContext(fctx, "access log: records not written at shutdown", slog.Int("records", l.Queued()), slog.String("error", err.Error()))
			}
			return err
		case <-flush.C:
		case <-l.wake:
		case <-prune.C:
			l.pruneLogged(ctx)
			continue
		}
		if err := l.Flush(ctx); err != nil && !errors.Is(err, context.Canceled) {
			l.cfg.Logger.WarnContext(ctx, "access log: write failed; records kept in memory and retried", slog.Int("records", l.Queued()), slog.String("error", err.Error()))
		}
	}
}

// Queued is the number of records waiting to be written.
func (l *AccessLog) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queued)
}

func (l *AccessLog) pruneLogged(ctx context.Context) {
	n, err := l.Prune(ctx)
	switch {
	case (errors.Is(err, ErrClockAhead) || errors.Is(err, ErrClockUnread)) && ctx.Err() == nil:
		l.cfg.Logger.ErrorContext(ctx, "access log: nothing pruned; the ledger's clock could not be trusted, and records past the retention wait for a prune whose clock agrees with the reference clocks", slog.String("error", err.Error()))
	case err != nil && ctx.Err() == nil:
		l.cfg.Logger.WarnContext(ctx, "access log: pruning failed; retried later", slog.String("error", err.Error()))
	case n > 0:
		l.cfg.Logger.InfoContext(ctx, "access log: removed records past the retention", slog.Int("records", n), slog.String("retention", l.cfg.Retention.String()))
	}
}

// Prune removes the records older than the retention, in batches, and
// returns how many it removed. With no retention it removes nothing.
// First it checks its clock (AccessLogConfig.CheckClock): when the check
// fails it removes nothing and returns the check's error (a
// *ClockAheadError, or one wrapping ErrClockUnread).
// It keeps the records of a batch not yet put in write-once storage,
// queued or given up (unputAccess): the batch is put from them.
func (l *AccessLog) Prune(ctx context.Context) (int, error) {
	p := l.cfg.Retention
	if p.Months <= 0 && p.Days <= 0 {
		return 0, nil
	}
	now := l.cfg.Now().UTC()
	if l.cfg.CheckClock != nil {
		if err := l.cfg.CheckClock(ctx, now); err != nil {
			return 0, fmt.Errorf("prune access log: %w", err)
		}
	}
	cutoff := now.AddDate(0, -p.Months, -p.Days)
	total := 0
	for {
		var n int
		err := l.store.Update(ctx, func(tx Tx) error {
			keep, err := unputAccess(tx)
			if err != nil {
				return err
			}
			n, err = tx.PruneAccess(cutoff, keep, pruneBatch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("prune access log: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

// AccessPage is one page of the access log.
type AccessPage struct {
	Records []Access
	// Next continues the listing: its After and Before; a zero After
	// means the listing is complete.
	Next AccessQuery
}

// List writes what is queued, then returns the records q selects in the
// order of their numbers, and the query for the next page. It reads at
// most maxAccessScan records per call.
func (l *AccessLog) List(ctx context.Context, q AccessQuery) (AccessPage, error) {
	return l.ListWithin(ctx, q, 0, nil)
}

// ListWithin is List with a page that also ends before the record that
// would take the sizes of its records, as size measures them, past budget:
// the page holds at least one record, and its Next continues after its
// last record. A budget of 0 bounds nothing.
func (l *AccessLog) ListWithin(ctx context.Context, q AccessQuery, budget int, size func(*Access) int) (AccessPage, error) {
	switch {
	case q.Limit < 0 || q.Limit > maxAccessPage:
		return AccessPage{}, invalid("pageSize must be between 1 and %d", maxAccessPage)
	case q.Limit == 0:
		q.Limit = 100
	}
	if q.Before.IsZero() {
		q.Before = l.cfg.Now().UTC()
	}
	if err := l.Flush(ctx); err != nil {
		return AccessPage{}, err
	}
	if q.Through == 0 {
		err := l.store.View(ctx, func(tx Tx) error {
			n, ok := tx.(AccessNumbers)
			if !ok {
				return nil // a store that cannot tell: the listing runs to the end
			}
			var err error
			q.Through, _, err = n.LastAccessSeq()
			return err
		})
		if err != nil {
			return AccessPage{}, fmt.Errorf("read the access log's last number: %w", err)
		}
	}
	var out []Access
	after, scanned, used := q.After, 0, 0
	for len(out) < q.Limit && scanned < maxAccessScan {
		var page []AccessEntry
		err := l.store.View(ctx, func(tx Tx) error {
			var err error
			page, err = tx.AccessLog(after, min(maxAccessPage, maxAccessScan-scanned))
			return err
		})
		if err != nil {
			return AccessPage{}, fmt.Errorf("read access log: %w", err)
		}
		if len(page) == 0 {
			return AccessPage{Records: out}, nil
		}
		for _, e := range page {
			if q.Through != 0 && e.Seq > q.Through {
				return AccessPage{Records: out}, nil
			}
			scanned++
			after = e.Seq
			var a Access
			if err := json.Unmarshal(e.Body, &a); err != nil {
				return AccessPage{}, fmt.Errorf("access record %d: %w", e.Seq, err)
			}
			a.Seq = e.Seq
			if q.match(&a) {
				if budget > 0 {
					if used += size(&a); used > budget && len(out) > 0 {
						// The page ends before a: the next one starts with it.
						next := q
						next.After = out[len(out)-1].Seq
						return AccessPage{Records: out, Next: next}, nil
					}
				}
				out = append(out, a)
				if len(out) == q.Limit {
					break
				}
			}
		}
	}
	next := q
	next.After = after
	return AccessPage{Records: out, Next: next}, nil
}
