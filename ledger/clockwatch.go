package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The ledger records by its host's clock: a row's recordedAt, the start of
// its retention, its leaf's time, a dispute event's, an incident's close.
// A clock behind the true time by Δ keeps every row recorded meanwhile Δ
// too short and dates it Δ early; one ahead dates it late. With reference
// clocks (Config.ReferenceClocks), RunClockWatch reads each every
// ClockWatchInterval, and a write (AppendReceipt, AppendRefusal,
// AppendDispute, CloseIncident) is refused with a *ClockOffError while the
// ledger's clock is off a reference's by more than ClockTolerance, either
// way. No write waits for a reading: between readings a step of the
// host's clock is seen at once, as a difference between how far its wall
// clock and its boot-time clock moved since the last reading (the
// boot-time clock does not step, and counts a suspension). A refused write asks
// for a new reading, so that writes go on as soon as the clocks agree.
// Revocations are not refused: one dated minutes wrong does far less harm
// than a compromised grant no one can stop; it is logged.

// ClockWatchInterval is how often RunClockWatch reads the reference
// clocks. Between readings the ledger's clock can only drift (a step is
// seen at once), by far less than ClockTolerance in a minute.
const ClockWatchInterval = time.Minute

// clockHysteresis is how far inside ClockTolerance the ledger's clock
// must come before refused writes are taken again: a reading jitters by
// up to a second (an S3 Date is in whole seconds), which at the limit
// would take and refuse writes by turns.
const clockHysteresis = 3 * time.Second

// processStart is when this process started, by the monotonic clock.
var processStart = time.Now()

// sinceStart is the monotonic time since the process started.
func sinceStart() time.Duration { return time.Since(processStart) }

// clockRecheckGap is the least time between two readings a refused write
// asked for: one HEAD of the bucket and one query a second at most.
const clockRecheckGap = time.Second

// ErrClockOff: a write was refused, nothing recorded, because the
// ledger's clock is off a reference clock by more than ClockTolerance; a
// *ClockOffError carries the times. It wraps ErrUnavailable: the writer
// retries, and the write is taken once the clocks agree.
var ErrClockOff = fmt.Errorf("%w: the ledger's clock is off a reference clock", ErrUnavailable)

// ClockOffError is a write refused for the ledger's clock: Local, the time
// the write would have been recorded at, is Off (positive: ahead, negative:
// behind) from the clock named Clock, which read Reference at Local.
type ClockOffError struct {
	Clock     string
	Local     time.Time
	Reference time.Time
	Off       time.Duration
}

func (e *ClockOffError) Error() string {
	way, by := "ahead of", e.Off
	if by < 0 {
		way, by = "behind", -by
	}
	return fmt.Sprintf("the ledger's clock (%s) is %s %s the clock of %s (%s), more than the %s allowed: nothing is recorded until the clocks agree; retry",
		e.Local.UTC().Format(time.RFC3339), by.Round(time.Second), way, e.Clock, e.Reference.UTC().Format(time.RFC3339), ClockTolerance)
}

// Is makes errors.Is(err, ErrClockOff) and errors.Is(err, ErrUnavailable)
// hold.
func (e *ClockOffError) Is(target error) bool {
	return target == ErrClockOff || target == ErrUnavailable
}

// clockReading is one reading of a reference clock.
type clockReading struct {
	clock string
	// local is the ledger's clock (Config.Now) halfway through the
	// reading, its wall time alone; boot is the host's boot-time clock
	// then (sinceBoot), which no step of the wall clock moves.
	local time.Time
	boot  time.Duration
	// off is local minus the reference's time: positive, the ledger's
	// clock is ahead.
	off time.Duration
}

// offNow is how far the ledger's clock, reading now, is off the
// reference's, from the reading r: its offset then, plus how much further
// the wall clock moved since than the boot-time clock did (a step).
func (r clockReading) offNow(now time.Time) time.Duration {
	wall := now.Round(0).Sub(r.local)
	return r.off + wall - (sinceBoot() - r.boot)
}

// ClockState is what the ledger last read of a reference clock, for
// /readyz and metrics.
type ClockState struct {
	// Clock names the reference ("the S3 evidence store").
	Clock string
	// ReadAt is when it was last read by the ledger's clock (zero: never).
	ReadAt time.Time
	// Off is how far the ledger's clock is off it now (positive: ahead),
	// from the last reading and any step of the ledger's clock since.
	Off time.Duration
	// OK is whether Off is within ClockTolerance.
	OK bool
	// NoTime: the reference answers without a time (an S3 service that
	// sends no Date); the ledger's clock is not checked against it.
	NoTime bool
	// Err is the last reading's error, if it failed (the last good
	// reading still counts).
	Err error
	// ErrAt is when the last failed reading was.
	ErrAt time.Time
}

