package ledger

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pactledger/pactledger/internal/retry"
	"github.com/pactledger/pactledger/verifier"
)

// UploaderConfig tunes RunUploader. The zero value is the default.
type UploaderConfig struct {
	// Batch is how many outbox entries one round takes at most; default
	// 512. After a round that outlasted its claim before it recorded
	// anything, RunUploader's rounds take fewer for a while (roundSize).
	Batch int
	// Workers is how many uploads run at once; default 8.
	Workers int
	// Idle is how long to wait for new rows when the outbox is empty; default 1 s.
	Idle time.Duration
	// Interval is the most often a round starts after one that uploaded
	// less than a full batch: the rows recorded in between share the next
	// round's segment, its S3 put and its commits, instead of a round each
	// few rows. A round that took a full batch is followed at once. Default
	// DefaultUploadInterval; negative: rounds back to back.
	Interval time.Duration
	// MaxBackoff caps the wait after a failed round; default 30 s.
	MaxBackoff time.Duration
	// MaxAttempts is how many consecutive counted failures of one entry
	// move it to the dead letters; default DefaultMaxAttempts. A failure
	// counts only in a round where another upload succeeded, so an outage
	// of the evidence store moves nothing aside: everything waits, in order.
	MaxAttempts int
	// ClaimTTL is how long the entries one round claims stay its own
	// before another uploader on the store may take them; default 5 min.
	// The round's uploads stop when it runs out: the entries are another
	// uploader's to take by then, and the round is tried again.
	ClaimTTL time.Duration
	// DepthEvery is how often the outbox's depth is read for its gauge
	// besides at each round's start, so that the gauge follows the outbox
	// while a round waits on an evidence store that accepts connections
	// and does not answer; default DefaultDepthEvery.
	DepthEvery time.Duration
}

// DefaultDepthEvery is UploaderConfig.DepthEvery by default: a usual
// scrape interval.
const DefaultDepthEvery = 15 * time.Second

// DefaultMaxAttempts is UploaderConfig.MaxAttempts by default.
const DefaultMaxAttempts = 5

// DefaultUploadInterval is UploaderConfig.Interval by default. At 1,000
// rows a second a segment then holds about 250 rows; evidence reaches
// write-once storage at most this much later than back-to-back rounds
// would take it, and it is durable in the row store meanwhile.
const DefaultUploadInterval = 250 * time.Millisecond

func (c UploaderConfig) withDefaults() UploaderConfig {
	if c.Batch <= 0 {
		c.Batch = 512
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = 5 * time.Minute
	}
	if c.Interval == 0 {
		c.Interval = DefaultUploadInterval
	}
	if c.DepthEvery <= 0 {
		c.DepthEvery = DefaultDepthEvery
	}
	return c
}

// MaxSegmentBytes caps one evidence segment object.
const MaxSegmentBytes = 32 << 20

// MinRetention is the retention an object gets when its own retain-until is
// already past (or due within seconds): S3 refuses a retain-until in the
// past, which a receipt posted after its class's period (or an incident
// opened long after the action) would otherwise ask for.
const MinRetention = 24 * time.Hour

// RunUploader drains the outbox into evidence storage until ctx is done.
// Each round packs the row bundles due the same UTC day into one segment
// object (retained until the end of that day), puts JWKS snapshots and
// incident evidence as objects of their own, then removes the entries from
// the outbox together with their recorded locations. Failures are retried
// with exponential backoff; nothing leaves the outbox before the store has
// it, except an entry that cannot succeed, which moves to the dead letters
// (see UploadRound). Each round claims its entries for ClaimTTL under this
// ledger's holder name, so uploaders of several ledgers on one store do
// not take the same entries; a claim left by a stopped uploader runs out
// and the entries are taken again. Under a steady load rounds start once
// every Interval, each taking what was recorded since the last.
func (l *Ledger) RunUploader(ctx context.Context, cfg UploaderConfig) error {
	cfg = cfg.withDefaults()
	if l.cfg.Metrics != nil {
		ctx, stop := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			l.watchDepth(ctx, cfg.DepthEvery)
		}()
		defer func() { stop(); <-watched }()
	}
	size := roundSize{batch: cfg.Batch, now: cfg.Batch}
	last := size.now // the size of the round that just ran
	full := func(n int) bool { return n >= last }
	round := func(ctx context.Context) (int, error) {
		c := cfg
		c.Batch, last = size.now, size.now
		n, err := l.uploadRound(ctx, c)
		switch size.after(n, err) {
		case -1:
			l.cfg.Logger.WarnContext(ctx, "upload rounds outlast their claim on their entries: the next rounds claim fewer",
				slog.Int("next", size.now), slog.Duration("claim_ttl", cfg.ClaimTTL))
		case 1:
			l.cfg.Logger.InfoContext(ctx, "upload rounds claim more entries again", slog.Int("next", size.now), slog.Int("batch", cfg.Batch))
		}
		return n, err
	}
	retry.Drain(ctx, retry.Config{Idle: cfg.Idle, MaxBackoff: cfg.MaxBackoff, Every: cfg.Interval, Full: full}, l.notify,
		round,
		func(err error, wait time.Duration) {
			level := slog.LevelWarn
			if errors.Is(err, ErrStarting) {
				level = slog.LevelDebug // the bucket's check as ledgerd starts logs its own failures
			}
			l.cfg.Logger.Log(ctx, level, "evidence upload failed; will retry", slog.String("error", err.Error()), slog.Duration("retry_in", wait))
		})
	return nil
}

// OutboxEmptier is a store transaction whose count of the outbox reads
// every entry (PostgreSQL's count), where an S3 outage grows the outbox
// without bound: it says whether the outbox is empty without counting.
// Upload rounds then ask that alone, and leave the depth's gauge to its
// watch (watchDepth, every DepthEvery).
type OutboxEmptier interface {
	OutboxEmpty() (bool, error)
}

// outboxEmpty reports whether tx's outbox holds no entry.
func outboxEmpty(tx Tx) (bool, error) {
	if e, ok := tx.(OutboxEmptier); ok {
		return e.OutboxEmpty()
	}
	n, err := tx.OutboxDepth()
	return n == 0, err
}

