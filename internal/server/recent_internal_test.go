package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// The outbox's depth /readyz shows is read once at a time, the read
// shared by the callers that wait for it, and each caller gets a count
// read after it came: 100 callers at once while a read runs make one
// read more, not 100.
func TestTheOutboxDepthIsReadOnceForTheCallersWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int32
		release := make(chan struct{})
		c := sharedCount{read: func(context.Context) (int, error) {
			n := reads.Add(1)
			<-release
			return int(n), nil
		}}
		first := make(chan int, 1)
		go func() {
			n, _ := c.get(context.Background())
			first <- n
		}()
		synctest.Wait() // the first read runs
		var wg sync.WaitGroup
		var got [100]int
		for i := range got {
			wg.Go(func() {
				n, err := c.get(context.Background())
				if err != nil {
					t.Error(err)
				}
				got[i] = n
			})
		}
		synctest.Wait() // every caller waits
		if n := reads.Load(); n != 1 {
			t.Fatalf("%d reads while the first ran, want it alone", n)
		}
		release <- struct{}{}
		if n := <-first; n != 1 {
			t.Fatalf("the first caller: %d, want the first read", n)
		}
		synctest.Wait() // the second read runs, shared
		close(release)
		wg.Wait()
		if n := reads.Load(); n != 2 {
			t.Fatalf("100 callers during a read made %d reads in all, want 2", n)
		}
		for i, n := range got {
			if n != 2 {
				t.Fatalf("caller %d got the count of read %d, which started before it came; want read 2", i, n)
			}
		}
	})
}

// A caller that hangs up while the read it started runs does not end
// the read, which the callers waiting on it share.
func TestAReadOutlivesTheCallerThatStartedIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		readCtx := make(chan context.Context, 1)
		c := sharedCount{read: func(ctx context.Context) (int, error) {
			readCtx <- ctx
			<-release
			return 7, ctx.Err()
		}}
		ctx, hangUp := context.WithCancel(context.Background())
		go c.get(ctx)
		rctx := <-readCtx
		hangUp()
		synctest.Wait()
		if err := rctx.Err(); err != nil {
			t.Fatalf("the read, once the caller that started it hung up: %v", err)
		}
		close(release)
	})
}
