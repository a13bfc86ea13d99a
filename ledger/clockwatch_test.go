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
)

// watchClocks runs h's clock watch until the test ends, once it has read
// every reference clock that answers.
func watchClocks(t *testing.T, h *harness) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.l.RunClockWatch(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("clock watch: %v", err)
		}
	})
	h.within(t, "the clock watch read its references", func() bool { return len(h.l.ClockStates()) > 0 })
}

// gaugeValue is the value of the metric name without labels in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// everyWrite makes each kind of write the clock refuses once, at the
// ledger's clock now, and returns their errors by name. row is a recorded
// row; an incident's close is tried on an unknown id (the clock is
// checked first).
func everyWrite(h *harness, row string) map[string]error {
	ctx := context.Background()
	errs := map[string]error{}
	_, _, errs["AppendReceipt"] = h.l.AppendReceipt(ctx, in(h.sc.Mint(pacttest.Spec{Target: "W-" + h.clock().Format("150405.000000000"), At: h.clock()})))
	_, errs["AppendRefusal"] = h.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedAgent: "agent", Tool: "cancel_order", Target: "A-1", Reason: "chat yes", ObservedAt: h.clock()})
	_, errs["AppendDispute"] = h.l.AppendDispute(ctx, row, ledger.DisputeOpen, "customer says no", "support")
	_, errs["CloseIncident"] = h.l.CloseIncident(ctx, "inc-none", "closed", "support")
	return errs
}

// TestWritesAreRefusedWhileTheClockIsOff: the ledger's clock steps ten
// minutes back (NTP gone wrong, or an operator) between two readings of
// the S3 server's. Every row recorded then would be kept ten minutes too
// short and dated ten minutes early: from the step on, no write is taken
// (each says why, UNAVAILABLE to the writer), nothing is recorded, the
// refusal is logged once at ERROR and counted; once the clock is back,
// writes are taken again. A step ahead is refused the same way: a row
// would be dated late. A revocation is taken, and logged: a compromised
// grant must be stoppable while the clock is put right.
func TestWritesAreRefusedWhileTheClockIsOff(t *testing.T) {
	for _, tc := range []struct {
		name, way string
		step      time.Duration
	}{
		{"behind", "behind", -10 * time.Minute},
		{"ahead", "ahead of", 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			objects := s3Evidence(t)
			h, reg := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
			real := h.clock()
			watchClocks(t, h)
			row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "BEFORE", At: real})))
			for name, err := range everyWrite(h, row.ID) {
				if errors.Is(err, ledger.ErrClockOff) {
					t.Fatalf("%s with the clocks agreeing: %v", name, err)
				}
			}

			h.set(real.Add(tc.step))
			before, _, err := h.l.List(ctx, ledger.Query{PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			for name, err := range everyWrite(h, row.ID) {
				var off *ledger.ClockOffError
				if !errors.As(err, &off) || !errors.Is(err, ledger.ErrUnavailable) {
					t.Fatalf("%s at a clock %s off the S3 server's: %v; want a *ClockOffError", name, tc.step, err)
				}
				// The S3 server's Date is in whole seconds.
				if !strings.Contains(err.Error(), " "+tc.way+" the clock of the S3 evidence store") || off.Off.Round(time.Minute) != tc.step {
					t.Errorf("%s: %q (off %s); want it to say the clock is 10 minutes %s the S3 server's", name, err, off.Off, tc.way)
				}
			}
			after, _, err := h.l.List(ctx, ledger.Query{PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(after) != len(before) {
				t.Fatalf("rows while the clock was off: %d, before %d; want none recorded", len(after), len(before))
			}
			if got, _ := h.l.Get(ctx, row.ID); got.Dispute != ledger.DisputeOpen || len(got.DisputeEvents) != 1 {
				t.Fatalf("row %s has %d dispute events after a refused one; want the one taken before", row.ID, len(got.DisputeEvents))
			}
			if n := strings.Count(h.logs.String(), "writes refused: the ledger's clock is off a reference clock"); n != 1 {
				t.Errorf("the refusal is logged %d times; want once:\n%s", n, h.logs.String())
			}
			if v := gaugeValue(t, reg, "pactledger_clock_off"); v != 1 {
				t.Errorf("pactledger_clock_off = %v while writes are refused; want 1", v)
			}
			if v := gaugeValue(t, reg, "pactledger_clock_refused_writes_total"); v != 4 {
				t.Errorf("pactledger_clock_refused_writes_total = %v; want 4", v)
			}
			rev, err := h.l.RevokeGrant(ctx, "grant-compromised", time.Time{}, "stop it", "admin", true)
			if err != nil {
				t.Fatalf("a revocation while the clock is off: %v; want it taken", err)
			}
			// In force from the earlier of the two clocks: a clock ahead
			// would let receipts served meanwhile pass as before it.
			earliest := real
			if tc.step < 0 {
				earliest = real.Add(tc.step)
			}
			if rev.RevokedAt.Sub(earliest).Abs() > 3*time.Second {
				t.Errorf("a revocation at a clock %s off: in force from %s, want about %s", tc.step, rev.RevokedAt, earliest)
			}
			if !strings.Contains(h.logs.String(), "revocation_of_grant=grant-compromised") {
				t.Errorf("the revocation taken while the clock is off is not logged:\n%s", h.logs.String())
			}
			states := h.l.ClockStates()
			if len(states) != 1 || states[0].OK || states[0].Off.Round(time.Minute) != tc.step {
				t.Errorf("clock states %+v; want the S3 evidence store's, %s off", states, tc.step)
			}

			h.set(real)
			for name, err := range everyWrite(h, row.ID) {
				if errors.Is(err, ledger.ErrClockOff) {
					t.Fatalf("%s with the clock back: %v", name, err)
				}
			}
			h.within(t, "writes taken again, logged", func() bool { return strings.Contains(h.logs.String(), "writes taken again") })
			if v := gaugeValue(t, reg, "pactledger_clock_off"); v != 0 {
				t.Errorf("pactledger_clock_off = %v with the clock back; want 0", v)
			}
		})
	}
}

