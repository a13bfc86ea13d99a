package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// gatedDeletes is an object store whose Delete calls wait until the test
// opens the gate; it counts them and how many ran at once at most.
type gatedDeletes struct {
	ledger.ObjectStore
	gate    chan struct{}
	mu      sync.Mutex
	calls   int
	running int
	most    int
}

func (g *gatedDeletes) Delete(ctx context.Context, loc ledger.Location) error {
	g.mu.Lock()
	g.calls++
	g.running++
	g.most = max(g.most, g.running)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running--
		g.mu.Unlock()
	}()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.ObjectStore.Delete(ctx, loc)
}

func (g *gatedDeletes) counts() (calls, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls, g.most
}

// TestSweepRunsOnlyUnderTheSweepersLease: while replica a's sweeper holds
// the sweeper's lease and is deleting a queued object, a sweep asked of
// replica b (the admin Sweep RPC) deletes nothing and says who holds the
// lease; one asked of replica a runs after a's sweep in progress, under
// a's lease, never beside it.
func TestSweepRunsOnlyUnderTheSweepersLease(t *testing.T) {
	w := newWorld(t)
	g := &gatedDeletes{ObjectStore: w.objects, gate: make(chan struct{})}
	w.objects = g
	var once sync.Once
	open := func() { once.Do(func() { close(g.gate) }) }
	t.Cleanup(open)
	a := w.replica(t, "a")
	b := w.replica(t, "b")
	ctx := t.Context()

	// Retained still: each sweep's Delete of it is refused and it stays
	// queued, so that every sweep tries it.
	loc, err := g.Put(ctx, "queued/object", []byte("x"), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.Update(ctx, func(tx ledger.Tx) error { return tx.QueueDeletion(loc) }); err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- a.l.RunSweeper(sctx, time.Hour) }()
	poll(t, "a's sweeper holds the lease and is deleting", 20*time.Second, func() bool {
		_, held := a.l.LeaseHeld(ledger.LeaseSweeper)
		calls, _ := g.counts()
		return held && calls == 1
	})

	_, err = b.l.Sweep(ctx, false)
	var heldErr *ledger.LeaseHeldError
	if !errors.As(err, &heldErr) || heldErr.Holder != a.l.Holder() || heldErr.Lease != ledger.LeaseSweeper {
		t.Fatalf("b's sweep while a's sweeper holds the lease: %v, want a *LeaseHeldError naming %s", err, a.l.Holder())
	}
	if time.Until(heldErr.Expires) <= 0 {
		t.Errorf("the lease's end %s is not ahead", heldErr.Expires)
	}
	if calls, _ := g.counts(); calls != 1 {
		t.Errorf("Delete called %d times, want 1 (a's sweep only)", calls)
	}
	if _, err := b.l.Sweep(ctx, true); err != nil {
		t.Errorf("b's dry run: %v (a dry run takes no lease)", err)
	}

	asked := make(chan error, 1)
	go func() {
		_, err := a.l.Sweep(ctx, false)
		asked <- err
	}()
	open()
	if err := <-asked; err != nil {
		t.Fatalf("a sweep asked of a, the sweeper's replica: %v", err)
	}
	calls, most := g.counts()
	if calls != 2 || most != 1 {
		t.Errorf("Delete calls %d, at most %d at once; want 2 (a's sweeper's and the asked sweep's), one at a time", calls, most)
	}
	stop()
	<-done
}