// clockWatch is what RunClockWatch last read of the reference clocks.
type clockWatch struct {
	// readings is the last good reading of each reference that gives a
	// time; the write path reads it without a lock.
	readings atomic.Pointer[[]clockReading]
	// recheck asks RunClockWatch for a reading now.
	recheck chan struct{}
	// refusing is whether writes are refused now (logged on each change).
	refusing atomic.Bool

	mu     sync.Mutex
	states map[string]ClockState // by reference name
	// gaveTime: the reference has given a time (to the watch or a sweep)
	// since ledgerd started; one that then gives none is not passed over.
	gaveTime map[string]bool
}

// checkWriteClock returns a *ClockOffError when the ledger's clock, at
// now, is off a reference clock by more than ClockTolerance, by what
// RunClockWatch last read: a write then records nothing. Before the first
// reading (a reference down since ledgerd started, or no references: the
// embedded default's one clock) every time passes.
func (l *Ledger) checkWriteClock(ctx context.Context, now time.Time) error {
	err := l.checkRecordingClock(ctx, now)
	if err != nil {
		l.cfg.Metrics.writeRefusedForClock()
	}
	return err
}

// checkRecordingClock is checkWriteClock without the count of refused
// writes: a refusal, or a time taken again, changes the state writes and
// reads are checked by (refusing, pactledger_clock_off), logged once.
func (l *Ledger) checkRecordingClock(ctx context.Context, now time.Time) error {
	refusing := l.clocks.refusing.Load()
	limit := ClockTolerance
	if refusing {
		limit -= clockHysteresis
	}
	r, off, ok := l.clockOff(now, limit)
	if ok {
		if refusing {
			l.clockTransition(ctx, false, r, now, off)
		}
		return nil
	}
	select {
	case l.clocks.recheck <- struct{}{}:
	default:
	}
	if !refusing {
		l.clockTransition(ctx, true, r, now, off)
	}
	return &ClockOffError{Clock: r.clock, Local: now, Reference: now.Add(-off), Off: off}
}

// CheckReadClock is checkWriteClock for a read the access log records
// (AccessLogConfig.CheckRecordClock): it returns a *ClockOffError when
// the ledger's clock, at now, is off a reference clock by more than
// ClockTolerance, and the access log then records nothing and the read is
// not answered. A read stamped by a clock behind would look older than it
// is, and the access log's prune would remove it early; one ahead would
// be kept past its retention. Reads and writes are refused and taken
// again together; a refused read is not counted as a refused write.
func (l *Ledger) CheckReadClock(ctx context.Context, now time.Time) error {
	return l.checkRecordingClock(ctx, now)
}

// clockOff returns the first reference clock the ledger's clock is off by
// more than limit at now, and by how much; ok when there is none.
func (l *Ledger) clockOff(now time.Time, limit time.Duration) (clockReading, time.Duration, bool) {
	if rs := l.clocks.readings.Load(); rs != nil {
		for _, r := range *rs {
			if off := r.offNow(now); off > limit || off < -limit {
				return r, off, false
			}
		}
	}
	return clockReading{}, 0, true
}

// clockTransition refuses writes from now on (refuse), or takes them
// again, logging and counting the change once: under the lock, so that
// the gauge ends as the state does when two writes race.
func (l *Ledger) clockTransition(ctx context.Context, refuse bool, r clockReading, now time.Time, off time.Duration) {
	l.clocks.mu.Lock()
	defer l.clocks.mu.Unlock()
	if l.clocks.refusing.Load() == refuse {
		return
	}
	l.clocks.refusing.Store(refuse)
	l.cfg.Metrics.clockRefusing(refuse)
	if refuse {
		l.cfg.Logger.ErrorContext(ctx, "writes refused: the ledger's clock is off a reference clock; nothing is recorded until the clocks agree",
			slog.String("clock", r.clock), slog.Time("ledger_time", now), slog.Duration("off", off.Round(time.Second)), slog.Duration("tolerance", ClockTolerance))
		return
	}
	l.cfg.Logger.InfoContext(ctx, "writes taken again: the ledger's clock agrees with its reference clocks")
}

// behindBy is how far the ledger's clock is behind the latest of its
// reference clocks, by the last readings (0 when it is not behind): what
// a write-once retention counted from the ledger's clock is moved on by,
// so that a clock behind does not shorten it (tiles, drill reports).
func (l *Ledger) behindBy() time.Duration {
	var behind time.Duration
	if rs := l.clocks.readings.Load(); rs != nil {
		now := l.cfg.Now()
		for _, r := range *rs {
			behind = max(behind, -r.offNow(now))
		}
	}
	return behind
}

// noteClockOff logs a write taken though the ledger's clock is off a
// reference clock by more than ClockTolerance (a revocation, which is not
// refused for it), and returns by how much (positive: ahead; 0 when it is
// not off).
func (l *Ledger) noteClockOff(ctx context.Context, now time.Time, what ...any) time.Duration {
	r, off, ok := l.clockOff(now, ClockTolerance)
	if ok {
		return 0
	}
	l.cfg.Logger.WarnContext(ctx, "recorded though the ledger's clock is off a reference clock: its time may be off as much",
		append(what, slog.String("clock", r.clock), slog.Time("ledger_time", now), slog.Duration("off", off.Round(time.Second)))...)
	return off
}

