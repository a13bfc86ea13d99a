package ledger

import (
	"context"
	"time"
)

// CheckPruneClock checks now, the time the access log's prune would remove
// records by, against the reference clocks as Sweep checks its own
// (checkClock): it returns a *ClockAheadError when now is ahead of one by
// more than ClockTolerance, and an error wrapping ErrClockUnread when one
// cannot be read, and counts either in pactledger_sweeps_refused_total
// with sweep="access_log". Records the prune removes cannot come back, as
// swept rows cannot: a clock stepped ahead must not remove them early.
// It is AccessLogConfig.CheckClock for the log of the ledger's store.
func (l *Ledger) CheckPruneClock(ctx context.Context, now time.Time) error {
	if err := l.checkClock(ctx, now); err != nil {
		l.cfg.Metrics.sweepRefused(sweepAccessLog, err)
		return err
	}
	return nil
}
