package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ClockTolerance is how far the ledger's clock may run ahead of a
// reference clock before a sweep deletes nothing, and how far off one,
// either way, before writes are refused (see Config.ReferenceClocks). It is a constant, not a setting: whoever runs
// the service may be the one stepping its clock, and a wider tolerance
// only lets a step remove more rows early. Five minutes is far above what
// NTP leaves between two servers, and the sweep's own reading of a
// reference (a round trip, a Date header in whole seconds) is well
// inside it.
const ClockTolerance = 5 * time.Minute

// ReferenceClock is a clock a retention sweep reads before it deletes
// anything: a server's, which a step of the ledger's own clock (NTP gone
// wrong, or an operator) does not move with it.
type ReferenceClock struct {
	// Name says whose clock it is, in logs and errors ("the S3 evidence
	// store").
	Name string
	// Now reads the clock: the server's time now, or an error when it
	// cannot be read.
	Now func(ctx context.Context) (time.Time, error)
}

// ErrClockAhead: a sweep deleted nothing because the ledger's clock was
// ahead of a reference clock by more than ClockTolerance; a
// *ClockAheadError carries both times.
var ErrClockAhead = errors.New("the ledger's clock is ahead of a reference clock")

// ErrClockUnread: a sweep deleted nothing because it could not read a
// reference clock; due rows wait for a sweep that can. It wraps
// ErrUnavailable.
var ErrClockUnread = fmt.Errorf("%w: a reference clock could not be read", ErrUnavailable)

// ErrNoClock: a reference answered with no time to give (an S3 service
// that sends no Date header). The sweep checks its clock against the
// other references, and logs that this one gives none.
var ErrNoClock = errors.New("the reference gives no time")

// ClockAheadError is a sweep refused for its clock: Local, the time the
// sweep would have removed rows by, is ahead of Reference, read from the
// clock named Clock, by more than ClockTolerance.
type ClockAheadError struct {
	Clock     string
	Local     time.Time
	Reference time.Time
}

func (e *ClockAheadError) Error() string {
	return fmt.Sprintf("the ledger's clock (%s) is %s ahead of the clock of %s (%s), more than the %s allowed: a sweep deletes nothing, and due rows wait, until the clocks agree",
		e.Local.UTC().Format(time.RFC3339), e.Local.Sub(e.Reference).Round(time.Second), e.Clock, e.Reference.UTC().Format(time.RFC3339), ClockTolerance)
}

// Is makes errors.Is(err, ErrClockAhead) hold.
func (e *ClockAheadError) Is(target error) bool { return target == ErrClockAhead }

// checkClock compares now, the time a sweep would remove rows by, with
// each reference clock: it returns a *ClockAheadError when now is ahead of
// one by more than ClockTolerance, and an error wrapping ErrClockUnread
// when one cannot be read. A clock behind the references passes: a sweep
// that runs late removes rows late, never early. Without references (a
// bbolt row store with a local evidence directory: the host's clock is
// the only one) every time passes.
func (l *Ledger) checkClock(ctx context.Context, now time.Time) error {
	for _, c := range l.cfg.ReferenceClocks {
		ref, err := c.Now(ctx)
		if errors.Is(err, ErrNoClock) && l.clockGaveTime(c.Name, false) {
			// It gave a time before: one that gives none now (a proxy put
			// in front of it) is no licence to sweep unchecked.
			return fmt.Errorf("read the clock of %s: %w: it gave a time before, and none now: %w", c.Name, ErrClockUnread, err)
		}
		if errors.Is(err, ErrNoClock) {
			// Not a failure to read: this reference has no clock to check
			// against, as a local evidence directory has none.
			l.cfg.Logger.WarnContext(ctx, "retention sweep: a reference clock gives no time; the sweep's clock is checked against the others only", slog.String("clock", c.Name), slog.String("error", err.Error()))
			continue
		}
		if err != nil {
			return fmt.Errorf("read the clock of %s: %w: %w", c.Name, ErrClockUnread, err)
		}
		l.clockGaveTime(c.Name, true)
		if now.Sub(ref) > ClockTolerance {
			return &ClockAheadError{Clock: c.Name, Local: now, Reference: ref}
		}
	}
	return nil
}
