package server

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/ledger"
)

// maxDrillScan bounds the stored reports one read of the drill metrics
// takes (drillStats.refresh); drillScanPage is how many are read at once.
// Tests lower them.
var maxDrillScan, drillScanPage = 10000, 100

// aheadTolerance is how far past the clock a report may have started and
// still count: another ledgerd on the store may read a clock a little
// ahead of this one's, by as much as the sweep allows against its
// reference clocks.
const aheadTolerance = ledger.ClockTolerance

// drillStats follows the stored drill reports, newest first, and keeps the
// latest of each kind: whoever ran it (a client, the console, the
// scheduler, another ledgerd on the same store), it is what /metrics
// shows and what the monthly catch-up reads. It is a prometheus.Collector
// of pactledger_drill_last_run_timestamp_seconds{kind},
// pactledger_drill_last_score{kind} and pactledger_drill_reports_dated_ahead.
//
// A report that started after the clock (beyond aheadTolerance) is not
// the latest of its kind: one drill run while the clock was a year ahead
// would otherwise, since report ids sort by start time, stand for a year
// in front of every drill run after the clock was corrected, hiding their
// scores and the months missed. Such a report is counted and logged at
// WARN once; it counts again once the clock passes its start.
//
// A read takes at most maxDrillScan reports, and any number of other
// drills (a dispute drill is any support key's to run) may have been run
// since the last of one kind: a first read, or one after more new reports
// than that, may stop before reaching it. What such a read left unread is
// a pass kept open: each later read goes on with it, within the same
// bound, for the kinds the pass has not found yet, down to where the
// pass before ended (or the end of the store), so the latest of each kind
// is found whatever was run after it. Until then a kind the pass has not
// found keeps what was read of it before, a lower bound (its series goes
// stale rather than vanish), and latestKnown says it is not sure.
type drillStats struct {
	drills *drill.Runner
	log    *slog.Logger
	now    func() time.Time // the clock reports are compared with

	mu       sync.Mutex
	newest   string                 // id of the newest report read that was not dated ahead
	newestAt time.Time              // when it started
	last     map[drill.Kind]summary // latest report of each kind not dated ahead
	ahead    int                    // reports dated ahead of the clock at the last refresh
	warned   map[string]bool        // reports dated ahead already logged

	// The open pass, when a read stopped at maxDrillScan: backlog is the
	// page token to go on from ("" when no pass is open), stop the id of
	// the report where it ends ("" for the end of the store), found the
	// kinds whose latest it has taken (they are sure).
	backlog, stop string
	found         map[drill.Kind]bool

	runAt, score, datedAhead *prometheus.Desc
}

// summary is what the metrics need of a report.
type summary struct {
	startedAt, finishedAt time.Time
	passed, total         int
}

// score is the share of checks passed, 1 when there was nothing to drill.
func (s summary) score() float64 {
	if s.total == 0 {
		return 1
	}
	return float64(s.passed) / float64(s.total)
}

func newDrillStats(drills *drill.Runner, log *slog.Logger) *drillStats {
	return &drillStats{drills: drills, log: log, now: time.Now, last: map[drill.Kind]summary{}, warned: map[string]bool{},
		runAt:      prometheus.NewDesc("pactledger_drill_last_run_timestamp_seconds", "When the latest drill of each kind finished (Unix time).", []string{"kind"}, nil),
		score:      prometheus.NewDesc("pactledger_drill_last_score", "Share of checks the latest drill of each kind passed: 1 all passed (or nothing to drill), below 1 a pull failed.", []string{"kind"}, nil),
		datedAhead: prometheus.NewDesc("pactledger_drill_reports_dated_ahead", "Stored drill reports that started after ledgerd's clock: run while a clock was ahead, they are not the latest drill until the clock passes them.", nil, nil),
	}
}

// latest returns the latest stored report of kind, as far as read
// (latestKnown).
func (d *drillStats) latest(ctx context.Context, kind drill.Kind) (summary, bool, error) {
	s, ok, _, err := d.latestKnown(ctx, kind)
	return s, ok, err
}

// latestKnown returns the latest stored report of kind, and whether that
// is sure. It is not while a pass is open that has not found kind yet:
// the report returned, if any, is then the latest read so far, and one
// not read yet may be later.
func (d *drillStats) latestKnown(ctx context.Context, kind drill.Kind) (s summary, ok, sure bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	err = d.refresh(ctx)
	s, ok = d.last[kind]
	return s, ok, d.backlog == "" || d.found[kind], err
}