// watchDepth sets the outbox's gauge every interval until ctx is done.
// The rounds set it as they start; a round can wait minutes on a bucket
// that takes connections and does not answer (until its claim runs out),
// while rows go on being recorded, and the gauge is how an operator sees
// the outbox grow. A failed read leaves the gauge as it was: the row
// store's own errors say why.
func (l *Ledger) watchDepth(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n, err := l.OutboxDepth(ctx); err == nil {
			l.cfg.Metrics.depth(n)
		}
	}
}

// upload is one object to put: a single entry, or a segment of entries.
type upload struct {
	key     string
	retain  time.Time
	entries []OutboxEntry
	bodies  [][]byte
	segment bool
}

// segmentEnd is the retain-until of a segment holding objects due at t:
// the end of t's span (a UTC day by default).
func segmentEnd(t time.Time, span time.Duration) time.Time {
	d := t.UTC().Truncate(span)
	if d.Equal(t.UTC()) {
		return d
	}
	return d.Add(span)
}

// SegmentKey is the object key of the segment holding outbox entries
// first..last that are due on day. It is fixed when the segment is planned
// (see SegmentPlan), before the put, and never recomputed.
func SegmentKey(day time.Time, first, last uint64) string {
	name := day.UTC().Format("2006-01-02")
	if !day.Equal(day.Truncate(24 * time.Hour)) {
		name = day.UTC().Format("2006-01-02T150405Z")
	}
	return "segments/" + name + "/" + strconv.FormatUint(first, 10) + "-" + strconv.FormatUint(last, 10) + ".seg"
}

// segmentHeader starts every segment object. Each row follows as
// "<row id> <length>\n", its bundle bytes, and "\n".
const segmentHeader = "pactledger-segment v1\n"

// errUnknownEntry: an outbox entry of a kind or operation this version does
// not know; it can never succeed.
var errUnknownEntry = errors.New("unknown outbox entry")

// errEdited: the bytes an outbox entry would put are not those the ledger
// wrote (a row's evidence bundle that does not hash to the row's
// write-time hash, access records that do not hash to what they hashed to
// when queued): they were edited in the row store before the upload, and
// are never put in write-once storage.
var errEdited = errors.New("edited in the row store before its upload")

// permanent reports whether err dooms the entry it names whatever the
// retries: its bytes or its object are missing, its bytes were edited, it
// is of an unknown kind, or another object holds its key in write-once
// storage.
func permanent(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, errUnknownEntry) || errors.Is(err, ErrObjectExists) || errors.Is(err, errEdited)
}

// failure is an outbox entry (or a segment's entries) that failed, with why.
type failure struct {
	entries []OutboxEntry
	plan    string // the segment plan they belong to, if any
	err     error
}

// UploadRound claims and uploads up to batch outbox entries and returns how many left
// the outbox (uploaded, or moved to the dead letters). It returns an error
// when an upload failed and will be retried.
//
// Segments are planned before they are put: their key and members are
// recorded in the store first, and a plan is re-put as it is until its
// members are recorded as uploaded, so a put whose recording was lost (a
// crash, a failed commit) is repeated under the same key and leaves no
// orphan object.
//
// An entry that cannot succeed moves to the dead letters at once: its
// bytes are missing, an operation names an object never uploaded and with
// no put queued, its kind is unknown, or write-once storage holds other
// bytes under its key. Any other failure of an entry counts as an attempt
// when another upload of the same round succeeded; DefaultMaxAttempts
// consecutive attempts move it aside too. Operations on one object keep their order; one failing never
// holds back the others. An extension of a row's bundle packed in a
// segment puts the bundle as an object of its own instead of extending
// the segment (copyOut).
func (l *Ledger) UploadRound(ctx context.Context, batch, workers int) (int, error) {
	return l.uploadRound(ctx, UploaderConfig{Batch: batch, Workers: workers}.withDefaults())
}

