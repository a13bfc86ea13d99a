package server

import (
	"sync"
	"sync/atomic"
)

// workers runs functions on goroutines it keeps between calls, as the gRPC
// server's stream workers do for calls (streamWorkers). AppendReceipts
// records each receipt on a goroutine of its own; a receipt's
// verification, JSON and commit run deep, so a new goroutine grew and
// copied its stack several times a receipt (about 3 % of the write path's
// CPU in batches). A kept goroutine has grown its stack already.
//
// At most max goroutines are kept; while all of them are busy a function
// runs on a new goroutine that ends with it. The kept ones end when stop
// is called.
type workers struct {
	tasks chan func()
	done  chan struct{}
	once  sync.Once
	live  atomic.Int32
	max   int32
}

func newWorkers(max int) *workers {
	return &workers{tasks: make(chan func()), done: make(chan struct{}), max: int32(max)}
}

// run runs f on a kept goroutine that is idle, on a new kept one while
// fewer than max are kept, or else on a goroutine of its own.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
		return
	default:
	}
	if w.live.Add(1) <= w.max {
		go w.keep(f)
		return
	}
	w.live.Add(-1)
	go f()
}

// keep runs f, then what run hands it, until stop (after stop, f alone).
func (w *workers) keep(f func()) {
	defer w.live.Add(-1)
	for {
		f()
		select {
		case f = <-w.tasks:
		case <-w.done:
			return
		}
	}
}

// stop ends the kept goroutines once each finishes what it runs. What run
// is given after stop still runs, each on a goroutine that then ends.
func (w *workers) stop() {
	w.once.Do(func() { close(w.done) })
}
