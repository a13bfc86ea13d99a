package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/internal/freeport"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	s3store "github.com/pactledger/pactledger/storage/s3"
)

// clockHarness is a harness whose ledger checks its clock against clocks
// before a sweep deletes anything, its evidence in objects (nil: a local
// directory), its clock set to real time. It counts refused sweeps in reg.
func clockHarness(t *testing.T, objects ledger.ObjectStore, clocks ...ledger.ReferenceClock) (*harness, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects, logs: &syncbuf.Buffer{},
		metrics: ledger.NewMetrics(reg), clocks: clocks}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC().Truncate(time.Second))
	h.open(t)
	return h, reg
}

// s3Evidence opens a fresh bucket on the test's S3 server.
func s3Evidence(t *testing.T) *s3store.Store {
	t.Helper()
	objects, err := s3store.Open(context.Background(), s3store.Config{Endpoint: s3srv.Endpoint, Bucket: s3test.Bucket(), AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	return objects
}

// switchedClock is the S3 evidence store's clock as objects reads it,
// until the returned flag is set; then as endpoint's S3 service answers
// (a port nothing listens on: down; s3test.WithoutDate: no time).
func switchedClock(t *testing.T, objects *s3store.Store, endpoint string) (ledger.ReferenceClock, *atomic.Bool) {
	t.Helper()
	then, err := s3store.New(s3store.Config{Endpoint: endpoint, Bucket: "evidence", AccessKey: "k", SecretKey: "s", Insecure: true, CheckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	switched := new(atomic.Bool)
	return ledger.ReferenceClock{Name: "the S3 evidence store", Now: func(ctx context.Context) (time.Time, error) {
		if switched.Load() {
			return then.ServerTime(ctx)
		}
		return objects.ServerTime(ctx)
	}}, switched
}

// refusedSweeps checks the count of retention sweeps refused for each
// reason.
func refusedSweeps(t *testing.T, reg *prometheus.Registry, ahead, unread int) {
	t.Helper()
	if got := refusedBy(t, reg, "rows"); got["clock_ahead"] != ahead || got["clock_unread"] != unread {
		t.Fatalf("pactledger_sweeps_refused_total{sweep=\"rows\"}: got %v, want %v", got, map[string]int{"clock_ahead": ahead, "clock_unread": unread})
	}
}

// TestSweepDeletesNothingWhenItsClockIsAheadOfS3: the ledger's clock steps
// 19 months forward for one sweep (NTP gone wrong, or an operator). The S3
// server's clock has not moved: the sweep deletes nothing, says why with
// both times (its error, a dry run's, the sweeper's log at ERROR) and
// counts the refusal; once the clock is back the row is there.
func TestSweepDeletesNothingWhenItsClockIsAheadOfS3(t *testing.T) {
	ctx := context.Background()
	objects := s3Evidence(t)
	h, reg := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
	real := h.clock()
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "STEP-1", At: real})))
	h.drain(t)

	step := real.AddDate(0, 19, 0)
	h.set(step)
	res, err := h.l.Sweep(ctx, false)
	if _, gerr := h.l.Get(ctx, row.ID); errors.Is(gerr, ledger.ErrExpired) {
		t.Fatalf("a sweep at a clock 19 months ahead of the S3 server's removed row %s (retain-until %s) recorded just now: swept %d, err %v",
			row.ID, row.RetainUntil.Format(time.RFC3339), len(res.Swept), err)
	}
	var ahead *ledger.ClockAheadError
	if !errors.As(err, &ahead) || !errors.Is(err, ledger.ErrClockAhead) {
		t.Fatalf("sweep at a clock 19 months ahead: result %+v, error %v; want a *ClockAheadError", res, err)
	}
	if !ahead.Local.Equal(step) || ahead.Reference.Sub(real).Abs() > time.Minute || ahead.Clock != "the S3 evidence store" {
		t.Fatalf("the error says the ledger's clock is %s and %s's %s; want %s and about %s", ahead.Local, ahead.Clock, ahead.Reference, step, real)
	}
	if _, err := h.l.Sweep(ctx, true); !errors.Is(err, ledger.ErrClockAhead) {
		t.Fatalf("a dry run at the same clock: %v; want it to say the clock is ahead", err)
	}
	refusedSweeps(t, reg, 1, 0) // the dry run is not counted

	// The sweeper's own run logs it at ERROR with both times.
	sweeperCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.l.RunSweeper(sweeperCtx, time.Hour) }()
	h.within(t, "the sweeper logged its refusal", func() bool { return strings.Contains(h.logs.String(), "retention sweep deleted nothing") })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	logged := h.logs.String()
	for _, want := range []string{"level=ERROR", "ledger_time=" + step.Format("2006-01-02T15:04:05"), "reference_time=", `clock="the S3 evidence store"`} {
		if !strings.Contains(logged, want) {
			t.Errorf("the sweeper's log lacks %q:\n%s", want, logged)
		}
	}
	refusedSweeps(t, reg, 2, 0)

	h.set(real.Add(24 * time.Hour))
	if _, err := h.l.Get(ctx, row.ID); err != nil {
		t.Fatalf("the row a day after it was recorded: %v", err)
	}
}