// refresh reads the reports stored since the last refresh, and those
// dated ahead of the clock, which sort before them; then, within the
// same maxDrillScan reports, goes on with the open pass. When the clock
// is now before the newest report taken (it stepped back past it), it
// reads them all again, in a pass to the end of the store. A store that
// does not answer leaves the last values read.
func (d *drillStats) refresh(ctx context.Context) error {
	now := d.now()
	horizon := now.Add(aheadTolerance)
	marker, markerAt := d.newest, d.newestAt
	last := maps.Clone(d.last)
	backlog, stop, found := d.backlog, d.stop, maps.Clone(d.found)
	if marker != "" && markerAt.After(horizon) {
		// What was taken when the clock read later may be dated ahead now.
		maps.DeleteFunc(last, func(_ drill.Kind, s summary) bool { return s.startedAt.After(horizon) })
		marker, markerAt, backlog, stop, found = "", time.Time{}, "", "", nil
	}

	top, err := d.scan(ctx, "", marker, maxDrillScan, horizon)
	if err != nil {
		return err
	}
	ahead := 0
	for _, r := range top.ahead {
		ahead++
		if !d.warned[r.ID] {
			d.warned[r.ID] = true
			d.log.WarnContext(ctx, "drill report dated ahead of the clock: it is not the latest drill of its kind until the clock passes its start",
				slog.String("drill", r.ID), slog.String("kind", string(r.Kind)), slog.Time("started_at", r.StartedAt), slog.Time("clock", now))
		}
	}
	maps.Copy(last, top.first)
	switch {
	case top.next != "":
		// Stopped at the cap before the last refresh's newest: a new
		// pass, down to where the open one ends, or, when none is open,
		// to that newest report.
		if backlog == "" {
			stop = marker
		}
		backlog, found = top.next, map[drill.Kind]bool{}
	case marker == "":
		// Read the whole store: every kind is sure.
		backlog, stop, found = "", "", map[drill.Kind]bool{}
	}
	for k := range top.first {
		if found != nil {
			found[k] = true
		}
	}
	complete := top.next == "" && marker == ""

	if backlog != "" && top.read < maxDrillScan {
		more, err := d.scan(ctx, backlog, stop, maxDrillScan-top.read, horizon)
		if err != nil {
			return err
		}
		for k, s := range more.first {
			if !found[k] {
				found[k], last[k] = true, s
			}
		}
		if backlog = more.next; backlog == "" {
			complete = stop == ""
		}
	}
	if complete {
		// None of the other kinds is in the store.
		maps.DeleteFunc(last, func(k drill.Kind, _ summary) bool { _, ok := top.first[k]; return !ok && !found[k] })
	}
	if backlog == "" {
		stop, found = "", nil
	}

	first, firstAt := marker, markerAt
	if top.newest != nil {
		first, firstAt = top.newest.ID, top.newest.StartedAt
	}
	d.newest, d.newestAt, d.last, d.ahead = first, firstAt, last, ahead
	d.backlog, d.stop, d.found = backlog, stop, found
	return nil
}

// scanned is what one scan read.
type scanned struct {
	first  map[drill.Kind]summary // the first report of each kind not dated ahead
	newest *drill.Report          // the first report not dated ahead
	ahead  []*drill.Report        // reports dated ahead, which first skips
	next   string                 // page token to go on from; "" at stop or the end
	read   int                    // reports read
}

// scan reads the stored reports, newest first, from the page token from
// until the report with id stop (not taken), the end of the store, or
// budget reports.
func (d *drillStats) scan(ctx context.Context, from, stop string, budget int, horizon time.Time) (scanned, error) {
	out := scanned{first: map[drill.Kind]summary{}, next: from}
	for out.read < budget {
		reps, next, err := d.drills.List(ctx, min(drillScanPage, budget-out.read), out.next)
		if err != nil {
			return scanned{}, err
		}
		out.read += len(reps)
		out.next = next
		for _, r := range reps {
			if stop != "" && r.ID == stop {
				out.next = ""
				break
			}
			if r.StartedAt.After(horizon) {
				out.ahead = append(out.ahead, r)
				continue
			}
			if out.newest == nil {
				out.newest = r
			}
			if _, ok := out.first[r.Kind]; !ok {
				out.first[r.Kind] = summary{startedAt: r.StartedAt, finishedAt: r.FinishedAt, passed: r.ChecksPassed, total: r.ChecksTotal}
			}
		}
		if out.next == "" {
			break
		}
	}
	return out, nil
}