// TestWritesAreRefusedWhenTheClockIsOffAtStart: a ledger whose clock is an
// hour behind when it starts records nothing from the first reading of
// the S3 server's clock; writes before that reading are not checked.
func TestWritesAreRefusedWhenTheClockIsOffAtStart(t *testing.T) {
	objects := s3Evidence(t)
	h, _ := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
	real := h.clock()
	h.set(real.Add(-time.Hour))
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "UNREAD", At: h.clock()})))
	watchClocks(t, h)
	_, _, err := h.l.AppendReceipt(context.Background(), in(h.sc.Mint(pacttest.Spec{Target: "READ", At: h.clock()})))
	var off *ledger.ClockOffError
	if !errors.As(err, &off) || off.Off.Round(time.Minute) != -time.Hour || !strings.Contains(err.Error(), " behind the clock of the S3 evidence store") {
		t.Fatalf("a receipt at a clock an hour behind the S3 server's: %v; want it refused", err)
	}
}

// TestAStepIsSeenWithoutAReading: once read, a reference that cannot be
// read again (the S3 service down) still checks writes: a step of the
// ledger's clock since the last reading is seen by the host's monotonic
// clock, which does not step.
func TestAStepIsSeenWithoutAReading(t *testing.T) {
	objects := s3Evidence(t)
	clock, down := switchedClock(t, objects, freeport.Addr(t))
	h, _ := clockHarness(t, objects, clock)
	real := h.clock()
	watchClocks(t, h)
	down.Store(true)
	h.set(real.Add(-10 * time.Minute))
	if _, _, err := h.l.AppendReceipt(context.Background(), in(h.sc.Mint(pacttest.Spec{Target: "STEP", At: h.clock()}))); !errors.Is(err, ledger.ErrClockOff) {
		t.Fatalf("a receipt after a step of ten minutes back, the S3 server down since its last reading: %v; want it refused", err)
	}
	// The refused write asked for a reading, which fails: the last one
	// still counts, and the error is shown.
	h.within(t, "the failed reading is shown", func() bool {
		st := h.l.ClockStates()
		return len(st) == 1 && st[0].Err != nil
	})
	if st := h.l.ClockStates()[0]; st.OK || st.Err == nil {
		t.Fatalf("clock state %+v; want off, with the failed reading's error", st)
	}
	h.set(real)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "BACK", At: h.clock()})))
}

