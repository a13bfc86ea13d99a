package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/ledger"
)

// maxDrillScan bounds the stored reports read to find the latest of each
// kind the first time.
const maxDrillScan = 10000

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

// latest returns the latest stored report of kind.
func (d *drillStats) latest(ctx context.Context, kind drill.Kind) (summary, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.refresh(ctx)
	s, ok := d.last[kind]
	return s, ok, err
}

// refresh reads the reports stored since the last refresh, and those
// dated ahead of the clock, which sort before them. When the clock is now
// before the newest report taken (it stepped back past it), it reads them
// all again. A store that does not answer leaves the last values read.
func (d *drillStats) refresh(ctx context.Context) error {
	now := d.now()
	horizon := now.Add(aheadTolerance)
	marker, markerAt, last := d.newest, d.newestAt, d.last
	if marker != "" && markerAt.After(horizon) {
		marker, markerAt, last = "", time.Time{}, map[drill.Kind]summary{}
	}
	first, firstAt := "", time.Time{}
	var token string
	ahead := 0
	seen := map[drill.Kind]bool{}
	for read := 0; read < maxDrillScan; {
		reps, next, err := d.drills.List(ctx, 100, token)
		if err != nil {
			return err
		}
		for _, r := range reps {
			if r.ID == marker {
				next = ""
				break
			}
			if r.StartedAt.After(horizon) {
				ahead++
				if !d.warned[r.ID] {
					d.warned[r.ID] = true
					d.log.WarnContext(ctx, "drill report dated ahead of the clock: it is not the latest drill of its kind until the clock passes its start",
						slog.String("drill", r.ID), slog.String("kind", string(r.Kind)), slog.Time("started_at", r.StartedAt), slog.Time("clock", now))
				}
				continue
			}
			if first == "" {
				first, firstAt = r.ID, r.StartedAt
			}
			if !seen[r.Kind] {
				seen[r.Kind] = true
				last[r.Kind] = summary{startedAt: r.StartedAt, finishedAt: r.FinishedAt, passed: r.ChecksPassed, total: r.ChecksTotal}
			}
		}
		read += len(reps)
		if next == "" {
			break
		}
		token = next
	}
	if first == "" {
		first, firstAt = marker, markerAt
	}
	d.newest, d.newestAt, d.last, d.ahead = first, firstAt, last, ahead
	return nil
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
	return ran && last.startedAt.Before(lastScheduled(s, now))
}

// catchUpMonthly runs the monthly drill now when ledgerd was down at its
// scheduled time. A report dated ahead of the clock does not count as the
// last run (drillStats).
func (s *Server) catchUpMonthly(ctx context.Context, sched drill.Schedule) {
	last, ran, err := s.drillStats.latest(ctx, drill.Monthly)
	if err != nil {
		s.log.WarnContext(ctx, "monthly drill: cannot tell whether a run was missed", slog.String("error", err.Error()))
		return
	}
	now := s.drillStats.now()
	if !missedMonthly(sched, last, ran, now) {
		return
	}
	s.log.InfoContext(ctx, "monthly drill: a scheduled run was missed while ledgerd was down; running it now",
		slog.Time("last_run", last.startedAt), slog.Time("missed", lastScheduled(sched, now)))
	rep, err := s.drills.Run(ctx, drill.Request{Monthly: true, Sample: sched.Sample}, "scheduler")
	if err != nil {
		s.log.ErrorContext(ctx, "monthly drill failed to run", slog.String("error", err.Error()))
		return
	}
	level := slog.LevelInfo
	if rep.ChecksPassed < rep.ChecksTotal {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "monthly drill", slog.String("drill", rep.ID), slog.Int("checks_passed", rep.ChecksPassed), slog.Int("checks_total", rep.ChecksTotal), slog.Bool("catch_up", true))
}
