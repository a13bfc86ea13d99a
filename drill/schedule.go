package drill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// Schedule is when the monthly drill runs: a day of the month (1 to 28) at
// an hour and minute, UTC.
type Schedule struct {
	Day, Hour, Minute int
	Sample            int
}

// DefaultSchedule is the 1st of each month at 03:00 UTC, five rows.
var DefaultSchedule = Schedule{Day: 1, Hour: 3, Minute: 0, Sample: 5}

// Validate checks the schedule's fields.
func (s Schedule) Validate() error {
	switch {
	case s.Day < 1 || s.Day > 28:
		return errors.New("drill schedule: day must be 1 to 28 (every month has it)")
	case s.Hour < 0 || s.Hour > 23 || s.Minute < 0 || s.Minute > 59:
		return errors.New("drill schedule: hour 0 to 23, minute 0 to 59")
	case s.Sample < 1 || s.Sample > 100:
		return errors.New("drill schedule: sample must be 1 to 100")
	}
	return nil
}

// Next returns the first run strictly after t.
func (s Schedule) Next(t time.Time) time.Time {
	t = t.UTC()
	at := time.Date(t.Year(), t.Month(), s.Day, s.Hour, s.Minute, 0, 0, time.UTC)
	if !at.After(t) {
		at = at.AddDate(0, 1, 0)
	}
	return at
}

func (s Schedule) String() string {
	return fmt.Sprintf("day %d of each month at %02d:%02d UTC, %d rows", s.Day, s.Hour, s.Minute, s.Sample)
}

// retryFirst and retryMax bound the wait before a failed monthly drill is
// tried again: retryFirst after the first failure, twice as long after
// each further one, at most retryMax.
const retryFirst, retryMax = time.Minute, 30 * time.Minute

// maxSlotScan bounds the stored reports read to tell whether a slot
// already has its run.
const maxSlotScan = 10000

// RunScheduler runs the monthly drill on schedule until ctx is done. It
// sleeps on timers and reads the Runner's clock, so tests drive it with
// testing/synctest. Each report is stored like any other drill.
//
// Each run is for one slot (a scheduled time, Next), and runs once the
// Runner's clock has reached it: a timer runs on the monotonic clock, so
// after the wall clock steps back it fires before its slot by the wall
// clock, and the scheduler waits out the difference rather than running
// early and taking the same slot again from a time before it. A slot
// set while the clock was ahead (it was then stepped back further than to
// the slot before) gives way to the clock's next one, so that a clock put
// right does not wait out the months it had been ahead; never to the slot
// just run, which a clock stepped back during or after its run would
// otherwise give again. The slot after a run is the one after the later
// of the slot and the clock.
//
// A slot whose monthly drill is already stored is not run again
// (ranFor): another ledgerd on the store whose clock is a little ahead
// may have run it before it lost the lease, or this one before a restart
// with its clock since stepped back.
//
// A run that fails (the store briefly unavailable, the lease lost, the
// clock refused) is tried again for the same slot, after retryFirst and
// then twice as long each time up to retryMax, until it runs or the next
// slot comes; each failure is logged at ERROR with when it is tried again.
func (r *Runner) RunScheduler(ctx context.Context, s Schedule, log *slog.Logger) error {
	return r.RunSchedulerFrom(ctx, s, time.Time{}, log)
}

