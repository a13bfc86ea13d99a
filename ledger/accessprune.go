package ledger

import (
	"cmp"
	"context"
	"slices"
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

// unputAccess returns the spans of access records whose batch tx holds
// queued for write-once storage or among the dead letters, merged and in
// order: their upload reads them from the row store (accessObjectBody),
// so a prune keeps them until the batch is put, however old. The dead
// letters are read before and after the outbox, so that a batch moving
// between them meanwhile (given up, or retried) is seen on a store whose
// reads in one transaction see what others commit between them
// (PostgreSQL's READ COMMITTED).
func unputAccess(tx Tx) ([]AccessSpan, error) {
	var spans []AccessSpan
	add := func(e OutboxEntry) {
		if e.Kind != ObjectAccess || e.Op != "" {
			return
		}
		if first, last, ok := accessRange(e.Ref); ok {
			spans = append(spans, AccessSpan{First: first, Last: last})
		}
	}
	dead := func() error {
		for after := uint64(0); ; {
			page, err := tx.DeadLetters(after, 1000)
			if err != nil || len(page) == 0 {
				return err
			}
			for _, d := range page {
				add(d.Entry)
				after = d.Entry.Seq
			}
		}
	}
	if err := dead(); err != nil {
		return nil, err
	}
	queued, err := queuedAccess(tx)
	if err != nil {
		return nil, err
	}
	for _, e := range queued {
		add(e)
	}
	if err := dead(); err != nil {
		return nil, err
	}
	slices.SortFunc(spans, func(a, b AccessSpan) int { return cmp.Compare(a.First, b.First) })
	merged := spans[:0]
	for _, s := range spans {
		if n := len(merged); n > 0 && s.First <= merged[n-1].Last+1 {
			merged[n-1].Last = max(merged[n-1].Last, s.Last)
			continue
		}
		merged = append(merged, s)
	}
	return merged, nil
}

// queuedAccess returns the outbox's access batches, and on a store that
// cannot pick them out (KindOutbox) its whole outbox: callers pick them.
func queuedAccess(tx Tx) ([]OutboxEntry, error) {
	if k, ok := tx.(KindOutbox); ok {
		return k.OutboxOfKind(ObjectAccess)
	}
	depth, err := tx.OutboxDepth()
	if err != nil || depth == 0 {
		return nil, err
	}
	return tx.Outbox(depth)
}