// TestSweepProceedsWhenItsClockIsRightOrBehindS3: a clock that agrees
// with the S3 server's, within the tolerance, or runs behind it (a sweep
// then removes rows late, never early) sweeps as ever.
func TestSweepProceedsWhenItsClockIsRightOrBehindS3(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  time.Duration // the ledger's clock less real time
	}{
		{"right", 0},
		{"ahead within the tolerance", ledger.ClockTolerance - time.Minute},
		{"behind", -14 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objects := s3Evidence(t)
			h, reg := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
			real := h.clock()
			// Recorded 19 months ago: due a month ago.
			h.set(real.AddDate(0, -19, 0))
			row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "DUE-1", At: h.clock()})))
			h.set(real)
			h.drain(t)
			res := h.sweepAt(t, real.Add(tc.off))
			if _, ok := ids(res.Swept)[row.ID]; !ok {
				t.Fatalf("row %s due %s not swept at %s: swept %v, kept %v", row.ID, row.RetainUntil.Format(time.RFC3339), res.At.Format(time.RFC3339), ids(res.Swept), ids(res.Kept))
			}
			refusedSweeps(t, reg, 0, 0)
		})
	}
}

// TestSweepDeletesNothingWithoutItsReferenceClock: a reference clock that
// cannot be read (the S3 service down) is no licence to sweep by the
// ledger's clock alone: the sweep deletes nothing and the rows wait.
func TestSweepDeletesNothingWithoutItsReferenceClock(t *testing.T) {
	ctx := context.Background()
	down, err := s3store.New(s3store.Config{Endpoint: freeport.Addr(t), Bucket: "evidence", AccessKey: "k", SecretKey: "s", Insecure: true, CheckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, reg := clockHarness(t, nil, ledger.ReferenceClock{Name: "the S3 evidence store", Now: down.ServerTime})
	real := h.clock()
	h.set(real.AddDate(0, -19, 0))
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "DUE-2", At: h.clock()})))
	h.set(real)
	h.drain(t)

	res, err := h.l.Sweep(ctx, false)
	if !errors.Is(err, ledger.ErrClockUnread) || !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("sweep with the S3 server down: result %+v, error %v; want ErrClockUnread", res, err)
	}
	if _, err := h.l.Get(ctx, row.ID); err != nil {
		t.Fatalf("the due row after a sweep that could not read the S3 server's clock: %v", err)
	}
	if _, err := h.l.Sweep(ctx, true); !errors.Is(err, ledger.ErrClockUnread) {
		t.Fatalf("a dry run with the S3 server down: %v; want ErrClockUnread", err)
	}
	refusedSweeps(t, reg, 0, 1)
}

// TestSweepWithoutReferenceClocksTrustsItsOwn: a bbolt row store with a
// local evidence directory has one clock, the host's, and sweeps by it.
func TestSweepWithoutReferenceClocksTrustsItsOwn(t *testing.T) {
	h, reg := clockHarness(t, nil)
	real := h.clock()
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "ONE-1", At: real})))
	h.drain(t)
	res := h.sweepAt(t, real.AddDate(0, 19, 0))
	if _, ok := ids(res.Swept)[row.ID]; !ok {
		t.Fatalf("row %s due %s not swept at %s: swept %v, kept %v", row.ID, row.RetainUntil.Format(time.RFC3339), res.At.Format(time.RFC3339), ids(res.Swept), ids(res.Kept))
	}
	refusedSweeps(t, reg, 0, 0)
}

