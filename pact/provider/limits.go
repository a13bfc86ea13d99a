package provider

import (
	"container/list"
	"crypto/sha256"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimiterKeys bounds the buckets a limiter keeps. A personal agent
// chooses its subs, so past the bound a new key takes the place of the
// least recently used one rather than being refused: refusing would let
// one agent that keeps maxLimiterKeys subs busy shut out every other
// agent's new Users, while forgetting a busy bucket only gives its key a
// full one again, at most Burst more requests, each of which still takes
// a token from its personal agent's bucket. An agent gains nothing by
// cycling subs that its own bucket does not already allow it.
const maxLimiterKeys = 10000

// Limit is a token bucket: Rate requests per second, bursts of Burst.
// A zero Rate means no limit.
type Limit struct {
	Rate  float64
	Burst int
}

// limiter keeps one token bucket per key (a personal agent, or a personal
// agent and sub), by the key's SHA-256, so a key's length costs nothing.
// It forgets a bucket once it has been idle long enough to fill again,
// when a new bucket would be the same, and keeps at most maxLimiterKeys.
type limiter struct {
	limit Limit
	fill  time.Duration // how long an empty bucket takes to fill
	mu    sync.Mutex
	keys  map[[sha256.Size]byte]*list.Element // the *entry in byUse
	byUse list.List                           // the entries, the latest used first
}

type entry struct {
	key  [sha256.Size]byte
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter(l Limit) *limiter {
	if l.Burst <= 0 {
		l.Burst = max(1, int(math.Ceil(l.Rate)))
	}
	lim := &limiter{limit: l, keys: map[[sha256.Size]byte]*list.Element{}}
	if l.Rate > 0 {
		lim.fill = time.Duration(min(math.Ceil(float64(l.Burst)/l.Rate*float64(time.Second)), math.MaxInt64))
	}
	return lim
}

// allow takes a token for key at now; when there is none it returns how long
// until there will be. undo gives the token back.
func (l *limiter) allow(key string, now time.Time) (ok bool, wait time.Duration, undo func()) {
	if l == nil || l.limit.Rate <= 0 {
		return true, 0, func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for el := l.byUse.Back(); el != nil && now.Sub(el.Value.(*entry).seen) >= l.fill; el = l.byUse.Back() {
		l.forget(el)
	}
	sum := sha256.Sum256([]byte(key))
	el := l.keys[sum]
	if el == nil {
		if len(l.keys) >= maxLimiterKeys {
			l.forget(l.byUse.Back())
		}
		el = l.byUse.PushFront(&entry{key: sum, lim: rate.NewLimiter(rate.Limit(l.limit.Rate), l.limit.Burst)})
		l.keys[sum] = el
	}
	l.byUse.MoveToFront(el)
	e := el.Value.(*entry)
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

// forget drops the bucket of el.
func (l *limiter) forget(el *list.Element) {
	l.byUse.Remove(el)
	delete(l.keys, el.Value.(*entry).key)
}