// TestWithoutReferenceClocksWritesAreNotChecked: the embedded default
// (bbolt and a local evidence directory) has the host's clock alone:
// the watch has nothing to read and every clock is taken.
func TestWithoutReferenceClocksWritesAreNotChecked(t *testing.T) {
	h, _ := clockHarness(t, nil)
	if err := h.l.RunClockWatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.set(h.clock().AddDate(-1, 0, 0))
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "ALONE", At: h.clock()})))
	if st := h.l.ClockStates(); len(st) != 0 {
		t.Fatalf("clock states %+v without references; want none", st)
	}
}

// TestWritesAreTakenAgainOnlyWellInsideTheTolerance: a reading jitters by
// a second (an S3 Date is in whole seconds): once refused, writes are
// taken again only when the clock is back inside the tolerance by more
// than that, so that a clock at the limit does not take and refuse them
// by turns.
func TestWritesAreTakenAgainOnlyWellInsideTheTolerance(t *testing.T) {
	objects := s3Evidence(t)
	h, _ := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
	real := h.clock()
	watchClocks(t, h)
	try := func(off time.Duration) error {
		h.set(real.Add(off))
		_, _, err := h.l.AppendReceipt(context.Background(), in(h.sc.Mint(pacttest.Spec{Target: "J-" + off.String(), At: h.clock()})))
		return err
	}
	if err := try(-ledger.ClockTolerance - 10*time.Second); !errors.Is(err, ledger.ErrClockOff) {
		t.Fatalf("10 s past the tolerance: %v; want refused", err)
	}
	if err := try(-ledger.ClockTolerance + time.Second); !errors.Is(err, ledger.ErrClockOff) {
		t.Fatalf("back just inside the tolerance, within a reading's jitter: %v; want still refused", err)
	}
	if err := try(-ledger.ClockTolerance + 10*time.Second); err != nil {
		t.Fatalf("10 s inside the tolerance: %v; want taken", err)
	}
	if err := try(-ledger.ClockTolerance + time.Second); err != nil {
		t.Fatalf("just inside the tolerance, having been taken: %v; want taken", err)
	}
}

// TestAReferenceThatStopsGivingATimeKeepsItsReading: a reference read
// once that then answers without a time (a proxy put in front of it, or
// one answering for it while it is down) is not passed over: it is
// unread, its last reading stands, and a step of the ledger's clock is
// still refused; /readyz's state says it could not be read.
func TestAReferenceThatStopsGivingATimeKeepsItsReading(t *testing.T) {
	objects := s3Evidence(t)
	clock, dropped := switchedClock(t, objects, s3test.WithoutDate(t))
	h, _ := clockHarness(t, objects, clock)
	real := h.clock()
	watchClocks(t, h)
	dropped.Store(true)
	h.set(real.Add(-10 * time.Minute))
	try := func(target string) error {
		_, _, err := h.l.AppendReceipt(context.Background(), in(h.sc.Mint(pacttest.Spec{Target: target, At: h.clock()})))
		return err
	}
	if err := try("ND-1"); !errors.Is(err, ledger.ErrClockOff) {
		t.Fatalf("a step before the reference was read again: %v; want refused", err)
	}
	// The refused write asks for a reading, which gives no time.
	h.within(t, "the reference read again, giving no time", func() bool {
		st := h.l.ClockStates()
		return len(st) == 1 && st[0].Err != nil
	})
	if st := h.l.ClockStates()[0]; st.OK || st.NoTime || !errors.Is(st.Err, ledger.ErrClockUnread) {
		t.Fatalf("clock state %+v of a reference that gave a time and now gives none; want unread, its last reading standing", st)
	}
	if err := try("ND-2"); !errors.Is(err, ledger.ErrClockOff) {
		t.Fatalf("a receipt after the reference stopped giving a time, the clock still off: %v; want refused", err)
	}
	h.set(real)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "ND-3", At: h.clock()})))
}

// TestASlowReferenceDoesNotHoldBackAnother: the references are read at
// once: one that does not answer (S3 black-holed) does not hold back the
// other's reading (the database's), by which a clock ten minutes behind
// refuses writes.
func TestASlowReferenceDoesNotHoldBackAnother(t *testing.T) {
	objects := s3Evidence(t)
	release := make(chan struct{})
	defer close(release)
	silent := func(context.Context) (time.Time, error) {
		<-release // answers nothing, whatever its deadline
		return time.Time{}, errors.New("no answer")
	}
	h, _ := clockHarness(t, objects, ledger.ReferenceClock{Name: "a silent server", Now: silent}, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
	h.set(h.clock().Add(-10 * time.Minute))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = h.l.RunClockWatch(ctx) }()
	h.within(t, "writes refused by the answering reference's reading, the other not answering", func() bool {
		_, _, err := h.l.AppendReceipt(context.Background(), in(h.sc.Mint(pacttest.Spec{Target: "SLOW-" + time.Now().Format("150405.000000000"), At: h.clock()})))
		return errors.Is(err, ledger.ErrClockOff)
	})
}