// claim claims up to cfg.Batch outbox entries for this ledger, so that
// several uploaders on one store share the outbox out. An empty outbox is
// seen without a write.
func (l *Ledger) claim(ctx context.Context, cfg UploaderConfig) ([]OutboxEntry, error) {
	var empty bool
	if err := l.store.View(ctx, func(tx Tx) error {
		var err error
		empty, err = outboxEmpty(tx)
		return err
	}); err != nil || empty {
		return nil, err
	}
	var entries []OutboxEntry
	err := l.store.Update(ctx, func(tx Tx) error {
		var err error
		entries, err = tx.Claim(cfg.Batch, l.cfg.Leases.Holder, cfg.ClaimTTL)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox entries: %w", err)
	}
	return entries, nil
}

// claimEntries claims the outbox entries seqs for this ledger where no
// other holder has a live claim on them, and returns those it claimed.
func (l *Ledger) claimEntries(ctx context.Context, seqs []uint64, cfg UploaderConfig) ([]OutboxEntry, error) {
	var got []OutboxEntry
	err := l.store.Update(ctx, func(tx Tx) error {
		var err error
		got, err = tx.ClaimEntries(seqs, l.cfg.Leases.Holder, cfg.ClaimTTL)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim the puts operations wait on: %w", err)
	}
	return got, nil
}

// mergeEntries returns a and b's entries in Seq order, each once.
func mergeEntries(a, b []OutboxEntry) []OutboxEntry {
	out := slices.Concat(a, b)
	slices.SortFunc(out, func(x, y OutboxEntry) int { return cmp.Compare(x.Seq, y.Seq) })
	return slices.CompactFunc(out, func(x, y OutboxEntry) bool { return x.Seq == y.Seq })
}

// errClaimRanOut: an upload stopped because the round's claim on its
// entries ran out. It is not the entry's fault and is not counted against
// it.
var errClaimRanOut = errors.New("the upload round's claim on its entries ran out")

// ownPlans splits the recorded segment plans for a round that claimed
// entries. A plan none of whose members is queued any more is stale: its
// members left with another plan that overlapped it, which a round whose
// claim ran out could record before HoldsClaim, and putting it would only
// leave an object no row names; the round drops it. The round re-puts the others that have a
// member among its entries, or whose key an operation among its entries
// waits on (the operation would otherwise wait for good where the round's
// claim keeps taking it and not the plan's members: bbolt claims the
// first entries, PostgreSQL a holder's own claims again). A plan whose
// members are queued under another round's claim is that round's to put:
// on a store shared by replicas each would put every plan otherwise, and
// wait on each stalled one.
func ownPlans(tx Tx, recorded []SegmentPlan, entries []OutboxEntry) (own []SegmentPlan, stale []string, err error) {
	mine := make(map[uint64]bool, len(entries))
	waits := map[string]bool{}
	for _, e := range entries {
		mine[e.Seq] = true
		if e.Op != "" {
			waits[e.Key] = true
		}
	}
	claimed := func(p SegmentPlan) bool {
		return slices.ContainsFunc(p.Entries, func(m OutboxEntry) bool { return mine[m.Seq] })
	}
	var others []uint64 // the members of the plans with none of the round's entries
	for _, p := range recorded {
		if !claimed(p) {
			for _, m := range p.Entries {
				others = append(others, m.Seq)
			}
		}
	}
	if len(others) == 0 {
		return recorded, nil, nil
	}
	slices.Sort(others)
	queued, err := tx.Queued(slices.Compact(others))
	if err != nil {
		return nil, nil, err
	}
	for _, p := range recorded {
		switch {
		case claimed(p):
			own = append(own, p)
		case !slices.ContainsFunc(p.Entries, func(m OutboxEntry) bool { _, found := slices.BinarySearch(queued, m.Seq); return found }):
			stale = append(stale, p.Key)
		case slices.ContainsFunc(p.Entries, func(m OutboxEntry) bool { return waits[m.Key] }):
			own = append(own, p)
		}
	}
	return own, stale, nil
}

// outlasted is the error of a round whose claim ran out (or that the
// store found no longer held it) before it recorded its segment plans: it
// made no progress, and with as many entries the next round would likely
// fare no better.
type outlasted struct {
	claimed int // entries the round claimed
	err     error
}

func (e *outlasted) Error() string { return e.err.Error() }
func (e *outlasted) Unwrap() error { return e.err }

// roundSize is how many entries the uploader's rounds claim. A round that
// outlasted its claim before recording anything claims the same entries
// again next time, and outlasts it again when the cause stays (a slow row
// store, a claim set short for the batch): the next round claims half as
// many as it did, down to one. After growAfter rounds in a row that
// uploaded every entry of a full round, the size doubles again, up to the
// configured batch, so that a passing slowness costs little for long and
// a lasting one a failed round in growAfter+1.
type roundSize struct {
	batch, now, good int
}

const growAfter = 8

// after takes the outcome of a round of s.now entries and reports how the
// size changed: -1 smaller, +1 larger, 0 not.
func (s *roundSize) after(moved int, err error) int {
	var o *outlasted
	switch {
	case errors.As(err, &o):
		s.good = 0
		if next := max(1, min(s.now, o.claimed)/2); o.claimed > 0 && next < s.now {
			s.now = next
			return -1
		}
	case err == nil && moved >= s.now && s.now < s.batch:
		if s.good++; s.good >= growAfter {
			s.good = 0
			s.now = min(s.batch, 2*s.now)
			return 1
		}
	default: // a failure, or a round short of the size
		s.good = 0
	}
	return 0
}

// roundRead is what a round reads of the row store before it puts
// anything.
type roundRead struct {
	depth, deadN int
	plans        []SegmentPlan // recorded plans the round re-puts
	puts         []OutboxEntry // entries to put that no plan holds yet
	ops          []OutboxEntry // operations whose object is stored
	locs         map[uint64]Location
	bodies       map[uint64][]byte
	doomed       []failure     // found doomed while reading
	moot         []OutboxEntry // extensions and releases of snapshots dropped since they were queued
	stillHeld    []OutboxEntry // releases of objects an open incident holds (again)
	stale        []string      // recorded plans to drop unput
	pull         []uint64      // queued puts beyond the round that its operations wait on
	waits        int           // those operations
}

// readRound reads in tx what a round that claimed entries does: the
// recorded plans it re-puts and those it drops, its puts and their bodies,
// the operations it applies and those that wait, and what cannot succeed.
func readRound(tx Tx, entries []OutboxEntry) (roundRead, error) {
	var r roundRead
	r.locs, r.bodies = map[uint64]Location{}, map[uint64][]byte{}
	var err error
	r.depth = -1
	if _, costly := tx.(OutboxEmptier); !costly {
		if r.depth, err = tx.OutboxDepth(); err != nil {
			return r, err
		}
	}
	if r.deadN, err = tx.DeadLetterCount(); err != nil {
		return r, err
	}
	recorded, err := tx.SegmentPlans()
	if err != nil {
		return r, err
	}
	all := recorded
	if recorded, r.stale, err = ownPlans(tx, all, entries); err != nil {
		return r, err
	}
	planned := map[uint64]bool{}
	pending := map[string]bool{} // keys with a put still waiting
	for _, p := range all {
		if slices.Contains(r.stale, p.Key) {
			continue
		}
		for _, m := range p.Entries {
			planned[m.Seq] = true
			pending[m.Key] = true
		}
	}
	// The evidence bundles this round reads, and the rows of those whose
	// entry holds no write-time hash (queued by an older version: the
	// bundle is checked against its row's), in one round trip where the
	// store reads ahead.
	var bundles, rows []string
	bundle := func(e OutboxEntry) {
		bundles = append(bundles, e.Ref)
		if e.SHA256 == "" {
			rows = append(rows, e.Ref)
		}
	}
	for _, p := range recorded {
		for _, m := range p.Entries {
			if m.Kind == ObjectEvidence {
				bundle(m)
			}
		}
	}
	for _, e := range entries {
		if e.Op == "" && e.Kind == ObjectEvidence {
			bundle(e)
		}
	}
	if err := prefetch(tx, Prefetch{Rows: rows, Evidence: bundles}); err != nil {
		return r, err
	}
nextPlan:
	for _, p := range recorded {
		for _, m := range p.Entries {
			b, err := entryBody(tx, m)
			if permanent(err) {
				r.doomed = append(r.doomed, failure{entries: p.Entries, plan: p.Key, err: fmt.Errorf("segment %s: %w", p.Key, err)})
				continue nextPlan
			}
			if err != nil {
				return r, err
			}
			r.bodies[m.Seq] = b
		}
		r.plans = append(r.plans, p)
	}
	for _, e := range entries {
		if e.Op == "" {
			pending[e.Key] = true
		}
	}
	waiting := map[string]bool{} // keys whose earlier operation r.waits
	// Operations whose object has no recorded location, by key, in
	// order: they wait where a put of the object is queued beyond the
	// round, and move to the dead letters otherwise.
	unplaced := map[string][]OutboxEntry{}
	var unplacedKeys []string
	for _, e := range entries {
		if e.Op == "" {
			if planned[e.Seq] {
				continue
			}
			b, err := entryBody(tx, e)
			if permanent(err) {
				r.doomed = append(r.doomed, failure{entries: []OutboxEntry{e}, err: err})
				continue
			}
			if err != nil {
				return r, err
			}
			r.bodies[e.Seq] = b
			r.puts = append(r.puts, e)
			continue
		}
		// An operation waits while its object's put is queued (a put
		// retried from the dead letters may stand behind it) and for
		// the operations on that object before it.
		if pending[e.Key] || waiting[e.Key] {
			waiting[e.Key] = true
			continue
		}
		if earlier, ok := unplaced[e.Key]; ok {
			unplaced[e.Key] = append(earlier, e)
			continue
		}
		if e.Op != OpHold && e.Op != OpRelease && e.Op != OpExtend {
			r.doomed = append(r.doomed, failure{entries: []OutboxEntry{e}, err: fmt.Errorf("operation %q: %w", e.Op, errUnknownEntry)})
			continue
		}
		loc, err := tx.Object(e.Key)
		if errors.Is(err, ErrNotFound) {
			unplaced[e.Key] = []OutboxEntry{e}
			unplacedKeys = append(unplacedKeys, e.Key)
			continue
		}
		if err != nil {
			return r, err
		}
		if e.Op == OpRelease {
			// A release queued when an incident closed, run after another
			// incident held the object again (retried from the dead
			// letters, at the end of the outbox), would undo that hold:
			// it has nothing to do while an incident holds the object.
			holds, err := tx.Count(RefHold, e.Key, 0)
			if err != nil {
				return r, err
			}
			if holds > 0 {
				r.stillHeld = append(r.stillHeld, e)
				continue
			}
		}
		r.locs[e.Seq] = loc
		r.ops = append(r.ops, e)
	}
	if len(unplacedKeys) == 0 {
		return r, nil
	}
	// A put may be queued after the operation, beyond this round
	// (retried from the dead letters after the operation was queued),
	// or claimed by another replica: the operation waits for it, and
	// the round tries to claim it too.
	queued, err := tx.QueuedPuts(unplacedKeys)
	if err != nil {
		return r, err
	}
	has := map[string]bool{}
	for _, p := range queued {
		has[p.Key] = true
		r.pull = append(r.pull, p.Seq)
	}
	for _, key := range unplacedKeys {
		if has[key] {
			r.waits += len(unplaced[key])
			continue
		}
		for _, e := range unplaced[key] {
			// An extension of a snapshot's retention has nothing left to
			// do once the snapshot was dropped, nor has a release: the
			// sweep releases a dropped object no incident holds before it
			// deletes it (deleteObjects). A hold goes to the dead letters.
			if e.Op == OpExtend || e.Op == OpRelease {
				dropped, err := snapshotDropped(tx, e.Key)
				if err != nil {
					return r, err
				}
				if dropped {
					r.moot = append(r.moot, e)
					continue
				}
			}
			r.doomed = append(r.doomed, failure{entries: []OutboxEntry{e}, err: fmt.Errorf("%s %s: its object was never uploaded: %w", e.Op, e.Key, ErrNotFound)})
		}
	}
	return r, nil
}

// snapshotDropped reports whether key is a JWKS snapshot's object whose
// snapshot is no longer stored: a sweep dropped it once no row named it,
// with its object's record, and queued the object's deletion.
func snapshotDropped(tx Tx, key string) (bool, error) {
	id, ok := snapshotIDOf(key)
	if !ok {
		return false, nil
	}
	_, err := tx.Snapshot(id)
	if errors.Is(err, ErrNotFound) {
		return true, nil
	}
	return false, err
}

// uploadRound runs one round and returns how many entries left the
// outbox.
func (l *Ledger) uploadRound(ctx context.Context, cfg UploaderConfig) (int, error) {
	// The claim runs from before it is asked for: the store's clock starts
	// it a little later.
	claimed := time.Now()
	entries, err := l.claim(ctx, cfg)
	if err != nil {
		return 0, err
	}
	// An upload left waiting on a stalled bucket past the claim would hold
	// the round (and this uploader) while the entries are another's.
	putCtx, cancel := context.WithDeadlineCause(ctx, claimed.Add(cfg.ClaimTTL), errClaimRanOut)
	defer cancel()
	var r roundRead
	read := func() error {
		return l.store.View(ctx, func(tx Tx) error {
			var err error
			r, err = readRound(tx, entries)
			return err
		})
	}
	// Operations whose object's put is queued beyond the round wait for
	// it; the round claims those puts too (where no other holder has
	// them) and reads again, so that it puts them: however many such
	// operations come first, each round then makes progress.
	if err := read(); err != nil {
		return 0, err
	}
	if len(r.pull) > 0 {
		more, err := l.claimEntries(ctx, r.pull, cfg)
		if err != nil {
			return 0, err
		}
		l.cfg.Logger.InfoContext(ctx, "operations wait on the puts of their objects, queued later; the round claims those puts",
			slog.Int("operations", r.waits), slog.Int("puts", len(r.pull)), slog.Int("claimed", len(more)))
		if len(more) > 0 {
			entries = mergeEntries(entries, more)
			if err := read(); err != nil {
				return 0, err
			}
		}
	}
	plans, puts, ops, locs, bodies, doomed, stale, deadN := r.plans, r.puts, r.ops, r.locs, r.bodies, r.doomed, r.stale, r.deadN
	if r.depth >= 0 {
		l.cfg.Metrics.depth(r.depth)
	}
	l.cfg.Metrics.deadLetters(deadN)
	if len(plans) == 0 && len(puts) == 0 && len(ops) == 0 && len(doomed) == 0 && len(stale) == 0 && len(r.moot) == 0 && len(r.stillHeld) == 0 {
		return 0, nil
	}

	// Fix the new segments (key and members) before anything is put.
	now := l.cfg.Now()
	for i := range puts {
		if puts[i].RetainUntil.Before(now.Add(5 * time.Second)) {
			puts[i].RetainUntil = now.Add(MinRetention)
		}
	}
	ups := plan(puts, bodies, l.cfg.SegmentSpan)
	var fresh []SegmentPlan
	for _, u := range ups {
		if u.segment {
			fresh = append(fresh, SegmentPlan{Key: u.key, RetainUntil: u.retain, Entries: u.entries})
		}
	}
	for _, p := range plans {
		// The bytes and the key are the plan's; the retain-until is not part
		// of the object's identity, and S3 refuses one already past.
		retain := p.RetainUntil
		if retain.Before(now.Add(5 * time.Second)) {
			retain = now.Add(MinRetention)
		}
		u := &upload{key: p.Key, retain: retain, entries: p.Entries, segment: true}
		for _, m := range p.Entries {
			u.bodies = append(u.bodies, bodies[m.Seq])
		}
		ups = append(ups, u)
	}
	// A claim that ran out while this round read its entries may already
	// be another round's, which plans the same entries into a segment of
	// its own: two plans of overlapping members, one of which would put an
	// object no row names. The entries wait for the next round's claim
	// instead. The uploader's clock is checked before and again in the
	// transaction that records the plans (each time it runs); in it, the
	// store checks that the new plans' members are still queued and this
	// holder's, by its own clock, and keeps them so until it commits.
	var members []uint64
	for _, p := range fresh {
		for _, m := range p.Entries {
			members = append(members, m.Seq)
		}
	}
	ranOut := func() error {
		if took := time.Since(claimed); took > cfg.ClaimTTL {
			return &outlasted{claimed: len(entries), err: fmt.Errorf("the round took %s of its %s claim before recording its plans and dead letters: %w",
				took.Round(time.Millisecond), cfg.ClaimTTL, errClaimRanOut)}
		}
		return nil
	}
	if err := ranOut(); err != nil {
		return 0, err
	}
	moved := 0
	if len(fresh) > 0 || len(doomed) > 0 || len(stale) > 0 {
		err := l.store.Update(ctx, func(tx Tx) error {
			if err := ranOut(); err != nil {
				return err
			}
			if held, err := tx.HoldsClaim(l.cfg.Leases.Holder, members); err != nil {
				return err
			} else if !held {
				return &outlasted{claimed: len(entries), err: fmt.Errorf("the members of this round's %d segment plans are no longer all queued under its claim: %w", len(fresh), errClaimRanOut)}
			}
			if err := moveAside(tx, doomed, nil, now); err != nil {
				return err
			}
			for _, p := range fresh {
				if err := tx.PlanSegment(p); err != nil {
					return err
				}
			}
			for _, key := range stale {
				if err := tx.DropSegmentPlan(key); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("record segment plans: %w", err)
		}
		for _, key := range stale {
			l.cfg.Logger.InfoContext(ctx, "segment plan dropped unput: none of its members is queued any more", slog.String("key", key))
		}
		for _, f := range doomed {
			l.logDead(ctx, f, 1)
			moved += len(f.entries)
		}
		deadN += moved
	}

	type done struct {
		e   OutboxEntry
		loc Location
	}
	var (
		mu       sync.Mutex
		finished []done
		plansOK  []string
		failed   []failure
		wg       sync.WaitGroup
		sem      = make(chan struct{}, cfg.Workers)
	)
	for _, u := range ups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			locs, err := l.put(putCtx, u)
			if errors.Is(err, ErrObjectExists) && !u.segment && u.entries[0].Kind == ObjectAccess {
				locs, err = l.putAccessElsewhere(putCtx, u, err)
			}
			if errors.Is(err, ErrNotFound) {
				// Not the entry's own fault (a store that lost track of
				// what it just refused): worth retrying.
				err = errors.New(err.Error())
			}
			err = claimRanOut(putCtx, err)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				f := failure{entries: u.entries, err: err}
				if u.segment {
					f.plan = u.key
				}
				failed = append(failed, f)
				return
			}
			if u.segment {
				plansOK = append(plansOK, u.key)
			}
			for i, e := range u.entries {
				finished = append(finished, done{e, locs[i]})
			}
		}()
	}
	wg.Wait()
	opsDone, opLocs, opFailed := l.operate(putCtx, ops, locs)
	for i, e := range opsDone {
		finished = append(finished, done{e, opLocs[i]})
	}
	failed = append(failed, opFailed...)

	succeeded := len(plansOK) + len(finished) // any success shows the store answers
	// Operations on dropped snapshots, and releases of objects still
	// held, leave the outbox with the uploads; RecordUploads writes no
	// record for them.
	for _, e := range slices.Concat(r.moot, r.stillHeld) {
		finished = append(finished, done{e, Location{}})
	}
	var deadNow []failure
	var attempts []int
	doomedNow := slices.ContainsFunc(failed, func(f failure) bool { return permanent(f.err) })
	if len(finished) > 0 || doomedNow {
		err := l.store.Update(ctx, func(tx Tx) error {
			deadNow, attempts = nil, nil
			es, locs := make([]OutboxEntry, len(finished)), make([]Location, len(finished))
			for i, d := range finished {
				es[i], locs[i] = d.e, d.loc
			}
			if err := RecordUploads(tx, es, locs); err != nil {
				return err
			}
			for _, k := range plansOK {
				if err := tx.DropSegmentPlan(k); err != nil {
					return err
				}
			}
			// A permanent failure is counted and moved aside; any other is
			// counted when the store answered others in the round and the
			// claim held, else the store may be down or slow and nothing
			// is blamed on the entry.
			var blamed []failure
			for _, f := range failed {
				if permanent(f.err) || succeeded > 0 && !errors.Is(f.err, errClaimRanOut) {
					blamed = append(blamed, f)
				}
			}
			counts, err := countFailures(tx, blamed, now)
			if err != nil {
				return err
			}
			for _, f := range blamed {
				n := 0
				for _, e := range f.entries {
					n = max(n, counts[e.Seq])
				}
				if permanent(f.err) || n >= cfg.MaxAttempts {
					deadNow, attempts = append(deadNow, f), append(attempts, max(n, 1))
				}
			}
			return moveAside(tx, deadNow, counts, now)
		})
		if err != nil {
			return 0, fmt.Errorf("record uploads: %w", err)
		}
		// The row store dropped these bundles: keep the recent ones at hand
		// for readers, as write-once storage now holds them.
		for _, d := range finished {
			if b := bodies[d.e.Seq]; d.e.Op == "" && d.e.Kind == ObjectEvidence && len(b) > 0 {
				l.recent.put(d.e.Ref, b)
			}
		}
	}
	var errs []error
	for _, f := range failed {
		if !slices.ContainsFunc(deadNow, func(d failure) bool { return d.entries[0].Seq == f.entries[0].Seq }) {
			errs = append(errs, f.err)
		}
	}
	for i, f := range deadNow {
		l.logDead(ctx, f, attempts[i])
		moved += len(f.entries)
		deadN += len(f.entries)
	}
	for _, e := range r.moot {
		l.cfg.Logger.InfoContext(ctx, "operation dropped: its snapshot was swept and its object's deletion is queued", slog.String("op", e.Op), slog.String("key", e.Key))
	}
	for _, e := range r.stillHeld {
		l.cfg.Logger.InfoContext(ctx, "release dropped: an open incident holds the object", slog.String("key", e.Key), slog.Uint64("seq", e.Seq))
	}
	l.cfg.Metrics.uploaded("ok", len(finished)-len(r.moot)-len(r.stillHeld))
	l.cfg.Metrics.uploaded("moot", len(r.moot)+len(r.stillHeld))
	l.cfg.Metrics.uploaded("error", len(failed)-len(deadNow))
	l.cfg.Metrics.uploaded("dead", moved)
	if r.depth >= 0 {
		l.cfg.Metrics.depth(r.depth - len(finished) - moved)
	}
	l.cfg.Metrics.deadLetters(deadN)
	return len(finished) + moved, errors.Join(errs...)
}

// byEntry is the entries of failures fs, each with its failure, in the
// order of their seqs. A round's writes take entries in that order, as
// Claim, HoldsClaim and RecordUploads do: two uploaders' rounds writing
// the records of the same entries (one of them past its claim) then lock
// them in the same order on a shared store instead of deadlocking.
func byEntry(fs []failure) []entryFailure {
	var es []entryFailure
	for i := range fs {
		for _, e := range fs[i].entries {
			es = append(es, entryFailure{e, &fs[i]})
		}
	}
	slices.SortStableFunc(es, func(a, b entryFailure) int { return cmp.Compare(a.e.Seq, b.e.Seq) })
	return es
}

type entryFailure struct {
	e OutboxEntry
	f *failure
}

// countFailures counts one more attempt of every entry of fs, in the
// order of their seqs, and returns each entry's attempts so far.
func countFailures(tx Tx, fs []failure, at time.Time) (map[uint64]int, error) {
	counts := map[uint64]int{}
	for _, ef := range byEntry(fs) {
		rec, err := CountFailure(tx, ef.e.Seq, ef.f.err.Error(), at)
		if err != nil {
			return nil, err
		}
		counts[ef.e.Seq] = rec.Attempts
	}
	return counts, nil
}

// moveAside moves the entries of failures fs to the dead letters, in the
// order of their seqs, and drops the segment plans they were in. counts
// holds the attempts counted for them this round (countFailures); an
// entry without one is counted here first.
func moveAside(tx Tx, fs []failure, counts map[uint64]int, at time.Time) error {
	for _, ef := range byEntry(fs) {
		if _, ok := counts[ef.e.Seq]; !ok {
			if _, err := CountFailure(tx, ef.e.Seq, ef.f.err.Error(), at); err != nil {
				return err
			}
		}
		if err := MoveToDeadLetters(tx, ef.e, ef.f.err.Error(), at); err != nil {
			return err
		}
	}
	for _, f := range fs {
		if f.plan != "" {
			if err := tx.DropSegmentPlan(f.plan); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *Ledger) logDead(ctx context.Context, f failure, attempts int) {
	level, msg := slog.LevelWarn, "outbox entry moved to the dead letters; `ledgerctl outbox` lists it"
	if errors.Is(f.err, errEdited) {
		level, msg = slog.LevelError, "outbox entry moved to the dead letters: its bytes in the row store are not those the ledger wrote, and are not put in write-once storage; `ledgerctl outbox` lists it"
	}
	l.cfg.Logger.Log(ctx, level, msg,
		slog.String("key", f.entries[0].Key), slog.Uint64("seq", f.entries[0].Seq), slog.Int("entries", len(f.entries)),
		slog.Int("attempts", attempts), slog.String("reason", f.err.Error()))
}

// operate applies legal holds, releases and retention extensions to stored
// objects, in outbox order for each object. It returns the operations done
// with the location each leaves its object in, and the failed ones; an
// operation after a failed one on the same object waits for the next round.
// An extension of a row's bundle packed in a segment, past the segment's
// retain-until, does not extend the segment: see copyOut.
func (l *Ledger) operate(ctx context.Context, entries []OutboxEntry, locs map[uint64]Location) ([]OutboxEntry, []Location, []failure) {
	var done []OutboxEntry
	var doneLocs []Location
	var failed []failure
	current := map[string]Location{} // each object's location as the round changes it
	blocked := map[string]bool{}
	for _, e := range entries {
		if blocked[e.Key] {
			continue
		}
		loc, ok := current[e.Key]
		if !ok {
			loc = locs[e.Seq]
		}
		var err error
		switch e.Op {
		case OpHold, OpRelease:
			if err = l.objects.SetLegalHold(ctx, loc, e.Op == OpHold); err == nil {
				loc.LegalHold = e.Op == OpHold
			}
		case OpExtend:
			if loc.Length > 0 && e.RetainUntil.After(loc.RetainUntil) {
				loc, err = l.copyOut(ctx, e, loc)
			} else if err = l.objects.ExtendRetention(ctx, loc, e.RetainUntil); err == nil && e.RetainUntil.After(loc.RetainUntil) {
				loc.RetainUntil = e.RetainUntil
			}
		}
		if err = claimRanOut(ctx, err); err != nil {
			failed = append(failed, failure{entries: []OutboxEntry{e}, err: fmt.Errorf("%s %s: %w", e.Op, e.Key, err)})
			blocked[e.Key] = true // keep the order: later operations on it wait
			continue
		}
		current[e.Key] = loc
		for i := range done {
			if done[i].Key == e.Key {
				doneLocs[i] = loc
			}
		}
		done = append(done, e)
		doneLocs = append(doneLocs, loc)
	}
	return done, doneLocs, failed
}

// copyOut puts the bundle at from, a row's part of a segment, as an object
// of its own under e's key (EvidenceKey), retained until e.RetainUntil,
// and returns its location. The segment holds other rows' bundles, due
// the day it is retained until: extending it would keep them in
// write-once storage as long as this row (an incident's hold, a dispute),
// where they must go at their own dates. The segment is left as it is,
// and RecordUploads counts the row out of it once the copy is recorded.
// The put is create-only and the same bytes put again are success, so a
// copy whose recording was lost is put again and found.
func (l *Ledger) copyOut(ctx context.Context, e OutboxEntry, from Location) (Location, error) {
	body, err := l.readObject(ctx, from)
	if err != nil {
		return from, fmt.Errorf("read the bundle in segment %s: %w", from.Key, err)
	}
	retain := e.RetainUntil
	if now := l.cfg.Now(); retain.Before(now.Add(5 * time.Second)) {
		retain = now.Add(MinRetention)
	}
	loc, err := l.objects.Put(ctx, e.Key, body, retain)
	if errors.Is(err, ErrNotFound) {
		// A store that lost track of what it just refused: worth
		// retrying, as for any put.
		err = errors.New(err.Error())
	}
	if err != nil {
		return from, fmt.Errorf("copy the bundle out of segment %s: %w", from.Key, err)
	}
	loc.Uploaded = true
	return loc, nil
}

// claimRanOut marks err as errClaimRanOut when the round's claim ran out
// while the call waited.
func claimRanOut(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errClaimRanOut) {
		return fmt.Errorf("%w: %w", errClaimRanOut, err)
	}
	return err
}

// entryBody returns the bytes outbox entry e puts, read from tx. A row's
// evidence bundle must hash to its row's write-time hash, and a batch of
// access records to the hash its entry recorded when it was queued (where
// it recorded one): bytes edited in the row store before their upload
// are an error wrapping errEdited, and are not put.
func entryBody(tx Tx, e OutboxEntry) ([]byte, error) {
	var b []byte
	var err error
	switch e.Kind {
	case ObjectEvidence:
		if b, err = tx.Evidence(e.Ref); err == nil {
			err = bundleAsWritten(tx, e, b)
		}
	case ObjectJWKS:
		var s verifier.Snapshot
		s, err = tx.Snapshot(e.Ref)
		b = s.Body
	case ObjectDrill:
		b, err = tx.Drill(e.Ref)
	case ObjectAccess:
		first, last, ok := accessRange(e.Ref)
		if !ok {
			return nil, fmt.Errorf("outbox entry %d: access records %q: %w", e.Seq, e.Ref, errUnknownEntry)
		}
		if b, err = accessObjectBody(tx, first, last); err == nil && e.SHA256 != "" {
			if got := sha256Hex(b); got != e.SHA256 {
				err = fmt.Errorf("access records %d–%d hash to %s, not the %s they hashed to when they were written: %w", first, last, got, e.SHA256, errEdited)
			}
		}
	default:
		return nil, fmt.Errorf("outbox entry %d: kind %q: %w", e.Seq, e.Kind, errUnknownEntry)
	}
	if err != nil {
		return nil, fmt.Errorf("bytes of %s (%s %s): %w", e.Key, e.Kind, e.Ref, err)
	}
	return b, nil
}

// bundleAsWritten checks evidence bundle b of e's row against the row's
// write-time hash (the hash its leaf logs too): the one e keeps, or, in
// an entry queued before entries kept it, the row's.
func bundleAsWritten(tx Tx, e OutboxEntry, b []byte) error {
	want := e.SHA256
	if want == "" {
		r, err := tx.Row(e.Ref)
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("row %s is not in the row store, so its evidence cannot be checked against its write-time hash: %w", e.Ref, err)
		}
		if err != nil {
			return err
		}
		want = r.EvidenceSHA256
	}
	// Compared in hex on the stack: a bundle a row, checked without an
	// allocation of its own.
	sum := sha256.Sum256(b)
	var got [2 * sha256.Size]byte
	hex.Encode(got[:], sum[:])
	if string(got[:]) != want {
		return fmt.Errorf("row %s's evidence hashes to %s, not the write-time %s: %w", e.Ref, hex.EncodeToString(sum[:]), want, errEdited)
	}
	return nil
}

// plan groups packable entries by retention day into segments of at most
// MaxSegmentBytes; the rest are single objects.
func plan(entries []OutboxEntry, bodies map[uint64][]byte, span time.Duration) []*upload {
	var ups []*upload
	open := map[time.Time]*upload{}
	size := map[*upload]int{}
	for _, e := range entries {
		b := bodies[e.Seq]
		if !e.Segment {
			ups = append(ups, &upload{key: e.Key, retain: e.RetainUntil, entries: []OutboxEntry{e}, bodies: [][]byte{b}})
			continue
		}
		day := segmentEnd(e.RetainUntil, span)
		u := open[day]
		if u == nil || size[u]+len(b) > MaxSegmentBytes {
			u = &upload{retain: day, segment: true}
			open[day] = u
			ups = append(ups, u)
		}
		u.entries = append(u.entries, e)
		u.bodies = append(u.bodies, b)
		size[u] += len(b) + 100
	}
	for _, u := range ups {
		if u.segment {
			u.key = SegmentKey(u.retain, u.entries[0].Seq, u.entries[len(u.entries)-1].Seq)
		}
	}
	return ups
}

// putAccessElsewhere puts the access batch u, whose key write-once
// storage holds with other bytes (refused), under the key that names its
// bytes (accessKeyOfBytes) instead, and records it there: the row store
// was put back to an older copy and its access log numbered again reads
// that the batch under the first key holds, or the records were
// renumbered. Put under the same key again, the batch would fail for
// good, and its reads would never be anchored. The batch under the first
// key stays as it is.
func (l *Ledger) putAccessElsewhere(ctx context.Context, u *upload, refused error) ([]Location, error) {
	first, last, ok := accessRange(u.entries[0].Ref)
	if !ok {
		return nil, refused
	}
	key := accessKeyOfBytes(first, last, sha256Hex(u.bodies[0]))
	if key == u.key {
		return nil, refused
	}
	taken := u.key
	u.key = key
	locs, err := l.put(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("%w; under %s instead: %w", refused, key, err)
	}
	u.entries[0].Key = key
	l.cfg.Logger.WarnContext(ctx, "access batch put under a key of its own: write-once storage holds other records under its numbers' key (the row store was put back to an older copy, or its access log renumbered)",
		slog.String("key", key), slog.String("taken", taken), slog.Uint64("first", first), slog.Uint64("last", last))
	return locs, nil
}

// put writes one upload and returns the location of each of its entries.
func (l *Ledger) put(ctx context.Context, u *upload) ([]Location, error) {
	if !u.segment {
		loc, err := l.objects.Put(ctx, u.key, u.bodies[0], u.retain)
		if err != nil {
			return nil, fmt.Errorf("put %s: %w", u.key, err)
		}
		if u.entries[0].Hold {
			if err := l.objects.SetLegalHold(ctx, loc, true); err != nil {
				return nil, fmt.Errorf("hold %s: %w", u.key, err)
			}
			loc.LegalHold = true
		}
		loc.Uploaded = true
		return []Location{loc}, nil
	}
	var buf bytes.Buffer
	size := len(segmentHeader)
	for i, e := range u.entries {
		size += len(e.Ref) + 12 + len(u.bodies[i])
	}
	buf.Grow(size)
	buf.WriteString(segmentHeader)
	locs := make([]Location, len(u.entries))
	for i, e := range u.entries {
		fmt.Fprintf(&buf, "%s %d\n", e.Ref, len(u.bodies[i]))
		locs[i] = Location{Offset: uint32(buf.Len()), Length: uint32(len(u.bodies[i]))}
		buf.Write(u.bodies[i])
		buf.WriteByte('\n')
	}
	loc, err := l.objects.Put(ctx, u.key, buf.Bytes(), u.retain)
	if err != nil {
		return nil, fmt.Errorf("put segment %s: %w", u.key, err)
	}
	for i := range locs {
		off, n := locs[i].Offset, locs[i].Length
		locs[i] = loc
		locs[i].Offset, locs[i].Length, locs[i].Uploaded = off, n, true
	}
	return locs, nil
}

// OutboxDepth returns the number of objects waiting for evidence storage.
func (l *Ledger) OutboxDepth(ctx context.Context) (int, error) {
	var n int
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		n, err = tx.OutboxDepth()
		return err
	})
	return n, err
}

