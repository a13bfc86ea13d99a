package batch_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

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
		batch.Loop(reqs, quit, 3, 0, func(b []int) {
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

// TestLinger: with linger, a batch waits for late arrivals until linger
// has passed, and no longer, when it holds more than one request or its
// first was waiting; a lone request that finds the loop idle, a full
// batch and a batch waiting when quit closes commit at once.
func TestLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const linger = 2 * time.Millisecond
		type commit struct {
			batch []int
			at    time.Duration
		}
		var got []commit
		reqs := make(chan int, 16)
		quit := make(chan struct{})
		release := make(chan struct{})
		start := time.Now()
		reqs <- 1
		reqs <- 2
		done := make(chan struct{})
		go func() {
			defer close(done)
			batch.Loop(reqs, quit, 8, linger, func(b []int) {
				got = append(got, commit{slices.Clone(b), time.Since(start)})
				<-release
			})
		}()
		want := func(n int, batch []int, at time.Duration) {
			t.Helper()
			synctest.Wait()
			if len(got) != n {
				t.Fatalf("%d commits, want %d: %v", len(got), n, got)
			}
			if n == 0 {
				return
			}
			if c := got[n-1]; !slices.Equal(c.batch, batch) || c.at != at {
				t.Fatalf("commit %d: %v at %v, want %v at %v", n, c.batch, c.at, batch, at)
			}
		}
		advance := func(d time.Duration) { <-time.After(d) }

		// Two waiting: the batch lingers, takes a third that arrives 1 ms
		// later, and commits when linger has passed.
		want(0, nil, 0)
		advance(time.Millisecond)
		reqs <- 3
		want(0, nil, 0)
		advance(time.Millisecond)
		want(1, []int{1, 2, 3}, linger)

		// A lone request that finds the loop idle does not wait.
		release <- struct{}{}
		synctest.Wait()
		reqs <- 4
		want(2, []int{4}, linger)

		// A lone request that was waiting when the commit before ended
		// waits, and takes one that arrives meanwhile.
		reqs <- 5
		release <- struct{}{}
		want(2, []int{4}, linger)
		advance(linger / 2)
		reqs <- 6
		advance(linger / 2)
		want(3, []int{5, 6}, 2*linger)

		// A full batch does not wait.
		for i := 7; i <= 14; i++ {
			reqs <- i
		}
		release <- struct{}{}
		want(4, []int{7, 8, 9, 10, 11, 12, 13, 14}, 2*linger)

		// A lingering batch commits when quit closes, and Loop returns.
		reqs <- 15
		reqs <- 16
		release <- struct{}{}
		want(4, []int{7, 8, 9, 10, 11, 12, 13, 14}, 2*linger)
		close(quit)
		want(5, []int{15, 16}, 2*linger)
		release <- struct{}{}
		<-done
	})
}