// Describe implements prometheus.Collector.
func (d *drillStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.runAt
	ch <- d.score
	ch <- d.datedAhead
}

// Collect implements prometheus.Collector. A store that does not answer
// leaves the last values read.
func (d *drillStats) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.refresh(ctx); err != nil {
		d.log.WarnContext(ctx, "drill metrics: read the stored reports", slog.String("error", err.Error()))
	}
	for kind, s := range d.last {
		ch <- prometheus.MustNewConstMetric(d.runAt, prometheus.GaugeValue, float64(s.finishedAt.UnixNano())/1e9, string(kind))
		ch <- prometheus.MustNewConstMetric(d.score, prometheus.GaugeValue, s.score(), string(kind))
	}
	ch <- prometheus.MustNewConstMetric(d.datedAhead, prometheus.GaugeValue, float64(d.ahead))
}

// lastScheduled is the latest time at or before now that s schedules a
// monthly drill.
func lastScheduled(s drill.Schedule, now time.Time) time.Time {
	now = now.UTC()
	at := time.Date(now.Year(), now.Month(), s.Day, s.Hour, s.Minute, 0, 0, time.UTC)
	if at.After(now) {
		at = at.AddDate(0, -1, 0) // day is at most 28: every month has it
	}
	return at
}

// missedMonthly reports whether a scheduled monthly drill was missed: one
// ran before (last) and a scheduled time has passed since without one.
// A ledger that never ran one has missed nothing: its schedule starts now.
func missedMonthly(s drill.Schedule, last summary, ran bool, now time.Time) bool {
	// As the scheduler counts a slot's run (drill.Runner.RunScheduler): a
	// monthly drill started up to ClockTolerance before it, by another
	// ledgerd whose clock is a little ahead, or by hand.
	return ran && last.startedAt.Before(lastScheduled(s, now).Add(-ledger.ClockTolerance))
}

// catchUpRetryFirst and catchUpRetryMax bound the wait before the
// catch-up reads the stored drills again when it could not: first, then
// twice as long each time up to the most.
const catchUpRetryFirst, catchUpRetryMax = time.Minute, 30 * time.Minute

// catchUpMonthly returns the scheduled time of a monthly drill missed
// while ledgerd was down, zero when none was, for the scheduler to run
// first (drill.Runner.RunSchedulerFrom: with its retries, a failed
// catch-up is tried again, not given up until next month). A report dated
// ahead of the clock does not count as the last run (drillStats).
func (s *Server) catchUpMonthly(ctx context.Context, sched drill.Schedule) time.Time {
	last, ran, sure, err := s.drillStats.latestKnown(ctx, drill.Monthly)
	for wait := catchUpRetryFirst; err != nil; wait = min(2*wait, catchUpRetryMax) {
		// Read again rather than guess: taken for missed, a ledger that
		// never ran a monthly drill would run one now; taken for not
		// missed, a month would be lost. The scheduler could not run a
		// drill meanwhile either.
		s.log.WarnContext(ctx, "monthly drill: cannot tell whether a scheduled run was missed; reading the stored drills again", slog.String("error", err.Error()),
			slog.Duration("retry_in", wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return time.Time{}
		case <-t.C:
		}
		last, ran, sure, err = s.drillStats.latestKnown(ctx, drill.Monthly)
	}
	now := s.drillStats.now()
	missed := lastScheduled(sched, now)
	switch {
	case sure:
		if !missedMonthly(sched, last, ran, now) {
			return time.Time{}
		}
		s.log.InfoContext(ctx, "monthly drill: a scheduled run was missed while ledgerd was down; running it now",
			slog.Time("last_run", last.startedAt), slog.Time("missed", missed))
	case ran && !last.startedAt.Before(missed.Add(-ledger.ClockTolerance)):
		return time.Time{}
	default:
		attrs := []any{slog.Int("reports_read", maxDrillScan), slog.Time("scheduled", missed)}
		if ran {
			attrs = append(attrs, slog.Time("last_run_found", last.startedAt))
		}
		s.log.WarnContext(ctx, "monthly drill: the latest monthly report is not among the newest drill reports read (many other drills ran since), so a scheduled run may have been missed; running it now",
			attrs...)
	}
	return missed
}
