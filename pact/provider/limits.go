package provider

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is a token bucket: Rate requests per second, bursts of Burst.
// A zero Rate means no limit.
type Limit struct {
	Rate  float64
	Burst int
}

// limiter keeps one token bucket per key (a personal agent, or a personal
// agent and sub), forgetting keys idle for a while.
type limiter struct {
	limit Limit
	mu    sync.Mutex
	keys  map[string]*entry
	sweep time.Time
}

type entry struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter(l Limit) *limiter {
	if l.Burst <= 0 {
		l.Burst = max(1, int(math.Ceil(l.Rate)))
	}
	return &limiter{limit: l, keys: map[string]*entry{}}
}

// allow takes a token for key at now; when there is none it returns how long
// until there will be. undo gives the token back.
func (l *limiter) allow(key string, now time.Time) (ok bool, wait time.Duration, undo func()) {
	if l == nil || l.limit.Rate <= 0 {
		return true, 0, func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.sweep) > time.Minute {
		for k, e := range l.keys {
			if now.Sub(e.seen) > 10*time.Minute {
				delete(l.keys, k)
			}
		}
		l.sweep = now
	}
	e := l.keys[key]
	if e == nil {
		e = &entry{lim: rate.NewLimiter(rate.Limit(l.limit.Rate), l.limit.Burst)}
		l.keys[key] = e
	}
	e.seen = now
	r := e.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second, func() {}
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d, func() {}
	}
	return true, 0, func() { r.CancelAt(now) }
}
