package server

import (
	"context"
	"sync"
	"time"
)

// sharedCount runs one read of a count at a time, shared by the callers
// that wait for it: /readyz needs no key, and on PostgreSQL each read of
// the outbox's depth counts its rows, which an S3 outage grows without
// bound; a caller each, at once, would take every connection of the
// pool. A caller gets the count of a read that started after it came,
// never an older one: one running when it comes is waited for, and the
// next is shared by every caller that waited for it.
type sharedCount struct {
	read func(context.Context) (int, error)

	mu      sync.Mutex
	started uint64     // reads started
	cur     *countRead // the read running; nil: none
}

// sharedReadTimeout bounds a shared read.
const sharedReadTimeout = 5 * time.Second

type countRead struct {
	seq  uint64 // its number among the reads started
	done chan struct{}
	n    int
	err  error
}

func (c *sharedCount) get(ctx context.Context) (int, error) {
	c.mu.Lock()
	seen := c.started // a read numbered after it started after this call came
	for {
		r := c.cur
		if r == nil {
			c.started++
			r = &countRead{seq: c.started, done: make(chan struct{})}
			c.cur = r
			c.mu.Unlock()
			// Not the caller's own context: the read is every waiter's, and
			// a caller that hangs up (anyone, on /readyz) must not fail it
			// for a load balancer's probe waiting on it.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedReadTimeout)
			r.n, r.err = c.read(rctx)
			cancel()
			c.mu.Lock()
			c.cur = nil
			c.mu.Unlock()
			close(r.done)
			return r.n, r.err
		}
		c.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if r.seq > seen {
			return r.n, r.err
		}
		c.mu.Lock()
	}
}
