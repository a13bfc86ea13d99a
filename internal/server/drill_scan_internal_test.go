package server

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/drill"
)

// setDrillScan sets how many stored reports one read of the drill metrics
// takes at most, and how many a page, until t ends.
func setDrillScan(t *testing.T, max, page int) {
	t.Helper()
	oldMax, oldPage := maxDrillScan, drillScanPage
	maxDrillScan, drillScanPage = max, page
	t.Cleanup(func() { maxDrillScan, drillScanPage = oldMax, oldPage })
}

// pushedOut stores a monthly drill on 1 September, then n dispute drills
// after it, on a Runner reading clock.
func pushedOut(t *testing.T, clock *settableClock, n int) (*drill.Runner, *drill.Report) {
	t.Helper()
	ctx := context.Background()
	r := newDrillRunner(t, clock.Now)
	monthly, err := r.Run(ctx, drill.Request{Monthly: true, Sample: 5}, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		clock.Set(monthly.StartedAt.Add(time.Duration(i+1) * time.Hour))
		if _, err := r.Run(ctx, drill.Request{Target: "S-1"}, "support"); err != nil {
			t.Fatal(err)
		}
	}
	return r, monthly
}

// More dispute drills than one read takes were run after the last monthly
// drill, and ledgerd restarts after missing 1 October's: it has the
// scheduler run that one first rather than take the monthly drill for
// never run.
func TestCatchUpMonthlyPastOtherDrills(t *testing.T) {
	setDrillScan(t, 4, 2)
	clock := &settableClock{now: time.Date(2026, 9, 1, 3, 0, 0, 0, time.UTC)}
	r, monthly := pushedOut(t, clock, 10)
	restart := time.Date(2026, 10, 2, 8, 0, 0, 0, time.UTC)
	clock.Set(restart)

	var log bytes.Buffer
	stats := newDrillStats(r, slog.New(slog.NewJSONHandler(&log, nil)))
	stats.now = clock.Now
	s := &Server{drills: r, drillStats: stats, log: slog.New(slog.NewJSONHandler(&log, nil))}
	missed := s.catchUpMonthly(context.Background(), drill.Schedule{Day: 1, Hour: 3, Sample: 5})
	if want := time.Date(2026, 10, 1, 3, 0, 0, 0, time.UTC); !missed.Equal(want) {
		t.Errorf("the catch-up at %s gives the scheduler %s to run first, want %s (the last one started %s); log:\n%s", restart, missed, want, monthly.StartedAt, log.String())
	}
	if ws := warnings(t, &log, "monthly drill: the latest monthly report is not among the newest drill reports read"); len(ws) != 1 {
		t.Errorf("warnings = %v, want one saying why the monthly drill runs; log:\n%s", ws, log.String())
	}
}

// On a store where no monthly drill ever ran, after more dispute drills
// than one read takes, the monthly drill is at first not known to be
// missing; a few reads later it is, and the latest dispute drill is known
// from the first read.
func TestNoMonthlyDrillPastOtherDrills(t *testing.T) {
	setDrillScan(t, 4, 2)
	ctx := context.Background()
	clock := &settableClock{now: time.Date(2026, 9, 1, 3, 0, 0, 0, time.UTC)}
	r := newDrillRunner(t, clock.Now)
	var dispute *drill.Report
	for i := range 10 {
		clock.Set(time.Date(2026, 9, 1, 4, i, 0, 0, time.UTC))
		var err error
		if dispute, err = r.Run(ctx, drill.Request{Target: "S-1"}, "support"); err != nil {
			t.Fatal(err)
		}
	}
	stats := newDrillStats(r, slog.New(slog.DiscardHandler))
	stats.now = clock.Now
	got, ok, sure, err := stats.latestKnown(ctx, drill.Dispute)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || !sure || !got.startedAt.Equal(dispute.StartedAt) {
		t.Errorf("latest dispute drill: started %s (found %v, sure %v), want %s, sure", got.startedAt, ok, sure, dispute.StartedAt)
	}
	if _, ok, sure, _ := stats.latestKnown(ctx, drill.Monthly); ok || sure {
		t.Errorf("latest monthly drill after one read: found %v, sure %v, want not found, not sure", ok, sure)
	}
	for range 5 {
		if _, ok, sure, err = stats.latestKnown(ctx, drill.Monthly); err != nil || sure {
			break
		}
	}
	if ok || !sure || err != nil {
		t.Errorf("latest monthly drill after the store was read: found %v, sure %v, err %v, want none, sure", ok, sure, err)
	}
}

// The monthly drill's series stays on /metrics, with the last monthly
// drill's time, after more dispute drills than one read takes: after a
// restart it comes back within a few scrapes.
func TestMonthlyDrillMetricPastOtherDrills(t *testing.T) {
	setDrillScan(t, 4, 2)
	clock := &settableClock{now: time.Date(2026, 9, 1, 3, 0, 0, 0, time.UTC)}
	r, monthly := pushedOut(t, clock, 10)

	stats := newDrillStats(r, slog.New(slog.DiscardHandler))
	stats.now = clock.Now
	reg := prometheus.NewRegistry()
	reg.MustRegister(stats)
	want := float64(monthly.FinishedAt.UnixNano()) / 1e9
	scrapes := 0
	for {
		scrapes++
		if got, ok := gauge(t, reg, "pactledger_drill_last_run_timestamp_seconds", "monthly"); ok {
			if got != want {
				t.Errorf("pactledger_drill_last_run_timestamp_seconds{kind=monthly} = %v, want %v", got, want)
			}
			break
		}
		if scrapes == 5 { // 11 reports, 4 a scrape, less the newest read again
			t.Fatalf("after %d scrapes no pactledger_drill_last_run_timestamp_seconds{kind=monthly}, want %v", scrapes, want)
		}
	}

	// More dispute drills than one read takes: the series stays.
	ctx := context.Background()
	for i := range 9 {
		clock.Set(time.Date(2026, 9, 5, 0, i, 0, 0, time.UTC))
		if _, err := r.Run(ctx, drill.Request{Target: "S-1"}, "support"); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if got, ok := gauge(t, reg, "pactledger_drill_last_run_timestamp_seconds", "monthly"); !ok || got != want {
			t.Fatalf("after 9 more dispute drills: pactledger_drill_last_run_timestamp_seconds{kind=monthly} = %v (there: %v), want %v", got, ok, want)
		}
	}
}