// stepBeforeUpdate steps its harness's clock to at before the first
// write transaction it runs: after a write's check on the way in, before
// the row is stamped.
type stepBeforeUpdate struct {
	ledger.Store
	h  *harness
	at *atomic.Pointer[time.Time]
}

func (s stepBeforeUpdate) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	if at := s.at.Swap(nil); at != nil {
		s.h.set(*at)
	}
	return s.Store.Update(ctx, fn)
}

// TestAStepAfterTheCheckIsNotRecorded: the clock steps ten minutes back
// after a write's check on the way in and before its row is stamped (a
// key fetch, the wait for a commit): the row is not recorded by the
// stepped clock; the write is refused as any after the step.
func TestAStepAfterTheCheckIsNotRecorded(t *testing.T) {
	objects := s3Evidence(t)
	var at atomic.Pointer[time.Time]
	reg := prometheus.NewRegistry()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects, logs: &syncbuf.Buffer{},
		metrics: ledger.NewMetrics(reg), clocks: []ledger.ReferenceClock{{Name: "the S3 evidence store", Now: objects.ServerTime}}}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC().Truncate(time.Second))
	h.wrap = func(s ledger.Store) ledger.Store { return stepBeforeUpdate{Store: s, h: h, at: &at} }
	h.open(t)
	real := h.clock()
	watchClocks(t, h)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "BEFORE-STEP", At: real})))
	for _, write := range []struct {
		name string
		do   func() error
	}{
		{"receipt", func() error {
			_, _, err := h.l.AppendReceipt(context.Background(), in(h.sc.Mint(pacttest.Spec{Target: "STEPPED", At: real})))
			return err
		}},
		{"refusal", func() error {
			_, err := h.l.AppendRefusal(context.Background(), ledger.RefusalInput{ClaimedAgent: "agent", Tool: "cancel_order", Target: "A-9", Reason: "chat yes", ObservedAt: real})
			return err
		}},
		{"dispute event", func() error {
			_, err := h.l.AppendDispute(context.Background(), row.ID, ledger.DisputeOpen, "customer says no", "support")
			return err
		}},
	} {
		h.set(real)
		step := real.Add(-10 * time.Minute)
		at.Store(&step)
		if err := write.do(); !errors.Is(err, ledger.ErrClockOff) {
			t.Errorf("a %s whose clock stepped ten minutes back after its check: %v; want refused", write.name, err)
		}
	}
	if got, _ := h.l.Get(context.Background(), row.ID); len(got.DisputeEvents) != 0 {
		t.Errorf("row %s has %d dispute events, want none", row.ID, len(got.DisputeEvents))
	}
}

// TestADrillSavedByAClockBehindIsNotKeptShorter: a drill report saved
// while the ledger's clock runs a year behind the S3 server's (writes are
// refused meanwhile, a drill's report is not) is kept in write-once
// storage as long as one saved by a right clock: its retention counts
// from the reference's time.
func TestADrillSavedByAClockBehindIsNotKeptShorter(t *testing.T) {
	ctx := context.Background()
	objects := s3Evidence(t)
	h, _ := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
	real := h.clock()
	watchClocks(t, h)
	behind := real.AddDate(-1, 0, 0)
	h.set(behind)
	id := ledger.NewDrillID(behind)
	if err := h.l.SaveDrill(ctx, id, behind, []byte(`{"kind":"dispute"}`)); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	_, loc, err := h.l.Drill(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := h.l.Policy().ObjectRetainUntil(h.l.Policy().Longest(real), real)
	if d := loc.RetainUntil.Sub(want).Abs(); d > time.Minute {
		t.Fatalf("a drill report saved at a clock a year behind is retained until %s; want about %s, counted from the S3 server's time", loc.RetainUntil, want)
	}
}
