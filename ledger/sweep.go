package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/pactledger/pactledger/retention"
)

// ErrExpired: the row was removed when its retention ran out; an
// *ExpiredError carries its tombstone.
var ErrExpired = errors.New("expired")

// Tombstone is what remains of a swept row.
type Tombstone struct {
	ID          string          `json:"id"`
	Kind        Kind            `json:"kind"`
	Status      Status          `json:"status"`
	Class       retention.Class `json:"retentionClass"`
	RetainUntil time.Time       `json:"retainUntil"`
	SweptAt     time.Time       `json:"sweptAt"`
}

// ExpiredError reports a row that was swept.
type ExpiredError struct{ Tombstone Tombstone }

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("row %s expired under retention class %s on %s and was removed on %s",
		e.Tombstone.ID, e.Tombstone.Class, e.Tombstone.RetainUntil.Format("2006-01-02"), e.Tombstone.SweptAt.Format("2006-01-02"))
}

// Is makes errors.Is(err, ErrExpired) hold.
func (e *ExpiredError) Is(target error) bool { return target == ErrExpired }

// row returns the row with id, or an *ExpiredError when it was swept.
func row(tx Tx, id string) (*Row, error) {
	r, err := tx.Row(id)
	if errors.Is(err, ErrNotFound) {
		if t, terr := tx.Tombstone(id); terr == nil {
			return nil, &ExpiredError{Tombstone: *t}
		}
	}
	return r, err
}

// SweepItem is one row a sweep removed, or kept past its retain-until.
type SweepItem struct {
	RowID string
	Class retention.Class
	// RetainUntil is the row's retain-until; for a row a hold keeps (an
	// incident, its open dispute), the hold's end.
	RetainUntil time.Time
	// Kept says why a due row stays; empty when it goes.
	Kept string
}

// SweepResult is what one sweep did (or, for a dry run, would do).
type SweepResult struct {
	At              time.Time
	DryRun          bool
	Swept           []SweepItem
	Kept            []SweepItem
	ObjectsDeleted  int
	ObjectsPending  int // deletions refused or failed; retried next sweep
	DeletionErrors  []string
	TruncatedReport bool
	// HoldsQueued names the objects open incidents hold, recorded held,
	// that the object store held without a legal hold: their holds were
	// queued again (mendHolds).
	HoldsQueued []string
}

// maxReported caps the items a sweep result lists; sweepPage is how many
// due rows a sweep reads at a time. Vars only for tests.
var maxReported, sweepPage = 1000, 500

