package bolt

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// queueBehind's writes make one batch, in the order given, though a step
// of the store's own waits in the channel with them: the key filter's
// build, which the first commit starts, queues two (filter.go) when its
// goroutine gets to them, and under load that is while queueBehind
// queues its writes. Here the build is held after its scan until the
// blocking write runs, so that its step to put the filter in use is
// queued before the writes.
func TestQueueBehindKeepsOrderBehindOwnSteps(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 5 {
		gate := make(chan struct{})
		setFilterHooks(t, filterChunk, filterMinKeys, func() { <-gate })
		s := openNumbers(t)
		if err := s.Update(context.Background(), func(tx ledger.Tx) error { return tx.CreateRow(numbersRow("a")) }); err != nil {
			t.Fatal(err)
		}
		// The build's first step (its registration, a step of its own)
		// has run, and the build waits at the gate: else that step could
		// be taken into the blocking write's batch, and the step this test
		// waits for below would never be queued.
		if !pollUntil(t, "the key filter's build registered", func() bool { return s.filters.building.Load() != nil }) {
			t.FailNow()
		}
		var ran []int
		errs := queueBehindWrite(t, s,
			func(ledger.Tx) error {
				close(gate)
				pollUntil(t, "the build's step queued", func() bool { return len(s.reqs) >= 1 })
				return nil
			},
			func(ledger.Tx) error { ran = append(ran, 0); return nil },
			func(ledger.Tx) error { ran = append(ran, 1); return nil },
		)
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("writes: %v", errs)
		}
		if !slices.Equal(ran, []int{0, 1}) {
			t.Fatalf("the queued writes ran in the order %v, want [0 1]", ran)
		}
		waitFilter(t, s, func(*keyFilter) bool { return true })
		s.Close()
	}
}

// pollUntil polls cond, yielding between polls, until it holds, and
// reports whether it did within ten seconds; if not, it marks the test
// failed, saying what (t.Errorf: it may run on another goroutine).
func pollUntil(t *testing.T, what string, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("not within 10 s: %s", what)
			return false
		}
		runtime.Gosched()
	}
	return true
}
