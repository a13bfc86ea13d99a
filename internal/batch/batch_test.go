package batch_test

import (
	"slices"
	"testing"

	"github.com/pactledger/pactledger/internal/batch"
)

// TestLoop: what waits is taken in batches of at most max, in order; after
// quit, what is still queued is committed one by one, and Loop returns.
func TestLoop(t *testing.T) {
	reqs := make(chan int, 10)
	for i := range 7 {
		reqs <- i
	}
	quit := make(chan struct{})
	var batches [][]int
	done := make(chan struct{})
	go func() {
		defer close(done)
		batch.Loop(reqs, quit, 3, func(b []int) {
			batches = append(batches, b)
			if len(batches) == 2 {
				close(quit) // the seventh request is still queued
			}
		})
	}()
	<-done
	var all []int
	for _, b := range batches {
		if len(b) == 0 || len(b) > 3 {
			t.Fatalf("batch of %d: %v", len(b), batches)
		}
		all = append(all, b...)
	}
	if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6}) || len(batches[0]) != 3 {
		t.Fatalf("batches %v", batches)
	}
}
