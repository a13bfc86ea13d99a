package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

func TestMissedMonthly(t *testing.T) {
	sched := drill.Schedule{Day: 1, Hour: 3, Minute: 0, Sample: 5}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name      string
		last      string // "" for no monthly report yet
		now       string
		wantPrev  string
		wantCatch bool
	}{
		{"never ran: nothing missed", "", "2026-10-07T12:00:00Z", "2026-10-01T03:00:00Z", false},
		{"ran at the last scheduled time", "2026-10-01T03:00:00Z", "2026-10-20T12:00:00Z", "2026-10-01T03:00:00Z", false},
		{"ran by hand after it", "2026-10-05T09:00:00Z", "2026-10-20T12:00:00Z", "2026-10-01T03:00:00Z", false},
		// As the scheduler counts a slot's run: a monthly drill started
		// up to five minutes before it (by hand, or by a ledgerd whose
		// clock is a little ahead).
		{"ran by hand three minutes before it", "2026-10-01T02:57:00Z", "2026-10-02T08:00:00Z", "2026-10-01T03:00:00Z", false},
		{"ran six minutes before it", "2026-10-01T02:54:00Z", "2026-10-02T08:00:00Z", "2026-10-01T03:00:00Z", true},
		{"down over the 1st", "2026-09-01T03:00:00Z", "2026-10-02T08:00:00Z", "2026-10-01T03:00:00Z", true},
		{"down for months", "2026-06-01T03:00:00Z", "2026-10-20T12:00:00Z", "2026-10-01T03:00:00Z", true},
		{"before this month's time", "2026-09-01T03:00:00Z", "2026-10-01T02:59:00Z", "2026-09-01T03:00:00Z", false},
		{"at this month's time", "2026-09-01T03:00:00Z", "2026-10-01T03:00:00Z", "2026-10-01T03:00:00Z", true},
		{"across a year", "2026-11-01T03:00:00Z", "2027-01-15T00:00:00Z", "2027-01-01T03:00:00Z", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.now)
			if got := lastScheduled(sched, now); !got.Equal(at(tc.wantPrev)) {
				t.Errorf("lastScheduled = %s, want %s", got, tc.wantPrev)
			}
			var last summary
			if tc.last != "" {
				last.startedAt = at(tc.last)
			}
			if got := missedMonthly(sched, last, tc.last != "", now); got != tc.wantCatch {
				t.Errorf("missedMonthly = %v, want %v", got, tc.wantCatch)
			}
		})
	}
}

// newDrillRunner returns a Runner on a ledger of its own, both reading
// now.
func newDrillRunner(t *testing.T, now func() time.Time) *drill.Runner {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	return newDrillRunnerOn(t, sc, now, nil)
}