// RunClockWatch reads the reference clocks now, then every
// ClockWatchInterval and when a refused write asks, until ctx is done.
// Without reference clocks it returns at once: nothing is checked.
func (l *Ledger) RunClockWatch(ctx context.Context) error {
	if len(l.cfg.ReferenceClocks) == 0 {
		return nil
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.clocks.recheck:
			t.Stop()
		}
		l.readClocks(ctx)
		// A write refused meanwhile asks again; a second soonest.
		gap := time.NewTimer(clockRecheckGap)
		select {
		case <-ctx.Done():
			gap.Stop()
			return nil
		case <-gap.C:
		}
		t.Reset(ClockWatchInterval - clockRecheckGap)
	}
}

// readClocks reads each reference clock once, all at once, and keeps each
// reading as it comes: one that is slow to answer (a server black-holed)
// does not hold back another's.
func (l *Ledger) readClocks(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range l.cfg.ReferenceClocks {
		wg.Go(func() { l.readClock(ctx, c) })
	}
	wg.Wait()
	if l.clocks.refusing.Load() {
		now := l.cfg.Now()
		if r, off, ok := l.clockOff(now, ClockTolerance-clockHysteresis); ok {
			l.clockTransition(ctx, false, r, now, off)
		}
	}
}

// readClock reads reference c once and keeps what it read.
func (l *Ledger) readClock(ctx context.Context, c ReferenceClock) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	boot0, local0 := sinceBoot(), l.cfg.Now()
	ref, err := c.Now(rctx)
	cancel()
	half := (sinceBoot() - boot0) / 2
	l.clocks.mu.Lock()
	defer l.clocks.mu.Unlock()
	st := ClockState{Clock: c.Name}
	if prev, ok := l.clocks.states[c.Name]; ok {
		st = prev
	}
	noTime := errors.Is(err, ErrNoClock)
	if noTime && l.clocks.gaveTime[c.Name] {
		// It gave a time before: one that gives none now (a proxy put
		// in front of it) is not read, and its last reading stands.
		noTime, err = false, fmt.Errorf("%w: it gave a time before, and none now: %w", ErrClockUnread, err)
	}
	switch {
	case noTime:
		st = ClockState{Clock: c.Name, ReadAt: local0, OK: true, NoTime: true}
	case err != nil:
		if st.Err == nil && ctx.Err() == nil {
			// Logged when it starts failing, not at each reading (a
			// second apart while writes are refused).
			l.cfg.Logger.WarnContext(ctx, "a reference clock could not be read; writes are checked against its last reading", slog.String("clock", c.Name), slog.String("error", err.Error()))
		}
		st.Err, st.ErrAt = err, local0
	default:
		r := clockReading{clock: c.Name, local: local0.Add(half).Round(0), boot: boot0 + half, off: local0.Add(half).Sub(ref)}
		var good []clockReading
		if old := l.clocks.readings.Load(); old != nil {
			good = slices.DeleteFunc(slices.Clone(*old), func(o clockReading) bool { return o.clock == c.Name })
		}
		good = append(good, r)
		l.clocks.readings.Store(&good)
		l.clocks.gaveTime[c.Name] = true
		st = ClockState{Clock: c.Name, ReadAt: r.local, Off: r.off, OK: r.off <= ClockTolerance && r.off >= -ClockTolerance}
		l.cfg.Metrics.clockOff(c.Name, r.off)
	}
	l.clocks.states[c.Name] = st
}

// clockGaveTime reports whether reference name has given a time to this
// ledger, and notes that it has when it just did (gave).
func (l *Ledger) clockGaveTime(name string, gave bool) bool {
	l.clocks.mu.Lock()
	defer l.clocks.mu.Unlock()
	if gave {
		l.clocks.gaveTime[name] = true
	}
	return l.clocks.gaveTime[name]
}

// ClockStates is what the ledger last read of each reference clock, in
// the order of Config.ReferenceClocks, Off brought up to now: empty
// without references, or before RunClockWatch first read them.
func (l *Ledger) ClockStates() []ClockState {
	now := l.cfg.Now()
	rs := l.clocks.readings.Load()
	l.clocks.mu.Lock()
	defer l.clocks.mu.Unlock()
	var out []ClockState
	for _, c := range l.cfg.ReferenceClocks {
		st, ok := l.clocks.states[c.Name]
		if !ok {
			continue
		}
		if rs != nil {
			for _, r := range *rs {
				if r.clock == c.Name {
					st.Off = r.offNow(now)
					st.OK = st.Off <= ClockTolerance && st.Off >= -ClockTolerance
				}
			}
		}
		out = append(out, st)
	}
	return out
}
