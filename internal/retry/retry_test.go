package retry

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		wake := make(chan struct{}, 1)
		var calls durations
		start := time.Now()
		results := []error{nil, errors.New("down"), errors.New("down"), nil}
		round := func(context.Context) (int, error) {
			i := calls.add(time.Since(start))
			if i < len(results) && results[i] != nil {
				return 0, results[i]
			}
			if i == 0 {
				return 3, nil // progress: the next round runs at once
			}
			return 0, nil
		}
		var waits durations
		done := make(chan struct{})
		go func() {
			Drain(ctx, Config{Idle: time.Minute}, wake, round, func(_ error, w time.Duration) { waits.add(w) })
			close(done)
		}()
		synctest.Wait()
		wake <- struct{}{} // arrives during the first backoff: must not cut it short
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []time.Duration{0, 0, 250 * time.Millisecond, 750 * time.Millisecond}
		got := calls.get()
		if len(got) < 4 {
			t.Fatalf("calls at %v", got)
		}
		for i, w := range want {
			if got[i] != w {
				t.Fatalf("round %d at %v, want %v (all %v)", i, got[i], w, got)
			}
		}
		if waits := waits.get(); len(waits) != 2 || waits[0] != 250*time.Millisecond || waits[1] != 500*time.Millisecond {
			t.Fatalf("backoffs %v", waits)
		}
		// Idle: a wake runs the next round before Idle passes.
		n := len(calls.get())
		wake <- struct{}{}
		synctest.Wait()
		if len(calls.get()) != n+1 {
			t.Fatalf("wake did not end the idle wait")
		}
		cancel()
		<-done
	})
}

// TestDrainEvery: with Every, the round after one that did work starts
// Every after that one started, and a wake meanwhile does not start it
// sooner; a full round is followed at once; after an idle round a wake
// starts the next at once.
func TestDrainEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		wake := make(chan struct{}, 1)
		start := time.Now()
		var calls durations
		// Each round takes 10 ms; what it does comes from work.
		work := []int{5, 5, 100, 5, 0}
		round := func(context.Context) (int, error) {
			i := calls.add(time.Since(start))
			time.Sleep(10 * time.Millisecond)
			if i < len(work) {
				return work[i], nil
			}
			return 0, nil
		}
		done := make(chan struct{})
		go func() {
			Drain(ctx, Config{Idle: time.Minute, Every: 250 * time.Millisecond, Full: func(n int) bool { return n >= 100 }}, wake, round,
				func(err error, _ time.Duration) { t.Errorf("round failed: %v", err) })
			close(done)
		}()
		synctest.Wait()
		wake <- struct{}{} // arrives during the first round: the wait for the second must not end early
		synctest.Wait()
		if got := calls.get(); len(got) != 1 {
			t.Fatalf("a wake started a round before Every: calls at %v", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		// 0: first; 250: Every after the first; 500: after the second; the
		// full round at 500 is followed at once (510); its successor did
		// work, so the idle round comes Every after it (760); then the
		// loop waits for a wake, which the one sent earlier (still
		// buffered) gives at once (770).
		want := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 510 * time.Millisecond, 760 * time.Millisecond, 770 * time.Millisecond}
		got := calls.get()
		if len(got) != len(want) {
			t.Fatalf("calls at %v, want %v", got, want)
		}
		for i, w := range want {
			if got[i] != w {
				t.Fatalf("round %d at %v, want %v (all %v)", i, got[i], w, got)
			}
		}
		// Idle now: a wake starts a round at once.
		at := time.Since(start)
		wake <- struct{}{}
		synctest.Wait()
		if got := calls.get(); len(got) != len(want)+1 || got[len(want)] != at {
			t.Fatalf("after an idle round a wake did not start one at once: %v", got)
		}
		cancel()
		<-done
	})
}

// durations is what a round records and the test reads, on two goroutines:
// synctest.Wait orders nothing between them for the race detector (a
// round woken by the bubble's clock writes while the test sleeps).
type durations struct {
	mu sync.Mutex
	at []time.Duration
}

// add appends d and returns how many there were before.
func (d *durations) add(v time.Duration) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = append(d.at, v)
	return len(d.at) - 1
}

// get returns a copy of what was added.
func (d *durations) get() []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.at)
}
