package server

import (
	"bytes"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
)

// goid is the calling goroutine's number, read from its stack's header.
func goid(t *testing.T) int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	if len(f) < 2 {
		t.Errorf("stack header %q", buf)
		return 0
	}
	n, err := strconv.Atoi(string(f[1]))
	if err != nil {
		t.Errorf("stack header %q", buf)
	}
	return n
}

func TestWorkersKeepTheirGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorkers(1)
		ran := make(chan int, 10)
		record := func() { ran <- goid(t) }

		w.run(record)
		synctest.Wait() // the kept goroutine waits for more
		first := <-ran
		w.run(record)
		synctest.Wait()
		if again := <-ran; again != first {
			t.Errorf("a second function ran on goroutine %d, not on the kept one (%d)", again, first)
		}

		// While the one kept goroutine is busy, a function runs on a
		// goroutine of its own, at once.
		release := make(chan struct{})
		w.run(func() { ran <- goid(t); <-release })
		synctest.Wait()
		if busy := <-ran; busy != first {
			t.Errorf("the blocking function ran on goroutine %d, not on the kept one (%d)", busy, first)
		}
		w.run(record)
		synctest.Wait()
		if other := <-ran; other == first {
			t.Error("a function waited for the busy kept goroutine")
		}
		if n := w.live.Load(); n != 1 {
			t.Errorf("%d goroutines kept, want at most 1", n)
		}
		close(release)
		synctest.Wait()

		// stop ends the kept goroutine; later functions still run.
		w.stop()
		synctest.Wait()
		if n := w.live.Load(); n != 0 {
			t.Errorf("%d goroutines kept after stop", n)
		}
		w.run(record)
		synctest.Wait()
		<-ran
		if n := w.live.Load(); n != 0 {
			t.Errorf("%d goroutines kept after a function run after stop", n)
		}
		w.stop() // a second stop is harmless
	})
}

// A server that closes stops the goroutines its AppendReceipts calls kept:
// synctest fails the test if one is still waiting when it ends.
func TestCloseAllStopsTheWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Server{workers: newWorkers(streamWorkers), log: slog.New(slog.DiscardHandler)}
		ran := make(chan struct{})
		s.workers.run(func() { close(ran) })
		<-ran
		synctest.Wait()
		if n := s.workers.live.Load(); n != 1 {
			t.Fatalf("%d goroutines kept after one function, want 1", n)
		}
		s.closeAll()
		synctest.Wait()
		if n := s.workers.live.Load(); n != 0 {
			t.Errorf("%d goroutines kept after the server closed", n)
		}
	})
}