// Sweep removes every row whose retain-until has passed (by the ledger's
// clock), with its index entries and evidence, leaving a tombstone, and
// deletes the write-once objects no remaining row needs. It never removes a
// row under legal hold, in an open incident, nor one whose evidence has
// not reached write-once storage yet; nor, while an incident is open and
// until its close plus the incident period in force at the close
// (IncidentRecord.HoldsUntil), a row of the same agent
// platform's day as the incident's row or, when its receipt's signature
// passed, recorded under its grant (playbook step 5). With dryRun it only
// reports.
//
// First it reads the reference clocks (Config.ReferenceClocks): when the
// ledger's clock is ahead of one by more than ClockTolerance it deletes
// nothing and returns a *ClockAheadError, and when one cannot be read an
// error wrapping ErrClockUnread; a dry run says the same.
//
// A sweep that deletes runs under the lease LeaseSweeper, its writes fenced
// by it, one at a time in this ledger: under this ledger's sweeper's lease
// when it holds it (RunSweeper), after that sweeper's sweep in progress;
// otherwise under the lease taken for this sweep (RunOnce) and released
// after it. When another ledger on the store holds the lease it deletes
// nothing and returns a *LeaseHeldError naming the holder. A sweep whose
// lease is lost while it runs stops and returns an error wrapping
// ErrLeaseLost. A dry run takes no lease.
func (l *Ledger) Sweep(ctx context.Context, dryRun bool) (*SweepResult, error) {
	if dryRun {
		return l.sweepChecked(ctx, true)
	}
	select {
	case l.sweeping <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("sweep: wait for the sweep in progress: %w", ctx.Err())
	}
	defer func() { <-l.sweeping }()
	var res *SweepResult
	err := l.RunOnce(ctx, LeaseSweeper, func(ctx context.Context) (err error) {
		res, err = l.sweepChecked(ctx, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// sweepChecked is Sweep once it may run: it checks the clocks, then sweeps.
func (l *Ledger) sweepChecked(ctx context.Context, dryRun bool) (*SweepResult, error) {
	now := l.cfg.Now().UTC()
	if err := l.checkClock(ctx, now); err != nil {
		if !dryRun {
			l.cfg.Metrics.sweepRefused(sweepRows, err)
		}
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return l.sweep(ctx, now, dryRun)
}

// SweepPreview is a dry run of Sweep as of at: what a sweep then would
// remove, and keep and why, as far as the ledger holds now (incidents
// open now still open, holds of closed ones ended by their dates).
func (l *Ledger) SweepPreview(ctx context.Context, at time.Time) (*SweepResult, error) {
	return l.sweep(ctx, at.UTC(), true)
}

func (l *Ledger) sweep(ctx context.Context, now time.Time, dryRun bool) (*SweepResult, error) {
	res := &SweepResult{At: now, DryRun: dryRun}
	period := l.cfg.Policy.Periods[retention.Incident]
	// The incidents are read once, by the first page with due rows; each
	// later read, the deleting transactions' among them, takes only what
	// is new since.
	held := &incidentsRead{}
	pos := ""
	for {
		var (
			due     []*Row
			next    string
			keepWhy map[string]string
			heldTo  map[string]time.Time
		)
		err := l.store.View(ctx, func(tx Tx) error {
			var err error
			if due, next, err = tx.Expired(now, pos, sweepPage); err != nil || len(due) == 0 {
				return err
			}
			keepWhy, heldTo, err = keepReasons(tx, due, now, period, held)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		var goes []*Row
		for _, r := range due {
			if keepWhy[r.ID] == "" {
				goes = append(goes, r)
			}
		}
		if sweepHook != nil {
			sweepHook()
		}
		if !dryRun && len(goes) > 0 {
			// Decide again in the deleting transaction: an incident, a hold
			// or a retention extension that landed since the read above
			// keeps the row.
			var swept []*Row
			err := l.store.Update(ctx, func(tx Tx) error {
				swept = swept[:0]
				if err := holdGrants(tx, goes); err != nil {
					return err
				}
				again, againHeld, err := keepReasons(tx, goes, now, period, held)
				if err != nil {
					return err
				}
				maps.Copy(heldTo, againHeld)
				for _, r := range goes {
					if why := again[r.ID]; why != "" {
						keepWhy[r.ID] = why
						continue
					}
					if _, err := SweepRow(tx, r, Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RetainUntil, SweptAt: now}); err != nil {
						return fmt.Errorf("sweep row %s: %w", r.ID, err)
					}
					swept = append(swept, r)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			for _, r := range swept {
				l.cfg.Metrics.swept(r.Class)
			}
		}
		if !dryRun && len(heldTo) > 0 {
			if err := l.extendHeld(ctx, heldTo); err != nil {
				return nil, err
			}
		}
		for _, r := range due {
			item := SweepItem{RowID: r.ID, Class: r.Class, RetainUntil: r.RetainUntil, Kept: keepWhy[r.ID]}
			if until := heldTo[r.ID]; item.Kept != "" && until.After(item.RetainUntil) {
				// Kept by a hold: until its end (extendHeld moves the
				// row there; a dry run says where it would).
				item.RetainUntil = until
			}
			if item.Kept != "" {
				res.Kept = appendCapped(res.Kept, item, res)
			} else {
				res.Swept = appendCapped(res.Swept, item, res)
			}
		}
		if next == "" {
			break
		}
		if dryRun && res.TruncatedReport {
			// A dry run is its listing: once the listing is full, reading
			// on (every row of the ledger, for a preview far ahead) would
			// change nothing it shows.
			break
		}
		pos = next
	}
	if !dryRun {
		l.deleteObjects(ctx, res)
		l.mendHolds(ctx, res, held, now, period)
	}
	return res, nil
}

// mendHolds queues a legal hold again for each object an open incident
// holds, which the ledger recorded held, that the object store holds
// without one (up to maxHoldsRead, one read each; a store that cannot say
// is not asked). Holds and releases of an object are applied in outbox
// order under claims, but a release can land late: a replica paused after
// its claim's check, or a store slower than the claim, after another
// replica applied it and the hold that followed. The object would then
// be deletable once its retention passes, while the incident is open.
// The hold is queued, not placed here, so that it takes its place in the
// object's order: a close of the incident after it is released after it.
// Whether each object is still held by an open incident and recorded
// held is read again in the transaction that queues it. A stray hold,
// the other outcome of a late call, is not released: the ledger cannot
// tell it from a hold placed outside it (checkHolds reports it).
//
// The open incidents are those the sweep read (held), with any it has not
// read yet.
func (l *Ledger) mendHolds(ctx context.Context, res *SweepResult, held *incidentsRead, now time.Time, period retention.Period) {
	lh, ok := l.objects.(LegalHoldReader)
	if !ok {
		return
	}
	var want []heldObject
	err := l.store.View(ctx, func(tx Tx) error {
		if err := held.read(tx, now, period); err != nil {
			return err
		}
		var err error
		want, err = appendHeld(tx, nil, held.open)
		return err
	})
	if err != nil {
		res.DeletionErrors = append(res.DeletionErrors, fmt.Sprintf("legal holds: %v", err))
		return
	}
	var lost []heldObject
	for _, h := range want {
		if on, err := lh.LegalHold(ctx, h.loc); err == nil && !on {
			lost = append(lost, h)
		}
	}
	if len(lost) == 0 {
		return
	}
	var queued []heldObject
	err = l.store.Update(ctx, func(tx Tx) error {
		queued = queued[:0]
		now := l.cfg.Now()
		for _, h := range lost {
			inc, err := incident(tx, h.incident)
			switch {
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return err
			case !inc.ClosedAt.IsZero() || !contains(inc.Held, h.loc.Key):
				continue
			}
			loc, err := tx.Object(h.loc.Key)
			switch {
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return err
			case !loc.LegalHold || loc.VersionID != h.loc.VersionID:
				continue
			}
			if err := tx.Enqueue(OutboxEntry{Op: OpHold, Key: h.loc.Key}, now); err != nil {
				return err
			}
			queued = append(queued, h)
		}
		return nil
	})
	if err != nil {
		res.DeletionErrors = append(res.DeletionErrors, fmt.Sprintf("legal holds: %v", err))
		return
	}
	if len(queued) > 0 {
		l.wake()
	}
	for _, h := range queued {
		res.HoldsQueued = append(res.HoldsQueued, h.loc.Key)
		l.cfg.Logger.WarnContext(ctx, "legal hold queued again: an open incident holds the object, but the object store held it without one (a release applied late, or removed outside the ledger)",
			slog.String("key", h.loc.Key), slog.String("incident", h.incident))
	}
}

// extendHeld keeps each row an incident holds past its retain-until
// until the hold's end (heldTo), and its write-once objects with it: its
// evidence and the JWKS snapshots it names. The ledger would keep the row
// anyway, but the bucket would stop protecting its objects at the row's
// own date, and the sweep would read the row again every time; with its
// retain-until moved, it comes due when the hold ends. Retention is only
// ever extended.
func (l *Ledger) extendHeld(ctx context.Context, heldTo map[string]time.Time) error {
	now := l.cfg.Now()
	err := l.store.Update(ctx, func(tx Tx) error {
		for id, until := range heldTo {
			r, err := tx.Row(id)
			switch {
			case errors.Is(err, ErrNotFound):
				continue
			case err != nil:
				return err
			}
			if err := extendRow(tx, r, until, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sweep: keep the rows incidents and disputes hold: %w", err)
	}
	l.wake()
	return nil
}

// extendRow moves row r's retain-until to until, and its write-once
// objects' with it (its evidence and the JWKS snapshots it names), when
// until is later: retention is only ever extended. Evidence packed in a
// segment is copied into an object of its own rather than extending the
// segment, which holds other rows' bundles due at its date (see
// Ledger.copyOut). A row without a retain-until (an open incident's own
// row, held until the close) is left as it is.
func extendRow(tx Tx, r *Row, until, now time.Time) error {
	if r.RetainUntil.IsZero() || !until.After(r.RetainUntil) {
		return nil
	}
	if err := tx.UpdateRetention(r.ID, until); err != nil {
		return err
	}
	r.RetainUntil = until
	var keys []string
	if !r.KeepsNoEvidence() {
		keys = append(keys, EvidenceKey(r.ID))
	}
	for _, s := range SnapshotsOf(r) {
		keys = append(keys, SnapshotKey(s))
	}
	for _, key := range keys {
		if err := tx.Enqueue(OutboxEntry{Op: OpExtend, Key: key, RetainUntil: until}, now); err != nil {
			return err
		}
	}
	return nil
}

// sweepHook, when set (tests), runs between a sweep's decision and its
// deleting transaction.
var sweepHook func()

// keepReasons re-reads each due row in tx and says why it must stay (an
// empty reason: it goes): swept or changed since, retention extended, its
// dispute open, an incident holding its agent platform's day or its grant (see
// incidentHolds; closed incidents hold until the end their close
// recorded),
// evidence still in the outbox, or evidence under legal hold. held is
// what the sweep has read of the incidents so far; keepReasons reads in
// tx the incidents held does not have yet, and adds them.
//
// It also returns, for each row an incident or its open dispute holds,
// until when the hold lasts: for an incident the latest end its closes
// recorded, or, while an incident or the dispute is open, at
// least now plus that period (see extendHeld).
func keepReasons(tx Tx, due []*Row, now time.Time, period retention.Period, held *incidentsRead) (map[string]string, map[string]time.Time, error) {
	// The rows before the incidents (in a write transaction, locked where
	// the store locks what a write reads): a writer that read one of them
	// (a duplicate naming it) has ended before the incidents are read, and
	// its incident is seen, or it waits for this transaction and finds the
	// row swept.
	curs := make([]*Row, len(due))
	errs := make([]error, len(due))
	for i, r := range due {
		curs[i], errs[i] = tx.Row(r.ID)
	}
	if err := held.read(tx, now, period); err != nil {
		return nil, nil, err
	}
	why := make(map[string]string, len(due))
	heldTo := map[string]time.Time{}
	uploaded := map[string]bool{} // snapshot ids whose object is recorded, by what was read
	for i, r := range due {
		cur, err := curs[i], errs[i]
		switch {
		case errors.Is(err, ErrNotFound):
			why[r.ID] = "it is no longer in the ledger"
			continue
		case err != nil:
			return nil, nil, err
		case cur.Class != r.Class || cur.RetainUntil.IsZero() || cur.RetainUntil.After(now):
			why[r.ID] = "its retention changed since the sweep read it"
			continue
		}
		var loc Location
		if !r.KeepsNoEvidence() { // else there is no evidence object to wait for
			loc, err = tx.Object(EvidenceKey(r.ID))
		}
		switch {
		case cur.DisputeState() == DisputeOpen || cur.Dispute == DisputeOpen:
			// Its dispute is what the row is kept for: it stays while the
			// dispute is open, and the incident period past the time a
			// sweep last found it open, its objects with it. Open by its
			// events (the log's record) or by the status kept beside
			// them: an edit of either alone keeps it, never sweeps it.
			why[r.ID] = "its dispute is open"
			heldTo[r.ID] = period.After(now)
		case held.days[agentDay(r)].holds():
			why[r.ID] = held.days[agentDay(r)].why("the agent platform's rows of that day")
			heldTo[r.ID] = held.days[agentDay(r)].end(now, period)
		case r.GrantID != "" && r.ReceiptVerified() && held.grants[digest(r.GrantID)].holds():
			g := held.grants[digest(r.GrantID)]
			why[r.ID] = g.why("the rows of its grant")
			heldTo[r.ID] = g.end(now, period)
		case errors.Is(err, ErrNotFound):
			why[r.ID] = "its evidence is still in the outbox"
		case err != nil:
			return nil, nil, err
		case loc.LegalHold:
			why[r.ID] = "its evidence is under legal hold"
		default:
			// The row's last sweep may drop a snapshot it names: not
			// before the snapshot is in write-once storage, or its
			// queued upload could never be done.
			queued, err := snapshotQueued(tx, r, uploaded)
			if err != nil {
				return nil, nil, err
			}
			if queued != "" {
				why[r.ID] = "a JWKS snapshot it names is still in the outbox (" + SnapshotKey(queued) + ")"
			}
		}
	}
	return why, heldTo, nil
}

// holdGrants holds the grants of the rows a sweep is about to remove,
// before it reads what keeps them: a write that counted a row
// under one of them (countMax), and opened an incident that holds it, has
// ended and its incident is seen, or it waits and counts without the row.
func holdGrants(tx Tx, rows []*Row) error {
	var grants []string
	for _, r := range rows {
		if r.GrantID != "" {
			grants = append(grants, r.GrantID)
		}
	}
	return tx.HoldGrants(grants...)
}

// snapshotQueued returns the first JWKS snapshot row r names whose object
// is not recorded as uploaded yet, or "". uploaded holds the answers read
// so far, by snapshot id: the rows of a sweep name the same few.
func snapshotQueued(tx Tx, r *Row, uploaded map[string]bool) (string, error) {
	for _, id := range SnapshotsOf(r) {
		up, ok := uploaded[id]
		if !ok {
			_, err := tx.Object(SnapshotKey(id))
			if err != nil && !errors.Is(err, ErrNotFound) {
				return "", err
			}
			up = err == nil
			uploaded[id] = up
		}
		if !up {
			return id, nil
		}
	}
	return "", nil
}

// agentDay is the key of a row's agent platform and UTC day, the unit an
// open incident holds.
func agentDay(r *Row) string { return agentDayKey(r.Agent.Platform, rowDay(r)) }

// agentDayKey is the key of an agent platform's day (rowDay).
func agentDayKey(platform, day string) string { return platform + "\x00" + day }

// rowDay is the UTC day of row r, 2006-01-02.
func rowDay(r *Row) string { return r.IssuedAt.UTC().Format("2006-01-02") }

// incidentHolds is what incidents hold beyond their own rows (playbook
// step 5: "the platform's other rows that day", until the incident is
// closed plus the incident period): their agent platform's rows of the
// day, and the rows recorded under their grant, which a countMax incident
// counted whatever their day. The grant holds only rows a count reads,
// receipts whose signature passed (Row.ReceiptVerified): a forged row's
// grant is the writer's claim, and no count ever read it. A forged row
// claiming the platform and day is held with the day, as the incident's
// review lists it (Ledger.Incident).
type incidentHolds struct {
	days   map[string]holdUntil // by agentDay
	grants map[string]holdUntil // by the grant id's digest
}

// holdUntil is how long incidents hold a day or a grant: while one of them
// is open, else until the latest of the ends their closes recorded (each
// close plus the incident period in force then). The zero value holds
// nothing.
type holdUntil struct {
	open  bool
	until time.Time
}

func (h holdUntil) holds() bool { return h.open || !h.until.IsZero() }

// end is until when h holds as far as is known at now: the latest end its
// closes recorded, and while an incident is open at least now plus the
// incident period (the hold lasts that long past a close yet to come).
func (h holdUntil) end(now time.Time, period retention.Period) time.Time {
	if h.open {
		if soonest := period.After(now); soonest.After(h.until) {
			return soonest
		}
	}
	return h.until
}

// why says why a row h holds stays; what names the rows h holds.
func (h holdUntil) why(what string) string {
	if h.open {
		return "an open incident holds " + what
	}
	return "a closed incident holds " + what + " until " + h.until.UTC().Format(time.RFC3339)
}

// add returns h holding for one more incident: open, or closed and
// holding until until.
func (h holdUntil) add(open bool, until time.Time) holdUntil {
	h.open = h.open || open
	if until.After(h.until) {
		h.until = until
	}
	return h
}

// incidentsRead is what a sweep has read of the incidents: what those it
// read hold at its time, the highest incident number it read (top), and
// the numbers below top it did not find (gaps). Incidents are never
// deleted, an incident's row and day and grant never change, and one
// closed while the sweep runs holds on for the incident period past its
// close, so nothing read stops holding during a sweep; only incidents it
// has not read can add to what is held. A read after the first takes
// only the numbers above top and in the gaps: the bbolt store gives
// numbers in the order its transactions commit, but PostgreSQL's sequence
// gives them in the order they are asked for, so an incident numbered
// below one already read may commit after the sweep's read, and a number
// taken by a transaction that rolled back stays a gap for good.
type incidentsRead struct {
	incidentHolds
	open []*IncidentRecord // the open incidents read, which may have closed since
	done bool
	top  uint64
	gaps []seqSpan
}

// seqSpan is the incident numbers lo to hi.
type seqSpan struct{ lo, hi uint64 }

// read reads in tx the incidents h has not read: every one the first
// time, then those numbered above h.top or in h.gaps, and adds what they
// hold at now.
func (h *incidentsRead) read(tx Tx, now time.Time, period retention.Period) error {
	if !h.done {
		return h.readAll(tx, now, period)
	}
	var gaps []seqSpan
	for _, g := range h.gaps {
		found, err := incidentsIn(tx, g.lo, g.hi)
		if err != nil {
			return err
		}
		if err := h.add(tx, found, now, period); err != nil {
			return err
		}
		gaps = append(gaps, spansLeft(g.lo, g.hi, found)...)
	}
	found, err := incidentsIn(tx, h.top+1, 0)
	if err != nil {
		return err
	}
	if err := h.add(tx, found, now, period); err != nil {
		return err
	}
	if len(found) > 0 {
		top, _ := IncidentSeq(found[0].ID)
		gaps = append(gaps, spansLeft(h.top+1, top, found)...)
		h.top = top
	}
	h.gaps = gaps
	return nil
}

// readAll reads every incident, newest first, noting the gaps.
func (h *incidentsRead) readAll(tx Tx, now time.Time, period retention.Period) error {
	const page = 1000
	h.incidentHolds = incidentHolds{days: map[string]holdUntil{}, grants: map[string]holdUntil{}}
	h.top, h.gaps, h.open = 0, nil, nil
	var last uint64 // the number read last; 0 before the first
	for {
		incs, err := tx.Incidents(page, last)
		if err != nil {
			return err
		}
		for _, inc := range incs {
			seq, err := IncidentSeq(inc.ID)
			if err != nil {
				return err
			}
			if last == 0 {
				h.top = seq
			} else if seq+1 < last {
				h.gaps = append(h.gaps, seqSpan{seq + 1, last - 1})
			}
			last = seq
		}
		if err := h.add(tx, incs, now, period); err != nil {
			return err
		}
		if len(incs) < page {
			break
		}
	}
	if last > 1 {
		h.gaps = append(h.gaps, seqSpan{1, last - 1})
	}
	h.gaps = recentGaps(h.gaps, h.top)
	h.done = true
	return nil
}

// gapWindow is how far below the highest incident number a gap may be
// and still be waited for: a number taken by a transaction still running
// when the sweep first reads is one of the last taken, and the writers in
// flight at once take far fewer. A gap further down is a number whose
// transaction rolled back, which no incident will ever fill; reading it
// again on every page would cost a round trip each, for ever.
const gapWindow = 4096

// recentGaps keeps the part of gaps within gapWindow below top.
func recentGaps(gaps []seqSpan, top uint64) []seqSpan {
	if top <= gapWindow {
		return gaps
	}
	floor := top - gapWindow + 1
	var out []seqSpan
	for _, g := range gaps {
		if g.hi < floor {
			continue
		}
		out = append(out, seqSpan{max(g.lo, floor), g.hi})
	}
	return out
}

// add adds what incs hold at now: the open ones, and the closed ones
// whose hold, as recorded at their close (IncidentRecord.HoldsUntil), has
// not ended yet. period stands in for the period at the close of an
// incident whose close recorded no end. The day and grant held are the
// incident's own record of them; an incident opened before it recorded
// them takes them from its row, and holds nothing once its row is gone.
func (h *incidentsRead) add(tx Tx, incs []*IncidentRecord, now time.Time, period retention.Period) error {
	for _, inc := range incs {
		if inc.Open() {
			h.open = append(h.open, inc)
		}
		var until time.Time
		if !inc.Open() {
			if until = inc.holdEnd(period); !until.After(now) {
				continue
			}
		}
		day, grant := inc.Day, inc.GrantSHA256
		if day == "" {
			r, err := tx.Row(inc.RowID)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("the row of incident %s: %w", inc.ID, err)
			}
			day, grant = rowDay(r), digest(r.GrantID)
		}
		key := agentDayKey(inc.Agent, day)
		h.days[key] = h.days[key].add(inc.Open(), until)
		if grant != "" {
			h.grants[grant] = h.grants[grant].add(inc.Open(), until)
		}
	}
	return nil
}

// incidentsIn reads the incidents numbered lo to hi (hi 0: no bound),
// newest first. It asks for one first: there is seldom any.
func incidentsIn(tx Tx, lo, hi uint64) ([]*IncidentRecord, error) {
	var out []*IncidentRecord
	before := hi + 1
	if hi == 0 {
		before = 0 // from the newest
	}
	for n := 1; ; n = 100 {
		incs, err := tx.Incidents(n, before)
		if err != nil {
			return nil, err
		}
		for _, inc := range incs {
			seq, err := IncidentSeq(inc.ID)
			if err != nil {
				return nil, err
			}
			if seq < lo {
				return out, nil
			}
			out = append(out, inc)
			before = seq
		}
		if len(incs) < n {
			return out, nil
		}
	}
}

// spansLeft returns the spans of lo to hi that found, incidents numbered
// within it, newest first, leave.
func spansLeft(lo, hi uint64, found []*IncidentRecord) []seqSpan {
	var out []seqSpan
	for _, inc := range found {
		seq, _ := IncidentSeq(inc.ID)
		if seq < hi {
			out = append(out, seqSpan{seq + 1, hi})
		}
		hi = seq - 1
	}
	if lo <= hi {
		out = append(out, seqSpan{lo, hi})
	}
	return out
}

func appendCapped(list []SweepItem, item SweepItem, res *SweepResult) []SweepItem {
	if len(list) >= maxReported {
		res.TruncatedReport = true
		return list
	}
	return append(list, item)
}

// deleteObjects deletes the queued write-once objects; a refusal (still
// retained by the store's clock, or held) leaves it queued for next time.
// An object in use again is taken off the queue instead (see backInUse).
func (l *Ledger) deleteObjects(ctx context.Context, res *SweepResult) {
	var queue []Location
	if err := l.store.View(ctx, func(tx Tx) error {
		var err error
		queue, err = tx.Deletions(10000)
		return err
	}); err != nil {
		res.DeletionErrors = append(res.DeletionErrors, err.Error())
		return
	}
	for _, loc := range queue {
		inUse, err := l.dequeueIfInUse(ctx, loc)
		if err != nil {
			res.DeletionErrors = append(res.DeletionErrors, err.Error())
			continue
		}
		if inUse {
			continue
		}
		if _, snapshot := snapshotIDOf(loc.Key); snapshot && loc.LegalHold {
			// A snapshot held when it was dropped: a closed incident's
			// release that had not been applied yet. Released here, unless
			// an incident holds its key again. (Other objects are queued
			// only once nothing holds them: a row under legal hold is not
			// swept.)
			if err := l.releaseUnwanted(ctx, loc); err != nil {
				res.ObjectsPending++
				if len(res.DeletionErrors) < 20 {
					res.DeletionErrors = append(res.DeletionErrors, fmt.Sprintf("%s: %v", loc.Key, err))
				}
				continue
			}
		}
		if err := l.objects.Delete(ctx, loc); err != nil {
			res.ObjectsPending++
			if len(res.DeletionErrors) < 20 {
				res.DeletionErrors = append(res.DeletionErrors, fmt.Sprintf("%s: %v", loc.Key, err))
			}
			continue
		}
		if err := l.store.Update(ctx, func(tx Tx) error { return tx.Deleted(loc.Key) }); err != nil {
			res.DeletionErrors = append(res.DeletionErrors, err.Error())
			continue
		}
		res.ObjectsDeleted++
	}
	l.cfg.Metrics.objectsDeleted(res.ObjectsDeleted, res.ObjectsPending)
}

// sweepClockRetry is how soon a sweep its clock stopped is tried again.
var sweepClockRetry = ClockWatchInterval

// RunSweeper sweeps once now and then every interval until ctx is done,
// logging counts; a sweep its clock stopped (ErrClockAhead, ErrClockUnread)
// is tried again a minute later (ClockWatchInterval). It runs under the lease LeaseSweeper (see
// RunUnderLease): one sweeper at a time across the ledgers on the store,
// its writes fenced by the lease.
func (l *Ledger) RunSweeper(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return errors.New("sweeper: interval must be positive")
	}
	return l.RunUnderLease(ctx, LeaseSweeper, func(ctx context.Context) error { return l.sweepLoop(ctx, interval) })
}

// sweepLoop is the sweeper's job under its lease.
func (l *Ledger) sweepLoop(ctx context.Context, interval time.Duration) error {
	for {
		start := time.Now()
		res, err := l.Sweep(ctx, false)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			l.logSweepFailed(ctx, err)
		default:
			level := slog.LevelInfo
			if res.ObjectsPending > 0 || len(res.HoldsQueued) > 0 {
				level = slog.LevelWarn
			}
			l.cfg.Logger.Log(ctx, level, "retention sweep", slog.Int("rows_swept", len(res.Swept)), slog.Int("rows_kept", len(res.Kept)),
				slog.Int("objects_deleted", res.ObjectsDeleted), slog.Int("objects_pending", res.ObjectsPending),
				slog.Int("holds_queued_again", len(res.HoldsQueued)), slog.Duration("took", time.Since(start)))
		}
		wait := interval
		if errors.Is(err, ErrClockUnread) || errors.Is(err, ErrClockAhead) {
			// Rows are due: try again as soon as the clocks may agree or
			// be read, not an interval later.
			wait = min(interval, sweepClockRetry)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// logSweepFailed logs a sweep that failed with err: one its clock stopped
// with both times, so that the operator sees which clock is wrong.
func (l *Ledger) logSweepFailed(ctx context.Context, err error) {
	var ahead *ClockAheadError
	switch {
	case errors.As(err, &ahead):
		l.cfg.Logger.ErrorContext(ctx, "retention sweep deleted nothing: the ledger's clock is ahead of a reference clock; due rows wait until the clocks agree",
			slog.String("clock", ahead.Clock), slog.Time("ledger_time", ahead.Local), slog.Time("reference_time", ahead.Reference),
			slog.Duration("ahead", ahead.Local.Sub(ahead.Reference)), slog.Duration("tolerance", ClockTolerance))
	case errors.Is(err, ErrClockUnread):
		l.cfg.Logger.ErrorContext(ctx, "retention sweep deleted nothing: a reference clock could not be read; due rows wait for the next sweep", slog.String("error", err.Error()))
	default:
		l.cfg.Logger.ErrorContext(ctx, "retention sweep failed", slog.String("error", err.Error()))
	}
}

// dequeueIfInUse takes the queued deletion of loc off the queue, undone,
// when its object is in use again (backInUse), and reports whether it did.
// The check runs in a read transaction first, since almost every queued
// object is not.
func (l *Ledger) dequeueIfInUse(ctx context.Context, loc Location) (bool, error) {
	var inUse bool
	if err := l.store.View(ctx, func(tx Tx) (err error) {
		inUse, err = backInUse(tx, loc)
		return err
	}); err != nil || !inUse {
		return false, err
	}
	err := l.store.Update(ctx, func(tx Tx) (err error) {
		if inUse, err = backInUse(tx, loc); err != nil || !inUse {
			return err
		}
		return tx.Deleted(loc.Key)
	})
	return inUse && err == nil, err
}

// releaseUnwanted releases the legal hold of a snapshot's object queued
// for deletion, when no incident holds its key (RefHold); otherwise it
// returns why the object stays.
func (l *Ledger) releaseUnwanted(ctx context.Context, loc Location) error {
	var holds int
	if err := l.store.View(ctx, func(tx Tx) (err error) {
		holds, err = tx.Count(RefHold, loc.Key, 0)
		return err
	}); err != nil {
		return err
	}
	if holds > 0 {
		return fmt.Errorf("under legal hold for %d open incidents", holds)
	}
	return l.objects.SetLegalHold(ctx, loc, false)
}

// backInUse reports whether a queued deletion's object is in use again: a
// JWKS snapshot dropped with the last row naming it, then named by a new
// row and uploaded again while its old object was still retained. Such a
// deletion leaves the queue undone. Where the store keeps versions the
// upload made a new one and the old version is still deleted; where it
// does not (a directory store) the upload found the same object, which
// is kept.
func backInUse(tx Tx, queued Location) (bool, error) {
	cur, err := tx.Object(queued.Key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil && cur.VersionID == queued.VersionID, err
}
