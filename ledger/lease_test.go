package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// another returns a second ledger on store (the harness's, or one around
// it), with its own lease settings, as a second process sharing the store
// would have.
func (h *harness) another(t *testing.T, store ledger.Store, leases ledger.LeaseConfig) *ledger.Ledger {
	t.Helper()
	return h.anotherLogging(t, store, leases, slog.New(slog.DiscardHandler))
}

// anotherLogging is another with its log going to log.
func (h *harness) anotherLogging(t *testing.T, store ledger.Store, leases ledger.LeaseConfig, log *slog.Logger) *ledger.Ledger {
	t.Helper()
	return h.anotherWithMetrics(t, store, leases, log, nil)
}

// anotherWithMetrics is anotherLogging with the ledger's metrics.
func (h *harness) anotherWithMetrics(t *testing.T, store ledger.Store, leases ledger.LeaseConfig, log *slog.Logger, metrics *ledger.Metrics) *ledger.Ledger {
	t.Helper()
	objects, err := localdir.Open(h.objDir)
	if err != nil {
		t.Fatal(err)
	}
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, h.sc.Brands(), h.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: h.sc.Audience, CheckedBy: "pactledger test"})
	l, err := ledger.New(store, objects, v, reg, ledger.Config{Now: h.clock, Logger: log, Leases: leases, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// partitioned is a real store whose lease calls fail once cut is closed,
// as they do for a process cut off from a shared store while its jobs
// still run.
type partitioned struct {
	ledger.Store
	cut chan struct{}
}

// reachable returns an error wrapping ledger.ErrUnavailable once p is cut.
func (p *partitioned) reachable(what string) error {
	select {
	case <-p.cut:
		return fmt.Errorf("%s: %w: the store is unreachable", what, ledger.ErrUnavailable)
	default:
		return nil
	}
}

func (p *partitioned) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (uint64, error) {
	if err := p.reachable("acquire lease " + name); err != nil {
		return 0, err
	}
	return p.Store.AcquireLease(ctx, name, holder, ttl)
}

func (p *partitioned) RenewLease(ctx context.Context, name, holder string, token uint64, ttl time.Duration) error {
	if err := p.reachable("renew lease " + name); err != nil {
		return err
	}
	return p.Store.RenewLease(ctx, name, holder, token, ttl)
}

// hanging is a real store whose first calls to take or renew a lease get
// no answer: each waits until its context ends, as a call does on a
// connection to a database that stopped answering. renewed hears of each
// renewal that succeeded after the hanging ones.
type hanging struct {
	ledger.Store
	acquires, renewals atomic.Int32 // how many calls still hang
	renewed            chan struct{}
}

func (h *hanging) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (uint64, error) {
	if h.acquires.Add(-1) >= 0 {
		<-ctx.Done()
		return 0, fmt.Errorf("acquire lease %s: %w: %w", name, ledger.ErrUnavailable, ctx.Err())
	}
	return h.Store.AcquireLease(ctx, name, holder, ttl)
}

func (h *hanging) RenewLease(ctx context.Context, name, holder string, token uint64, ttl time.Duration) error {
	if h.renewals.Add(-1) >= 0 {
		<-ctx.Done()
		return fmt.Errorf("renew lease %s: %w: %w", name, ledger.ErrUnavailable, ctx.Err())
	}
	err := h.Store.RenewLease(ctx, name, holder, token, ttl)
	if err == nil && h.renewed != nil {
		select {
		case h.renewed <- struct{}{}:
		default:
		}
	}
	return err
}

// runJob runs a job under lease name on l until the test ends, and
// returns a channel that gets the job's context when it starts.
func runJob(t *testing.T, l *ledger.Ledger, name string) <-chan context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	jobs := make(chan context.Context, 1)
	done := make(chan error, 1)
	go func() {
		done <- l.RunUnderLease(ctx, name, func(jctx context.Context) error {
			select {
			case jobs <- jctx:
			default:
			}
			<-jctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunUnderLease: %v", err)
		}
	})
	return jobs
}

// TestLeaseAttemptThatHangsIsGivenUp: an attempt to take a lease that
// gets no answer is given up after TTL/4 and made again, rather than
// holding the runner until its context ends (for good, in ledgerd).
func TestLeaseAttemptThatHangsIsGivenUp(t *testing.T) {
	h := newHarness(t)
	s := &hanging{Store: h.store}
	s.acquires.Store(1)
	l := h.another(t, s, ledger.LeaseConfig{Holder: "holder-a", TTL: 400 * time.Millisecond})
	select {
	case <-runJob(t, l, "test-singleton"):
	case <-time.After(30 * time.Second):
		t.Fatal("the job never started: the attempt to take the lease that got no answer was never given up")
	}
}

// TestRenewalThatHangsDoesNotCostTheLease: a renewal that gets no answer
// is given up before the next one is due (TTL/4, against one every
// TTL/3), so that the next one, which is answered, keeps the lease and
// the job runs on.
func TestRenewalThatHangsDoesNotCostTheLease(t *testing.T) {
	h := newHarness(t)
	s := &hanging{Store: h.store, renewed: make(chan struct{}, 1)}
	s.renewals.Store(1)
	const name = "test-singleton"
	// A TTL of seconds: on a loaded machine the renewal after the hung one
	// must still come before the lease ends (some 1.9 s of slack).
	l := h.another(t, s, ledger.LeaseConfig{Holder: "holder-a", TTL: 6 * time.Second, Margin: 100 * time.Millisecond})
	var job context.Context
	select {
	case job = <-runJob(t, l, name):
	case <-time.After(30 * time.Second):
		t.Fatal("the job never started")
	}
	select {
	case <-s.renewed:
	case <-job.Done():
		t.Fatal("the job was stopped: the renewal that got no answer cost the lease")
	case <-time.After(30 * time.Second):
		t.Fatal("no renewal after the one that got no answer")
	}
	if _, held := l.LeaseHeld(name); !held || job.Err() != nil {
		t.Errorf("after a renewal that got no answer and one that did: held %v, job's context %v; want held, running", held, job.Err())
	}
}

// putDrill writes a drill report in an Update with ctx (fenced when ctx
// carries a fence).
func putDrill(ctx context.Context, s ledger.Store, id string) error {
	return s.Update(ctx, func(tx ledger.Tx) error { return tx.PutDrill(id, []byte(`{}`)) })
}

// TestLeaseTakeoverStopsHolder: a holder whose renewals stop reaching the
// store cancels its job before the lease expires, so the job of the
// ledger that takes the lease over starts only after the first one was
// told to stop; a write the first job makes after that, under its old
// fence, fails with ErrLeaseLost and leaves nothing.
func TestLeaseTakeoverStopsHolder(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const name = "test-singleton"
	cfg := ledger.LeaseConfig{TTL: 600 * time.Millisecond, Margin: 200 * time.Millisecond}
	pa := &partitioned{Store: h.store, cut: make(chan struct{})}
	cfg.Holder = "holder-a"
	a := h.another(t, pa, cfg)
	cfg.Holder = "holder-b"
	b := h.another(t, h.store, cfg)

	aJob := make(chan context.Context, 1)
	ctxA, stopA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() {
		doneA <- a.RunUnderLease(ctxA, name, func(jctx context.Context) error {
			select {
			case aJob <- jctx:
			default:
			}
			<-jctx.Done()
			return nil
		})
	}()
	jobA := <-aJob
	if err := putDrill(jobA, h.store, "a-while-held"); err != nil {
		t.Fatalf("a fenced write while holding the lease: %v", err)
	}

	type start struct {
		ctx      context.Context
		aStopped bool
	}
	bJob := make(chan start, 1)
	ctxB, stopB := context.WithCancel(ctx)
	doneB := make(chan error, 1)
	go func() {
		doneB <- b.RunUnderLease(ctxB, name, func(jctx context.Context) error {
			bJob <- start{ctx: jctx, aStopped: jobA.Err() != nil}
			<-jctx.Done()
			return nil
		})
	}()
	close(pa.cut) // a's renewals fail from now on

	var sb start
	select {
	case sb = <-bJob:
	case <-time.After(30 * time.Second):
		t.Fatal("the second ledger never took the lease over")
	}
	if !sb.aStopped {
		t.Errorf("the taker's job started while the first holder's job was still told to run")
	}
	if _, held := a.LeaseHeld(name); held {
		t.Errorf("the first ledger still counts the lease as held")
	}
	if _, held := b.LeaseHeld(name); !held {
		t.Errorf("the taker does not count the lease as held")
	}
	// The first job wakes late and writes under its old fence.
	stale := context.WithoutCancel(jobA)
	if err := putDrill(stale, h.store, "a-after-takeover"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Errorf("a write under the lost lease: %v, want ErrLeaseLost", err)
	}
	if err := putDrill(sb.ctx, h.store, "b-after-takeover"); err != nil {
		t.Errorf("the taker's fenced write: %v", err)
	}
	err := h.store.View(ctx, func(tx ledger.Tx) error {
		for id, want := range map[string]bool{"a-while-held": true, "a-after-takeover": false, "b-after-takeover": true} {
			if _, err := tx.Drill(id); (err == nil) != want {
				t.Errorf("drill %s stored: %v, want %v", id, err == nil, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	stopA()
	stopB()
	for _, done := range []chan error{doneA, doneB} {
		if err := <-done; err != nil {
			t.Errorf("RunUnderLease: %v", err)
		}
	}
	// The taker released the lease when it stopped.
	if _, err := h.store.AcquireLease(ctx, name, "holder-c", time.Minute); err != nil {
		t.Errorf("the lease after both stopped: %v", err)
	}
}

// holders counts, per lease, the jobs running under it and the most ever
// at once.
type holders struct {
	mu      sync.Mutex
	now     map[string]int
	most    map[string]int
	started map[string][]string // holders in the order their jobs started
}

func watchLeases(t *testing.T) *holders {
	w := &holders{now: map[string]int{}, most: map[string]int{}, started: map[string][]string{}}
	t.Cleanup(ledger.SetLeaseHook(func(name, holder string, held bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !held {
			w.now[name]--
			return
		}
		w.now[name]++
		w.most[name] = max(w.most[name], w.now[name])
		w.started[name] = append(w.started[name], holder)
	}))
	return w
}

func (w *holders) get(name string) (most int, started []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.most[name], append([]string(nil), w.started[name]...)
}

// waitTreeSize polls l's tree size until it is n.
func waitTreeSize(t *testing.T, l *ledger.Ledger, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		size, err := l.TreeSize(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if size == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree size %d, want %d", size, n)
		}
		<-tick.C
	}
}
