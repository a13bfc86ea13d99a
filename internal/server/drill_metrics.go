package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/drill"
)

// maxDrillScan bounds the stored reports read to find the latest of each
// kind the first time.
const maxDrillScan = 10000

// drillStats follows the stored drill reports, newest first, and keeps the
// latest of each kind: whoever ran it (a client, the console, the
// scheduler, another ledgerd on the same store), it is what /metrics
// shows. It is a prometheus.Collector of
// pactledger_drill_last_run_timestamp_seconds{kind} and
// pactledger_drill_last_score{kind}.
type drillStats struct {
	drills *drill.Runner
	log    *slog.Logger

	mu     sync.Mutex
	newest string                 // id of the newest report read
	last   map[drill.Kind]summary // latest report of each kind

	runAt, score *prometheus.Desc
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
	return &drillStats{drills: drills, log: log, last: map[drill.Kind]summary{},
		runAt: prometheus.NewDesc("pactledger_drill_last_run_timestamp_seconds", "When the latest drill of each kind finished (Unix time).", []string{"kind"}, nil),
		score: prometheus.NewDesc("pactledger_drill_last_score", "Share of checks the latest drill of each kind passed: 1 all passed (or nothing to drill), below 1 a pull failed.", []string{"kind"}, nil),
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

// refresh reads the reports stored since the last refresh.
func (d *drillStats) refresh(ctx context.Context) error {
	var token, first string
	seen := map[drill.Kind]bool{}
	for read := 0; read < maxDrillScan; {
		reps, next, err := d.drills.List(ctx, 100, token)
		if err != nil {
			return err
		}
		for _, r := range reps {
			if r.ID == d.newest {
				next = ""
				break
			}
			if first == "" {
				first = r.ID
			}
			if !seen[r.Kind] {
				seen[r.Kind] = true
				d.last[r.Kind] = summary{startedAt: r.StartedAt, finishedAt: r.FinishedAt, passed: r.ChecksPassed, total: r.ChecksTotal}
			}
		}
		read += len(reps)
		if next == "" {
			break
		}
		token = next
	}
	if first != "" {
		d.newest = first
	}
	return nil
}

// Describe implements prometheus.Collector.
func (d *drillStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.runAt
	ch <- d.score
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
// scheduled time.
func (s *Server) catchUpMonthly(ctx context.Context, sched drill.Schedule) {
	last, ran, err := s.drillStats.latest(ctx, drill.Monthly)
	if err != nil {
		s.log.WarnContext(ctx, "monthly drill: cannot tell whether a run was missed", slog.String("error", err.Error()))
		return
	}
	if !missedMonthly(sched, last, ran, time.Now()) {
		return
	}
	s.log.InfoContext(ctx, "monthly drill: a scheduled run was missed while ledgerd was down; running it now",
		slog.Time("last_run", last.startedAt), slog.Time("missed", lastScheduled(sched, time.Now())))
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
