package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
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

// viewDown is a row store whose reads fail while down.
type viewDown struct {
	ledger.Store
	down *atomic.Bool
}

func (s viewDown) View(ctx context.Context, fn func(ledger.Tx) error) error {
	if s.down.Load() {
		return errors.New("row store down")
	}
	return s.Store.View(ctx, fn)
}

// The stored drills cannot be read when ledgerd starts: the catch-up reads
// them again until it can tell, rather than guess. A ledger that never
// ran a monthly drill then runs none; one that missed a month runs it.
func TestACatchUpWaitsUntilItCanTell(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	sched := drill.Schedule{Day: 1, Hour: 3, Sample: 5}
	for _, tc := range []struct {
		name    string
		monthly bool // a monthly drill ran on 1 January
		want    time.Time
	}{
		{"never ran one", false, time.Time{}},
		{"missed February's", true, time.Date(2000, 2, 1, 3, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var down atomic.Bool
				r := newDrillRunnerOn(t, sc, time.Now, func(s ledger.Store) ledger.Store { return viewDown{Store: s, down: &down} })
				if tc.monthly {
					time.Sleep(3 * time.Hour) // 1 January 03:00
					if _, err := r.Run(context.Background(), drill.Request{Monthly: true, Sample: 5}, "scheduler"); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(40 * 24 * time.Hour) // 10 February
				down.Store(true)
				var log bytes.Buffer
				s := &Server{drills: r, drillStats: newDrillStats(r, slog.New(slog.DiscardHandler)), log: slog.New(slog.NewJSONHandler(&log, nil))}
				got := make(chan time.Time, 1)
				go func() { got <- s.catchUpMonthly(context.Background(), sched) }()
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				select {
				case m := <-got:
					t.Fatalf("the catch-up decided %v while the store could not be read", m)
				default:
				}
				down.Store(false)
				time.Sleep(time.Hour)
				synctest.Wait()
				select {
				case m := <-got:
					if !m.Equal(tc.want) {
						t.Errorf("the catch-up gives the scheduler %v, want %v; log:\n%s", m, tc.want, log.String())
					}
				default:
					t.Fatal("the catch-up did not decide once the store answered")
				}
				if ws := warnings(t, &log, "monthly drill: cannot tell whether a scheduled run was missed"); len(ws) == 0 {
					t.Errorf("no WARN while the store could not be read; log:\n%s", log.String())
				}
			})
		})
	}
}
