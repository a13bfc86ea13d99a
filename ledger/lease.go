package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Names of the leases the ledger's singleton jobs run under.
const (
	// LeaseLogIntegrator keeps one integrator extending the Merkle log.
	LeaseLogIntegrator = "log-integrator"
	// LeaseSweeper keeps one retention sweeper.
	LeaseSweeper = "retention-sweeper"
	// LeaseDrillScheduler keeps one monthly drill scheduler.
	LeaseDrillScheduler = "drill-scheduler"
)

// LeaseConfig tunes how this ledger holds the leases of singleton jobs and
// claims outbox entries. The zero value is the default.
type LeaseConfig struct {
	// Holder names this ledger to the other processes on the store;
	// default hostname-pid-random. Two ledgers must never share one.
	Holder string
	// TTL is how long a lease lasts unless renewed (every TTL/3);
	// default 30 s. Another holder takes a lease over no sooner.
	TTL time.Duration
	// Margin is how much sooner than TTL after the start of its last
	// successful renewal the holder counts its lease as lost and stops
	// the job; default TTL/5.
	Margin time.Duration
	// Retry is the wait between attempts to take a lease another holder
	// has; default TTL/3.
	Retry time.Duration
}

func (c LeaseConfig) withDefaults() LeaseConfig {
	if c.Holder == "" {
		c.Holder = defaultHolder()
	}
	if c.TTL <= 0 {
		c.TTL = 30 * time.Second
	}
	if c.Margin <= 0 || c.Margin >= c.TTL {
		c.Margin = c.TTL / 5
	}
	if c.Retry <= 0 {
		c.Retry = c.TTL / 3
	}
	return c
}

// defaultHolder is hostname-pid-random: unique to this process, and to
// each ledger in it.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Holder returns the name this ledger holds leases and claims under.
func (l *Ledger) Holder() string { return l.cfg.Leases.Holder }

// leaseHook, when set (tests), is told when this process starts a job
// under a lease (held true) and when it stops it (held false: its context
// is cancelled).
var leaseHook func(name, holder string, held bool)

// RunUnderLease runs job as a singleton across every ledger on the store
// until ctx is done. It takes lease name (waiting while another holder has
// it), runs job with a context carrying the lease's fence (WithFence), so
// every Update the job makes commits only while the lease holds, and
// renews the lease every TTL/3. When a renewal says the lease is lost, or
// none succeeded by TTL−Margin after the start of the last successful one
// (by this process's monotonic clock), it cancels the job's context and,
// once the job returned, waits for the lease again. It releases the lease
// when the job returns. Each attempt to take the lease and each renewal is
// given TTL/4 (callTimeout): one that gets no answer, as on a connection
// to a database that stopped answering, is given up before the next
// renewal is due, and the next attempt can go another way. It returns
// nil when ctx is done, or the job's error when the job returned on its
// own.
func (l *Ledger) RunUnderLease(ctx context.Context, name string, job func(ctx context.Context) error) error {
	for {
		token, start, err := l.acquireLease(ctx, name)
		if err != nil {
			return nil // ctx is done
		}
		lost, err := l.holdLease(ctx, name, l.cfg.Leases.Holder, token, start, job)
		switch {
		case ctx.Err() != nil:
			return nil
		case !lost:
			return err
		}
	}
}

// callTimeout is how long one attempt to take or renew a lease of ttl
// may take: less than the time between renewals (ttl/3), so that one
// that hangs ends before the next is due.
func callTimeout(ttl time.Duration) time.Duration { return ttl / 4 }

// acquireLease takes lease name, waiting while another holder has it, and
// returns its token and when the successful attempt started. It returns an
// error only when ctx is done.
func (l *Ledger) acquireLease(ctx context.Context, name string) (uint64, time.Time, error) {
	lc := l.cfg.Leases
	for {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, callTimeout(lc.TTL))
		token, err := l.store.AcquireLease(actx, name, lc.Holder, lc.TTL)
		cancel()
		if err == nil {
			return token, start, nil
		}
		if !errors.Is(err, ErrLeaseHeld) && ctx.Err() == nil {
			l.cfg.Logger.WarnContext(ctx, "taking a lease failed; will retry", slog.String("lease", name), slog.String("error", err.Error()))
		}
		t := time.NewTimer(lc.Retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, time.Time{}, ctx.Err()
		case <-t.C:
		}
	}
}