// newDrillRunnerOn is newDrillRunner for the scenario sc, its row store
// wrapped by wrap unless nil.
func newDrillRunnerOn(t *testing.T, sc *pacttest.Scenario, now func() time.Time, wrap func(ledger.Store) ledger.Store) *drill.Runner {
	t.Helper()
	dir := t.TempDir()
	b, err := bolt.Open(filepath.Join(dir, "l.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var store ledger.Store = b
	if wrap != nil {
		store = wrap(store)
	}
	objects, err := localdir.Open(filepath.Join(dir, "ev"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: sc.Audience})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(store, objects, v, sc.Static(now()), ledger.Config{Logger: slog.New(slog.DiscardHandler), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return drill.New(l, drill.Config{Now: now})
}

// settableClock is a clock a test sets.
type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *settableClock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// gauge returns the value of the unlabelled or kind-labelled series name
// that reg gathers, and whether there is one.
func gauge(t *testing.T, reg *prometheus.Registry, name, kind string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k string
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "kind" {
					k = lp.GetValue()
				}
			}
			if k == kind {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// warnings returns the WARN records of a JSON log whose message starts
// with prefix.
func warnings(t *testing.T, log *bytes.Buffer, prefix string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if msg, _ := rec["msg"].(string); rec["level"] == "WARN" && strings.HasPrefix(msg, prefix) {
			out = append(out, rec)
		}
	}
	return out
}

// A monthly drill run while the clock was a year ahead is dated a year
// ahead, and report ids sort by start time. It is not the latest monthly
// drill: the metrics show the drill run after the clock was corrected, a
// month missed after that is caught up, and the report dated ahead is
// logged once and counted.
func TestDrillReportDatedAheadIsNotTheLatest(t *testing.T) {
	ctx := context.Background()
	current := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	clock := &settableClock{now: current.AddDate(1, 0, 0)}
	r := newDrillRunner(t, clock.Now)
	ahead, err := r.Run(ctx, drill.Request{Monthly: true, Sample: 5}, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(current) // corrected
	latest, err := r.Run(ctx, drill.Request{Monthly: true, Sample: 5}, "scheduler")
	if err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	stats := newDrillStats(r, slog.New(slog.NewJSONHandler(&log, nil)))
	reg := prometheus.NewRegistry()
	reg.MustRegister(stats)
	got, ran, err := stats.latest(ctx, drill.Monthly)
	if err != nil {
		t.Fatal(err)
	}
	if !ran || !got.startedAt.Equal(latest.StartedAt) {
		t.Fatalf("latest monthly drill started %s (found %v), want %s, not the one dated ahead (%s)", got.startedAt, ran, latest.StartedAt, ahead.StartedAt)
	}
	sched := drill.Schedule{Day: 1, Hour: 3, Sample: 5}
	restart := sched.Next(latest.StartedAt).Add(24 * time.Hour) // down over the next scheduled time
	if !missedMonthly(sched, got, ran, restart) {
		t.Errorf("at %s, the drill scheduled after %s was missed, but missedMonthly is false", restart, latest.StartedAt)
	}

	runAt, _ := gauge(t, reg, "pactledger_drill_last_run_timestamp_seconds", "monthly")
	if want := float64(latest.FinishedAt.UnixNano()) / 1e9; runAt != want {
		t.Errorf("pactledger_drill_last_run_timestamp_seconds{kind=monthly} = %v, want %v (the drill dated ahead finished at %v)", runAt, want, float64(ahead.FinishedAt.UnixNano())/1e9)
	}
	if n, _ := gauge(t, reg, "pactledger_drill_reports_dated_ahead", ""); n != 1 {
		t.Errorf("pactledger_drill_reports_dated_ahead = %v, want 1", n)
	}
	ws := warnings(t, &log, "drill report dated ahead of the clock")
	if len(ws) != 1 || ws[0]["drill"] != ahead.ID || ws[0]["started_at"] != ahead.StartedAt.Format(time.RFC3339Nano) {
		t.Errorf("warnings after two reads = %v, want one naming %s started at %s", ws, ahead.ID, ahead.StartedAt.Format(time.RFC3339Nano))
	}
}

// A ledgerd that read the stored reports while its clock was ahead took
// the report dated ahead as the latest, rightly at the time. Once the
// clock is corrected it reads the reports again and the drills before
// it are the latest; once the clock passes its start, it is the latest
// again.
func TestDrillReportDatedAheadAcrossClockCorrection(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 10, 1, 3, 0, 0, 0, time.UTC)
	clock := &settableClock{now: start}
	r := newDrillRunner(t, clock.Now)
	run := func() *drill.Report {
		t.Helper()
		rep, err := r.Run(ctx, drill.Request{Monthly: true, Sample: 5}, "scheduler")
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	var log bytes.Buffer
	stats := newDrillStats(r, slog.New(slog.NewJSONHandler(&log, nil)))
	stats.now = clock.Now
	reg := prometheus.NewRegistry()
	reg.MustRegister(stats)
	check := func(step string, want *drill.Report, wantAhead float64) {
		t.Helper()
		got, ran, err := stats.latest(ctx, drill.Monthly)
		if err != nil {
			t.Fatal(err)
		}
		if !ran || !got.startedAt.Equal(want.StartedAt) {
			t.Errorf("%s: latest monthly drill started %s (found %v), want %s", step, got.startedAt, ran, want.StartedAt)
		}
		if n, _ := gauge(t, reg, "pactledger_drill_reports_dated_ahead", ""); n != wantAhead {
			t.Errorf("%s: pactledger_drill_reports_dated_ahead = %v, want %v", step, n, wantAhead)
		}
	}

	oct := run()
	check("October", oct, 0)
	clock.Set(start.AddDate(1, 0, 0)) // the clock steps a year ahead
	ahead := run()
	check("clock ahead", ahead, 0)
	clock.Set(start.AddDate(0, 1, 0)) // corrected on 1 November
	check("corrected", oct, 1)
	nov := run()
	check("November", nov, 1)
	clock.Set(ahead.StartedAt.Add(time.Hour))
	check("past the report dated ahead", ahead, 0)

	if ws := warnings(t, &log, "drill report dated ahead of the clock"); len(ws) != 1 || ws[0]["drill"] != ahead.ID {
		t.Errorf("warnings = %v, want one naming %s", ws, ahead.ID)
	}
}