// OutboxReport is the state of the evidence outbox for an operator.
type OutboxReport struct {
	// Depth is the number of entries waiting for evidence storage.
	Depth int
	// OldestQueued is when the oldest waiting entry was queued; zero when
	// the outbox is empty or the entry predates the record.
	OldestQueued time.Time
	// Plans is the number of segments planned and not yet recorded as put.
	Plans int
	// DeadLetterCount is the number of dead letters.
	DeadLetterCount int
	// DeadLetters is one page of them, in the order they were queued.
	DeadLetters []DeadLetter
	// Next continues the listing ("" at the end).
	Next string
}

// MaxOutboxPage caps one page of dead letters.
const MaxOutboxPage = 1000

// Outbox reports the outbox with a page of up to n dead letters (default
// 100, at most MaxOutboxPage) after pageToken ("" from the first).
func (l *Ledger) Outbox(ctx context.Context, n int, pageToken string) (OutboxReport, error) {
	var r OutboxReport
	switch {
	case n < 0 || n > MaxOutboxPage:
		return r, invalid("pageSize must be between 1 and %d", MaxOutboxPage)
	case n == 0:
		n = 100
	}
	var after uint64
	if pageToken != "" {
		var err error
		if after, err = strconv.ParseUint(pageToken, 10, 64); err != nil {
			return r, fmt.Errorf("page token %q: %w", pageToken, ErrInvalid)
		}
	}
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if r.Depth, err = tx.OutboxDepth(); err != nil {
			return err
		}
		if r.OldestQueued, err = tx.OldestQueued(); err != nil {
			return err
		}
		plans, err := tx.SegmentPlans()
		if err != nil {
			return err
		}
		r.Plans = len(plans)
		if r.DeadLetterCount, err = tx.DeadLetterCount(); err != nil {
			return err
		}
		r.DeadLetters, err = tx.DeadLetters(after, n+1)
		return err
	})
	if err != nil {
		return r, err
	}
	if len(r.DeadLetters) > n {
		r.DeadLetters = r.DeadLetters[:n]
		r.Next = strconv.FormatUint(r.DeadLetters[n-1].Entry.Seq, 10)
	}
	return r, nil
}