// renewal is the outcome of one RenewLease and when it started.
type renewal struct {
	start time.Time
	err   error
}

// holdLease runs job under the lease taken at start with token until the
// job returns, and reports whether the lease was lost and the job's error.
// holder is the name it holds the lease under.
func (l *Ledger) holdLease(ctx context.Context, name, holder string, token uint64, start time.Time, job func(context.Context) error) (bool, error) {
	lc := l.cfg.Leases
	lc.Holder = holder
	jobCtx, cancel := context.WithCancel(WithFence(ctx, Fence{Lease: name, Token: token}))
	defer cancel()
	l.setHeld(jobCtx, name, token)
	l.cfg.Logger.InfoContext(ctx, "lease taken", slog.String("lease", name), slog.String("holder", lc.Holder), slog.Uint64("token", token))
	done := make(chan error, 1)
	go func() { done <- job(jobCtx) }()

	expire := time.NewTimer(time.Until(start.Add(lc.TTL - lc.Margin)))
	defer expire.Stop()
	renew := time.NewTicker(lc.TTL / 3)
	defer renew.Stop()
	results := make(chan renewal, 1)
	renewing, lost := false, false
	// lastErr is why the last renewal failed, nil when it succeeded.
	var lastErr error
	// stop gives the lease up as lost: the job is told to stop, and waits
	// to take it again once it has. Logged at WARN: a holder loses a lease
	// only when its renewals fail or another holder took it over.
	stop := func(why string) {
		if !lost {
			lost = true
			cancel()
			l.setUnheld(name, token)
			l.cfg.Logger.WarnContext(ctx, "lease lost", slog.String("lease", name), slog.String("holder", lc.Holder), slog.Uint64("token", token),
				slog.String("why", why), slog.String("then", "the job is stopped and waits to take the lease again"))
		}
	}
	for {
		select {
		case err := <-done:
			if !lost {
				l.setUnheld(name, token)
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), lc.TTL)
				if rerr := l.store.ReleaseLease(rctx, name, lc.Holder, token); rerr != nil {
					l.cfg.Logger.WarnContext(ctx, "releasing a lease failed; it expires on its own", slog.String("lease", name), slog.String("holder", lc.Holder), slog.String("error", rerr.Error()))
				} else {
					l.cfg.Logger.InfoContext(ctx, "lease released", slog.String("lease", name), slog.String("holder", lc.Holder), slog.Uint64("token", token))
				}
				rcancel()
			}
			return lost, err
		case <-expire.C:
			stop(expiredWhy(renewing, lastErr))
		case <-renew.C:
			if renewing || lost {
				continue
			}
			renewing = true
			go func(at time.Time) {
				rctx, cancel := context.WithTimeout(jobCtx, callTimeout(lc.TTL))
				defer cancel()
				err := l.store.RenewLease(rctx, name, lc.Holder, token, lc.TTL)
				results <- renewal{start: at, err: err}
			}(time.Now())
		case r := <-results:
			renewing, lastErr = false, r.err
			switch {
			case lost:
			case r.err == nil:
				expire.Reset(time.Until(r.start.Add(lc.TTL - lc.Margin)))
			case errors.Is(r.err, ErrLeaseLost):
				stop("the store says another holder has it")
			default:
				l.cfg.Logger.WarnContext(ctx, "renewing a lease failed; will retry until it runs out", slog.String("lease", name), slog.String("error", r.err.Error()))
			}
		}
	}
}

// expiredWhy says why no renewal succeeded in time: one still waiting
// for the store's answer, the error of the last one, or none made since
// the last success (this process did not run).
func expiredWhy(renewing bool, lastErr error) string {
	const what = "no renewal succeeded in time: "
	switch {
	case renewing:
		return what + "a renewal is still waiting for the store's answer (the store is slow or does not answer)"
	case lastErr != nil:
		return what + "the last renewal failed: " + lastErr.Error()
	}
	return what + "no renewal was made since the last one that succeeded (this process was paused)"
}