// RunSchedulerFrom is RunScheduler that first runs missed, a slot already
// past that has no run (ledgerd was down at its time: a catch-up), unless
// it is zero: with the same check that it has no run yet, and the same
// retries until it runs or the next slot comes.
func (r *Runner) RunSchedulerFrom(ctx context.Context, s Schedule, missed time.Time, log *slog.Logger) error {
	if err := s.Validate(); err != nil {
		return err
	}
	slot := s.Next(r.cfg.Now())
	if !missed.IsZero() && missed.Before(slot) {
		slot = missed
	}
	var last time.Time     // the slot run (or given up) last
	var wait time.Duration // before the next try of slot; 0 until it fails
	for {
		if !r.waitUntil(ctx, s, &slot, last) {
			return nil
		}
		now := r.cfg.Now()
		if now.Before(slot) {
			now = slot
		}
		next := s.Next(now)
		err := r.runSlot(ctx, s, slot, log)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			last, slot, wait = slot, next, 0
			continue
		}
		wait = min(max(2*wait, retryFirst), retryMax)
		retryAt := r.cfg.Now().Add(wait)
		if !retryAt.Before(next) {
			log.ErrorContext(ctx, "monthly drill failed to run; it runs next at the next scheduled time: check that the row store answers and that ledgerd's clock is right",
				slog.Time("slot", slot), slog.Time("retry_at", next), slog.String("error", err.Error()))
			last, slot, wait = slot, next, 0
			continue
		}
		log.ErrorContext(ctx, "monthly drill failed to run; trying again: check that the row store answers and that ledgerd's clock is right",
			slog.Time("slot", slot), slog.Time("retry_at", retryAt), slog.String("error", err.Error()))
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// runSlot runs the monthly drill for slot, unless a stored report is
// already its run, and logs it.
func (r *Runner) runSlot(ctx context.Context, s Schedule, slot time.Time, log *slog.Logger) error {
	done, err := r.ranFor(ctx, slot)
	if err != nil {
		return err
	}
	if done != nil {
		log.InfoContext(ctx, "monthly drill: this scheduled time already has its run (a monthly drill started since five minutes before it: by another ledgerd on the store, by this one before a restart, or by hand); not running it again",
			slog.Time("slot", slot), slog.String("drill", done.ID), slog.Time("started_at", done.StartedAt))
		return nil
	}
	rep, err := r.Run(ctx, Request{Monthly: true, Sample: s.Sample}, "scheduler")
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if rep.ChecksPassed < rep.ChecksTotal {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, "monthly drill", slog.String("drill", rep.ID), slog.Int("checks_passed", rep.ChecksPassed), slog.Int("checks_total", rep.ChecksTotal),
		slog.Duration("took", rep.FinishedAt.Sub(rep.StartedAt)))
	return nil
}

// ranFor returns the stored monthly report that is slot's run, or nil.
// A monthly report counts when it started at or after slot less
// ledger.ClockTolerance: the clocks of ledgerds on one store may differ
// by that much, so one whose clock was ahead ran the slot up to that much
// before it by this clock. A report that started more than the tolerance
// after this clock does not count: it was run while a clock was well
// ahead, and is not the latest drill either (the drill metrics skip it
// too).
//
// Reports are listed newest first by start, so the read stops at the
// first that started before the window: the work is the reports started
// since then, at most maxSlotScan of them; past that the slot is taken
// as not run, the lesser harm being a second run.
func (r *Runner) ranFor(ctx context.Context, slot time.Time) (*Report, error) {
	from := slot.Add(-ledger.ClockTolerance)
	horizon := r.cfg.Now().Add(ledger.ClockTolerance)
	var token string
	for read := 0; read < maxSlotScan; {
		reps, next, err := r.List(ctx, 100, token)
		if err != nil {
			return nil, fmt.Errorf("read the stored drills to tell whether the slot at %s has run: %w", slot.Format(time.RFC3339), err)
		}
		for _, rep := range reps {
			switch {
			case rep.StartedAt.Before(from):
				return nil, nil
			case rep.Kind == Monthly && !rep.StartedAt.After(horizon):
				return rep, nil
			}
		}
		read += len(reps)
		if next == "" {
			break
		}
		token = next
	}
	return nil, nil
}

// sleep returns after d, true, or when ctx is done, false.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// waitUntil returns once the Runner's clock reads at or after *slot,
// true, or when ctx is done, false. A timer fires after its duration on
// the monotonic clock; when the wall clock was stepped back meanwhile it
// has not reached the slot yet, and waitUntil sleeps again for what is
// left, or, when the schedule's next slot by the clock now comes first
// (the clock was stepped back past the slot before) and is not last, the
// slot run last, until that one.
func (r *Runner) waitUntil(ctx context.Context, s Schedule, slot *time.Time, last time.Time) bool {
	for {
		now := r.cfg.Now()
		if next := s.Next(now); next.Before(*slot) && !next.Equal(last) {
			*slot = next
		}
		d := slot.Sub(now)
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
