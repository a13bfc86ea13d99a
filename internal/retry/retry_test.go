package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		wake := make(chan struct{}, 1)
		var calls []time.Duration
		start := time.Now()
		results := []error{nil, errors.New("down"), errors.New("down"), nil}
		round := func(context.Context) (int, error) {
			i := len(calls)
			calls = append(calls, time.Since(start))
			if i < len(results) && results[i] != nil {
				return 0, results[i]
			}
			if i == 0 {
				return 3, nil // progress: the next round runs at once
			}
			return 0, nil
		}
		var waits []time.Duration
		done := make(chan struct{})
		go func() {
			Drain(ctx, Config{Idle: time.Minute}, wake, round, func(_ error, w time.Duration) { waits = append(waits, w) })
			close(done)
		}()
		synctest.Wait()
		wake <- struct{}{} // arrives during the first backoff: must not cut it short
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []time.Duration{0, 0, 250 * time.Millisecond, 750 * time.Millisecond}
		if len(calls) < 4 {
			t.Fatalf("calls at %v", calls)
		}
		for i, w := range want {
			if calls[i] != w {
				t.Fatalf("round %d at %v, want %v (all %v)", i, calls[i], w, calls)
			}
		}
		if len(waits) != 2 || waits[0] != 250*time.Millisecond || waits[1] != 500*time.Millisecond {
			t.Fatalf("backoffs %v", waits)
		}
		// Idle: a wake runs the next round before Idle passes.
		n := len(calls)
		wake <- struct{}{}
		synctest.Wait()
		if len(calls) != n+1 {
			t.Fatalf("wake did not end the idle wait")
		}
		cancel()
		<-done
	})
}