// heldLeases is the leases this ledger's jobs hold, by name.
type heldLeases struct {
	mu   sync.Mutex
	jobs map[string]heldJob
}

// heldJob is a job that runs under a lease: the lease's token and the
// job's context, which carries the fence and ends when the lease is lost
// or the job returns.
type heldJob struct {
	token uint64
	ctx   context.Context
}

// setHeld records that this ledger's job under lease name, with its
// context jobCtx, started.
func (l *Ledger) setHeld(jobCtx context.Context, name string, token uint64) {
	l.held.mu.Lock()
	l.held.jobs[name] = heldJob{token: token, ctx: jobCtx}
	l.held.mu.Unlock()
	if leaseHook != nil {
		leaseHook(name, l.cfg.Leases.Holder, true)
	}
}

// setUnheld records that this ledger's job under lease name with token
// stopped.
func (l *Ledger) setUnheld(name string, token uint64) {
	l.held.mu.Lock()
	if l.held.jobs[name].token == token {
		delete(l.held.jobs, name)
	}
	l.held.mu.Unlock()
	if leaseHook != nil {
		leaseHook(name, l.cfg.Leases.Holder, false)
	}
}

// LeaseHeld reports whether a job of this ledger runs under lease name,
// and its token.
func (l *Ledger) LeaseHeld(name string) (uint64, bool) {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	j, ok := l.held.jobs[name]
	return j.token, ok
}

// heldJobOf returns the job of this ledger that runs under lease name.
func (l *Ledger) heldJobOf(name string) (heldJob, bool) {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	j, ok := l.held.jobs[name]
	return j, ok
}

// requestHolder is the name under which this ledger takes a lease for one
// run of a job on request (RunOnce), apart from its own holder name, so
// that its background job's attempts to take the same lease (made under
// its holder name, which takes back a lease already its own) wait for the
// run rather than take the lease from under it.
func (l *Ledger) requestHolder() string { return l.cfg.Leases.Holder + "/on-request" }

// RunOnce runs job once under lease name, as its singleton: when a job of
// this ledger holds the lease (RunUnderLease), job runs under that lease,
// with its fence, and is stopped when the lease is lost; otherwise it
// takes the lease for the run, renewing it as RunUnderLease does, and
// releases it after. When another holder has the lease it returns a
// *LeaseHeldError (or an error wrapping ErrLeaseHeld) at once, without
// running job. Runs of job on the same ledger are not serialised here:
// the caller does that.
func (l *Ledger) RunOnce(ctx context.Context, name string, job func(ctx context.Context) error) error {
	if j, ok := l.heldJobOf(name); ok {
		return runWithin(ctx, j, name, job)
	}
	lc := l.cfg.Leases
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, callTimeout(lc.TTL))
	token, err := l.store.AcquireLease(actx, name, l.requestHolder(), lc.TTL)
	cancel()
	var held *LeaseHeldError
	if errors.As(err, &held) && held.Holder == lc.Holder {
		// This ledger's own job took it meanwhile.
		if j, ok := l.heldJobOf(name); ok {
			return runWithin(ctx, j, name, job)
		}
	}
	if err != nil {
		return fmt.Errorf("take lease %s: %w", name, err)
	}
	lost, err := l.holdLease(ctx, name, l.requestHolder(), token, start, job)
	if lost {
		return fmt.Errorf("%w: %s was lost during the run", ErrLeaseLost, name)
	}
	return err
}

// runWithin runs job under the lease j holds: with its fence, stopped when
// j's context ends (its lease lost).
func runWithin(ctx context.Context, j heldJob, name string, job func(context.Context) error) error {
	jctx, cancel := context.WithCancel(WithFence(ctx, Fence{Lease: name, Token: j.token}))
	defer cancel()
	stop := context.AfterFunc(j.ctx, cancel)
	defer stop()
	err := job(jctx)
	if j.ctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: %s was lost during the run", ErrLeaseLost, name)
	}
	return err
}