// TestAReferenceThatGivesNoTimeIsPassedOver: a reference that answers
// without a time (an S3 service that sends no Date header) is no clock to
// check against, as a local evidence directory is none: the sweep checks
// the others, says so, and sweeps.
func TestAReferenceThatGivesNoTimeIsPassedOver(t *testing.T) {
	objects, err := s3store.New(s3store.Config{Endpoint: s3test.WithoutDate(t), Bucket: "evidence", AccessKey: "k", SecretKey: "s", Insecure: true, CheckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, reg := clockHarness(t, nil, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
	real := h.clock()
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "NODATE-1", At: real})))
	h.drain(t)
	res := h.sweepAt(t, real.AddDate(0, 19, 0))
	if _, ok := ids(res.Swept)[row.ID]; !ok {
		t.Fatalf("row %s due %s not swept at %s with a reference that gives no time: swept %v", row.ID, row.RetainUntil.Format(time.RFC3339), res.At.Format(time.RFC3339), ids(res.Swept))
	}
	if !strings.Contains(h.logs.String(), "a reference clock gives no time") {
		t.Errorf("the sweep did not say the S3 evidence store gives no time:\n%s", h.logs.String())
	}
	refusedSweeps(t, reg, 0, 0)
}

// TestASweepItsClockStoppedIsTriedAgainSoon: a sweep that could not read
// the S3 server's clock (down for the seconds of its check) is tried
// again a minute later, not a sweep interval (an hour) later, so due rows
// do not wait an interval for one failed reading.
func TestASweepItsClockStoppedIsTriedAgainSoon(t *testing.T) {
	defer ledger.SetSweepClockRetry(50 * time.Millisecond)()
	objects := s3Evidence(t)
	var reads atomic.Int64
	s3Clock := func(ctx context.Context) (time.Time, error) {
		if reads.Add(1) == 1 {
			return time.Time{}, errors.New("connection refused")
		}
		return objects.ServerTime(ctx)
	}
	h, reg := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: s3Clock})
	real := h.clock()
	h.set(real.AddDate(0, -19, 0))
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "DUE-3", At: h.clock()})))
	h.set(real)
	h.drain(t)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.l.RunSweeper(ctx, time.Hour) }()
	h.within(t, "the due row swept after the first sweep could not read the clock", func() bool {
		_, err := h.l.Get(context.Background(), row.ID)
		return errors.Is(err, ledger.ErrExpired)
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	refusedSweeps(t, reg, 0, 1)
}

// TestASweepDoesNotPassOverAReferenceThatGaveATime: the S3 server's clock
// read by one sweep, then answering without a time (a proxy answering
// for it while it is down), is no licence for the next sweep to delete by
// the ledger's clock alone: it deletes nothing, as with the server down.
func TestASweepDoesNotPassOverAReferenceThatGaveATime(t *testing.T) {
	objects := s3Evidence(t)
	clock, dropped := switchedClock(t, objects, s3test.WithoutDate(t))
	h, reg := clockHarness(t, objects, clock)
	real := h.clock()
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "GAVE-1", At: real})))
	h.drain(t)
	if _, err := h.l.Sweep(context.Background(), false); err != nil {
		t.Fatalf("a sweep with the clocks agreeing: %v", err)
	}
	dropped.Store(true)
	h.set(real.AddDate(0, 19, 0))
	res, err := h.l.Sweep(context.Background(), false)
	if !errors.Is(err, ledger.ErrClockUnread) {
		t.Fatalf("a sweep at a clock 19 months ahead, the S3 server now answering without a time: %+v, %v; want ErrClockUnread", res, err)
	}
	if _, err := h.l.Get(context.Background(), row.ID); err != nil {
		t.Fatalf("the row after that sweep: %v", err)
	}
	refusedSweeps(t, reg, 0, 1)
}