// MaxRetryBatch caps how many dead letters one RetryDeadLetters call moves.
const MaxRetryBatch = 10000

// RetryDeadLetters moves dead letters back to the end of the outbox, in
// the order they were first queued (so an object's put goes before the
// operations on it): those naming object key, or every one when all is
// set (at most MaxRetryBatch per call). It returns how many moved. Each
// starts again with no counted attempts.
func (l *Ledger) RetryDeadLetters(ctx context.Context, key string, all bool) (int, error) {
	if all == (key != "") {
		return 0, fmt.Errorf("name an object key or ask for all dead letters, not both or neither: %w", ErrInvalid)
	}
	if len(key) > 1024 {
		return 0, fmt.Errorf("object key longer than 1024 bytes: %w", ErrInvalid)
	}
	var moved int
	now := l.cfg.Now()
	err := l.store.Update(ctx, func(tx Tx) error {
		moved = 0
		var pick []DeadLetter
		for after := uint64(0); len(pick) < MaxRetryBatch; {
			page, err := tx.DeadLetters(after, 500)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				break
			}
			for _, d := range page {
				if (all || d.Entry.Key == key) && len(pick) < MaxRetryBatch {
					pick = append(pick, d)
				}
			}
			after = page[len(page)-1].Entry.Seq
		}
		for _, d := range pick {
			if err := tx.RemoveDeadLetter(d.Entry.Seq); err != nil {
				return err
			}
			e := d.Entry
			e.Seq = 0
			if err := tx.Enqueue(e, now); err != nil {
				return err
			}
		}
		moved = len(pick)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if moved == 0 && !all {
		return 0, fmt.Errorf("no dead letter for object %s: %w", key, ErrNotFound)
	}
	if moved > 0 {
		l.wake()
	}
	return moved, nil
}

// DeadLetterCount returns the number of outbox entries in the dead letters.
func (l *Ledger) DeadLetterCount(ctx context.Context) (int, error) {
	var n int
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		n, err = tx.DeadLetterCount()
		return err
	})
	return n, err
}

// WriteOnceCopy returns the bytes of an object (a row's evidence bundle,
// named by EvidenceKey, or a snapshot, by SnapshotKey) as the write-once
// store holds them, cut out of its segment where it was packed in one.
// It returns an error wrapping ErrNotFound while the object waits in the
// outbox.
func (l *Ledger) WriteOnceCopy(ctx context.Context, key string) ([]byte, error) {
	var loc Location
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		loc, err = tx.Object(key)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("object %s is not in write-once storage (still in the outbox, or unknown): %w", key, err)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", key, err)
	}
	return l.readObject(ctx, loc)
}
