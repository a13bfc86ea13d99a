package drill_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

type env struct {
	sc *pacttest.Scenario
	l  *ledger.Ledger
	r  *drill.Runner
}

func newEnv(t *testing.T, now func() time.Time) *env {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	return newEnvFor(t, sc, now)
}

// newEnvFor builds the ledger for sc; it starts no server of its own, so it
// can run inside a synctest bubble.
func newEnvFor(t *testing.T, sc *pacttest.Scenario, now func() time.Time) *env {
	t.Helper()
	dir := t.TempDir()
	store, err := bolt.Open(filepath.Join(dir, "l.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	objects, _ := localdir.Open(filepath.Join(dir, "ev"))
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	l, err := ledger.New(store, objects, v, sc.Static(time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)), ledger.Config{Logger: slog.New(slog.DiscardHandler), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return &env{sc: sc, l: l, r: drill.New(l, drill.Config{Now: now})}
}

func (e *env) append(t *testing.T, r *pacttest.Receipt) *ledger.Row {
	t.Helper()
	return e.appendWith(t, r, nil)
}

// appendWith records r with the writer's limits lim (nil: none).
func (e *env) appendWith(t *testing.T, r *pacttest.Receipt, lim *ledger.Limits) *ledger.Row {
	t.Helper()
	row, _, err := e.l.AppendReceipt(context.Background(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func pulls(rep *drill.Report) map[string]drill.Pull {
	m := map[string]drill.Pull{}
	for _, p := range rep.Pulls {
		m[p.Name] = p
	}
	return m
}

// The playbook's worked scenario: acct 48213 granted orders:cancel at
// 13:07; the cancel of A-5531 ran at 13:12; the customer disputes it.
func TestPlaybookScenario(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-1", Target: "A-1"}))

	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChecksTotal != 6 || rep.ChecksPassed != 6 || len(rep.Rows) != 1 {
		t.Fatalf("checks %d/%d rows %d: %+v", rep.ChecksPassed, rep.ChecksTotal, len(rep.Rows), rep.Pulls)
	}
	for i, p := range rep.Pulls {
		if p.Name != drill.Pulls[i] || p.Detail == "" || p.ElapsedMs < 0 {
			t.Fatalf("pull %d: %+v", i, p)
		}
	}
	for _, want := range []string{"7 October 2026 13:07 UTC", "orders:read, orders:cancel", e.sc.PA.ID, "cancel_order on A-5531", "13:12 UTC"} {
		if !strings.Contains(rep.Reply, want) {
			t.Errorf("reply lacks %q:\n%s", want, rep.Reply)
		}
	}
	// The report is stored and listed.
	got, _, err := e.r.Get(ctx, rep.ID)
	if err != nil || got.Reply != rep.Reply {
		t.Fatalf("stored report: %v", err)
	}
	list, _, err := e.r.List(ctx, 10, "")
	if err != nil || len(list) != 1 || list[0].ID != rep.ID {
		t.Fatalf("list: %v %d", err, len(list))
	}
}

func TestFlippedWhenArgsDiffer(t *testing.T) {
	e := newEnv(t, time.Now)
	r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	r.Actions[0].ArgsJSON = `{"order":"A-5531","refund":"all"}` // what ran is not what was signed
	row := e.append(t, r)
	if row.Status != ledger.Incident {
		t.Fatalf("row %v", row.Status)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	p := pulls(rep)
	if p[drill.PullActionLog].Passed || !p[drill.PullDecision].Passed || !strings.Contains(p[drill.PullDecision].Detail, "flips") {
		t.Fatalf("pulls %+v", rep.Pulls)
	}
	if !strings.Contains(rep.Reply, "not the action that was signed") || !strings.Contains(rep.Reply, row.IncidentID) {
		t.Fatalf("reply: %s", rep.Reply)
	}
}

func TestNothingToDrillFailsWithoutWaiting(t *testing.T) {
	e := newEnv(t, time.Now)
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-0000"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChecksTotal != 6 || rep.ChecksPassed != 0 || !strings.Contains(rep.Pulls[0].Detail, "no row") {
		t.Fatalf("report %+v", rep)
	}
	if _, err := e.r.Run(context.Background(), drill.Request{}, "lead"); err == nil {
		t.Fatal("empty request accepted")
	}
}

// A refusal found by its target is decided by rule 1 (no verifiable
// receipt: unauthorized), not handed to a person.
func TestRefusalRowIsRuleOne(t *testing.T) {
	e := newEnv(t, time.Now)
	_, err := e.l.AppendRefusal(context.Background(), ledger.RefusalInput{ClaimedPrincipal: "acct 30418", Tool: "change_address", Target: "acct-30418", Reason: "no receipt", ObservedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "acct-30418"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	p := pulls(rep)
	if !p[drill.PullDecision].Passed || !strings.Contains(p[drill.PullDecision].Detail, "rule 1") || strings.Contains(p[drill.PullDecision].Detail, "needs a person") {
		t.Fatalf("pulls %+v", rep.Pulls)
	}
}

func TestMonthlyDrillScoresThirtyChecks(t *testing.T) {
	e := newEnv(t, time.Now)
	for i := range 12 {
		e.append(t, e.sc.Mint(pacttest.Spec{Target: "M-" + string(rune('a'+i))}))
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Monthly: true}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kind != drill.Monthly || len(rep.Rows) != 5 || rep.ChecksTotal != 30 || rep.ChecksPassed != 30 {
		t.Fatalf("monthly: kind %v rows %d checks %d/%d", rep.Kind, len(rep.Rows), rep.ChecksPassed, rep.ChecksTotal)
	}
	seen := map[string]bool{}
	for _, id := range rep.Rows {
		if seen[id] {
			t.Fatalf("row %s drilled twice", id)
		}
		seen[id] = true
	}
}

func TestScheduleNext(t *testing.T) {
	s := drill.DefaultSchedule
	tests := []struct{ now, want time.Time }{
		{time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)},
		{time.Date(2026, 12, 1, 2, 59, 0, 0, time.UTC), time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)},
		{time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 3, 0, 0, 0, time.UTC)},
		{time.Date(2027, 1, 31, 23, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 3, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		if got := s.Next(tc.now); !got.Equal(tc.want) {
			t.Errorf("Next(%v) = %v, want %v", tc.now, got, tc.want)
		}
	}
}

// TestSchedulerRunsMonthly drives the scheduler with a fake clock: it runs
// on the 1st at 03:00 UTC and not before.
func TestSchedulerRunsMonthly(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	synctest.Test(t, func(t *testing.T) {
		// synctest's clock starts at 2000-01-01 00:00 UTC.
		e := newEnvFor(t, sc, time.Now)
		e.append(t, e.sc.Mint(pacttest.Spec{Target: "S-1"}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			done <- e.r.RunScheduler(ctx, drill.Schedule{Day: 1, Hour: 3, Sample: 1}, slog.New(slog.DiscardHandler))
		}()

		time.Sleep(2*time.Hour + 59*time.Minute)
		synctest.Wait()
		if reps, _, _ := e.r.List(context.Background(), 10, ""); len(reps) != 0 {
			t.Fatalf("drill ran before 03:00: %d reports", len(reps))
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		reps, _, _ := e.r.List(context.Background(), 10, "")
		if len(reps) != 1 || !reps[0].StartedAt.Equal(time.Date(2000, 1, 1, 3, 0, 0, 0, time.UTC)) || reps[0].RunBy != "scheduler" {
			t.Fatalf("after 03:00: %+v", reps)
		}
		time.Sleep(31 * 24 * time.Hour) // to 1 February 03:01
		synctest.Wait()
		reps, _, _ = e.r.List(context.Background(), 10, "")
		if len(reps) != 2 || !reps[0].StartedAt.Equal(time.Date(2000, 2, 1, 3, 0, 0, 0, time.UTC)) {
			t.Fatalf("second month: %d reports, newest %v", len(reps), reps[0].StartedAt)
		}
		cancel()
		<-done
	})
}

// TestSchedulerRunsOnceWhenTheClockStepsBack: the wall clock steps back
// ten minutes (a clock that ran fast, corrected) between two monthly
// drills. The timer armed for 1 February 03:00 runs on the monotonic
// clock and fires at 02:50 by the wall clock; the scheduler waits for
// 03:00 and runs February's drill once, dated 03:00, rather than running
// at 02:50 and again at 03:00.
func TestSchedulerRunsOnceWhenTheClockStepsBack(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	synctest.Test(t, func(t *testing.T) {
		clock := &steppedClock{}
		e := startScheduler(t, sc, clock, slog.New(slog.DiscardHandler))
		time.Sleep(3*time.Hour + 30*time.Second) // January's drill ran at 03:00
		synctest.Wait()
		clock.step(-10 * time.Minute)
		time.Sleep(31*24*time.Hour + time.Hour) // 1 February 03:50:30 by the stepped wall clock
		synctest.Wait()

		got := startedAt(t, e)
		want := []time.Time{time.Date(2000, 2, 1, 3, 0, 0, 0, time.UTC), time.Date(2000, 1, 1, 3, 0, 0, 0, time.UTC)}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("monthly drills started (newest first) %v, want %v", got, want)
		}
	})
}

// steppedClock is the bubble's clock moved by offset, which a test steps
// as NTP or an operator would.
type steppedClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *steppedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// step moves the clock by d.
func (c *steppedClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// startScheduler starts, in t's synctest bubble, the monthly drill on the
// 1st at 03:00 of a ledger holding one row, on clock, logging to log; it
// stops when t ends.
func startScheduler(t *testing.T, sc *pacttest.Scenario, clock *steppedClock, log *slog.Logger) *env {
	t.Helper()
	e := newEnvFor(t, sc, clock.now)
	e.append(t, e.sc.Mint(pacttest.Spec{Target: "S-1"}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.r.RunScheduler(ctx, drill.Schedule{Day: 1, Hour: 3, Sample: 1}, log) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// startedAt is when each drill e stored started, newest first.
func startedAt(t *testing.T, e *env) []time.Time {
	t.Helper()
	reps, _, err := e.r.List(context.Background(), 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, r := range reps {
		out = append(out, r.StartedAt)
	}
	return out
}

// stepOnLog calls step when the scheduler logs its monthly drill: the
// moment between a run and the scheduler's next look at the clock.
type stepOnLog struct{ step func() }

func (h stepOnLog) Enabled(context.Context, slog.Level) bool { return true }
func (h stepOnLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "monthly drill" {
		h.step()
	}
	return nil
}
func (h stepOnLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h stepOnLog) WithGroup(string) slog.Handler      { return h }

// NTP steps a clock that ran two minutes fast back while January's drill
// runs (or just after): January's drill does not run a second time.
func TestSchedulerRunsOnceWhenTheClockStepsBackDuringTheRun(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	synctest.Test(t, func(t *testing.T) {
		clock := &steppedClock{}
		var once sync.Once
		e := startScheduler(t, sc, clock, slog.New(stepOnLog{step: func() { once.Do(func() { clock.step(-2 * time.Minute) }) }}))
		time.Sleep(4 * time.Hour)
		synctest.Wait()
		if got := startedAt(t, e); len(got) != 1 {
			t.Errorf("monthly drills started on 1 January (newest first) %v, want one", got)
		}
	})
}

// A ledgerd started while its clock was a year ahead, then put right,
// runs the monthly drill on the next slot by the right clock, not a
// year later on the slot it had set by the wrong one.
func TestSchedulerFollowsAClockPutRight(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	synctest.Test(t, func(t *testing.T) {
		clock := &steppedClock{offset: 366 * 24 * time.Hour}
		e := startScheduler(t, sc, clock, slog.New(slog.DiscardHandler))
		time.Sleep(time.Hour) // 1 January 2000 01:00, the clock reading 2001
		synctest.Wait()
		clock.step(-366 * 24 * time.Hour)
		time.Sleep(62 * 24 * time.Hour) // to 3 March 2000 01:00
		synctest.Wait()

		got := startedAt(t, e)
		want := []time.Time{time.Date(2000, 3, 1, 3, 0, 0, 0, time.UTC), time.Date(2000, 2, 1, 3, 0, 0, 0, time.UTC)}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("monthly drills started (newest first) %v, want %v", got, want)
		}
	})
}

// A read-only turn changed nothing and keeps no bytes: a drill by order
// lists it without scoring it; named by its row id it is drilled, and
// says what is not kept.
func TestReadOnlyRowKeepsNoBytesToDrill(t *testing.T) {
	e := newEnv(t, time.Now)
	row := e.append(t, e.sc.Mint(pacttest.Spec{Target: "R-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "R-1"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChecksTotal != 0 || len(rep.Rows) != 0 || len(rep.Listed) != 1 || rep.Listed[0].RowID != row.ID || !strings.Contains(rep.Listed[0].Detail, "read-only") ||
		!strings.Contains(rep.Note, "nothing to drill") || !strings.Contains(rep.Reply, "changed nothing") {
		t.Fatalf("drill by order on a read-only turn: %+v", rep)
	}
	rep, err = e.r.Run(context.Background(), drill.Request{RowID: row.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	p := pulls(rep)
	if p[drill.PullReceiptRow].Passed || !strings.Contains(p[drill.PullReceiptRow].Detail, "read-only") || p[drill.PullDecision].Passed {
		t.Fatalf("pulls %+v", rep.Pulls)
	}
	// The monthly drill samples only rows that keep their evidence.
	if rep, _ := e.r.Run(context.Background(), drill.Request{Monthly: true}, "lead"); len(rep.Rows) != 0 || rep.ChecksTotal != 0 || !strings.Contains(rep.Note, "nothing to drill") {
		t.Fatalf("monthly drill on read-only rows only: %+v", rep)
	}
}

// A replay is never excused as the customer's authorization, and a refusal
// is decided by rule 1 without a person.
func TestDrillDecisionsForReplaysAndRefusals(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	r := e.sc.Mint(pacttest.Spec{User: "acct-7", Target: "R-7"})
	first := e.append(t, r)
	replay := *r
	replay.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
	dup := e.append(t, &replay)
	if dup.Status != ledger.Duplicate || dup.Verifier.DuplicateOf != first.ID {
		t.Fatalf("replay recorded as %v of %q", dup.Status, dup.Verifier.DuplicateOf)
	}
	rep, err := e.r.Run(ctx, drill.Request{RowID: dup.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d := pulls(rep)[drill.PullDecision]
	if !d.Passed || !strings.Contains(d.Detail, "replay of row "+first.ID) || !strings.Contains(d.Detail, "not a second authorization") {
		t.Fatalf("duplicate decision: %+v", d)
	}
	if strings.Contains(rep.Reply, "granted") || !strings.Contains(rep.Reply, "not a second approval") {
		t.Fatalf("duplicate reply: %s", rep.Reply)
	}

	// Another receipt posted with the first row's request JWT is a
	// duplicate too (API.md), but no replay of it: the Provider served a
	// second turn, other arguments, on one signed request. The drill does
	// not tell the customer it counts once.
	other := e.sc.Mint(pacttest.Spec{User: "acct-7", Target: "R-7", ArgsJSON: `{"order":"R-7","reason":"other"}`, At: first.IssuedAt.Add(30 * time.Second)})
	other.RequestJWT = r.RequestJWT
	second := e.append(t, other)
	if second.Status != ledger.Duplicate || second.Verifier.DuplicateOf != first.ID {
		t.Fatalf("a second receipt on one request JWT recorded as %v of %q: %+v", second.Status, second.Verifier.DuplicateOf, second.Verifier.Checks)
	}
	rep, err = e.r.Run(ctx, drill.Request{RowID: second.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d = pulls(rep)[drill.PullDecision]
	if d.Passed || !strings.Contains(d.Detail, "needs a person") || !strings.Contains(d.Detail, "used the same request JWT for another receipt") || strings.Contains(d.Detail, "replay of row") {
		t.Fatalf("a second receipt on one request JWT, decision: %+v", d)
	}
	if strings.Contains(rep.Reply, "counts once") || strings.Contains(rep.Reply, "not a second approval") || !strings.Contains(rep.Reply, "get back to you") {
		t.Fatalf("a second receipt on one request JWT, reply: %s", rep.Reply)
	}

	ref, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-30418", ClaimedAgent: "MyHelper", Tool: "change_address", Target: "acct-30418", Reason: "no receipt; routed to human", ObservedAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = e.r.Run(ctx, drill.Request{RowID: ref.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d = pulls(rep)[drill.PullDecision]
	if !d.Passed || !strings.Contains(d.Detail, "rule 1") || !strings.Contains(d.Detail, "unauthorized") || strings.Contains(d.Detail, "needs a person") {
		t.Fatalf("refusal decision: %+v", d)
	}
	if rep.ChecksPassed != rep.ChecksTotal || !strings.Contains(rep.Reply, "no verifiable approval") {
		t.Fatalf("refusal drill %d/%d, reply %q: %+v", rep.ChecksPassed, rep.ChecksTotal, rep.Reply, rep.Pulls)
	}
}

// ListWithin pages reports by the size the caller measures, each report
// measured as List decodes it: pages of what fits, one report at least,
// together every report once in List's order.
func TestListWithinPagesBySize(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	e.append(t, e.sc.Mint(pacttest.Spec{Target: "A-5531"}))
	for range 3 {
		if _, err := e.r.Run(ctx, drill.Request{Target: "A-5531"}, "lead"); err != nil {
			t.Fatal(err)
		}
	}
	all, _, err := e.r.List(ctx, 0, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("List: %d reports, %v", len(all), err)
	}
	var got []*drill.Report
	pages := 0
	for token := ""; ; pages++ {
		page, next, err := e.r.ListWithin(ctx, 0, token, 1, func(r *drill.Report) int { return len(r.Pulls) })
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 1 {
			t.Fatalf("page %d holds %d reports, want the one that passes the budget alone", pages, len(page))
		}
		got = append(got, page...)
		if token = next; token == "" {
			break
		}
	}
	if len(got) != len(all) {
		t.Fatalf("%d reports in pages, List has %d", len(got), len(all))
	}
	for i := range all {
		if got[i].ID != all[i].ID || len(got[i].Pulls) != 6 {
			t.Errorf("report %d: %s with %d pulls, List's is %s", i, got[i].ID, len(got[i].Pulls), all[i].ID)
		}
	}
}
