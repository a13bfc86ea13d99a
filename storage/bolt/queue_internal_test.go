package bolt

import (
	"context"
	"runtime"
	"slices"
	"testing"

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
		var ran []int
		errs := queueBehindWrite(t, s,
			func(ledger.Tx) error {
				close(gate)
				for len(s.reqs) < 1 { // the build's step is queued
					runtime.Gosched()
				}
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
