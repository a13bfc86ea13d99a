package console

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the sign-in limit.
const (
	DefaultSigninFailures   = 5
	DefaultSigninRetryEvery = 20 * time.Second
	maxLimitedAddrs         = 10000
)

// signinLimit bounds failed sign-ins per client address: a token bucket
// per address that only failures draw from. A full bucket holds burst
// attempts; one comes back every `every`. While an address's bucket is
// empty its sign-ins are refused before the key is even looked at, so a
// guess made then learns nothing.
//
// At most max addresses are remembered. When the table is full, addresses
// whose bucket is full again are forgotten; if it is still full, new
// addresses share one bucket, so many addresses can slow sign-in down for
// one another but never reset their own limit.
type signinLimit struct {
	mu       sync.Mutex
	m        map[netip.Prefix]*rate.Limiter
	overflow *rate.Limiter
	every    time.Duration
	burst    int
	max      int
	now      func() time.Time
}

func newSigninLimit(burst int, every time.Duration, max int, now func() time.Time) *signinLimit {
	return &signinLimit{m: map[netip.Prefix]*rate.Limiter{}, every: every, burst: burst, max: max, now: now,
		overflow: rate.NewLimiter(rate.Every(every), burst)}
}

// bucketLocked returns addr's bucket.
func (l *signinLimit) bucketLocked(addr netip.Prefix, now time.Time) *rate.Limiter {
	if b, ok := l.m[addr]; ok {
		return b
	}
	if len(l.m) >= l.max {
		for a, b := range l.m {
			if b.TokensAt(now) >= float64(l.burst) {
				delete(l.m, a)
			}
		}
		if len(l.m) >= l.max {
			return l.overflow
		}
	}
	b := rate.NewLimiter(rate.Every(l.every), l.burst)
	l.m[addr] = b
	return b
}

// attempt takes one of addr's attempts before its key is looked at, so
// that attempts sent at once are counted at once; when none is left it
// takes nothing and returns how long addr must wait, in whole seconds
// rounded up. A sign-in that was not a failure (a key the ledger knows,
// or a ledger that did not answer) gives its attempt back with giveBack.
func (l *signinLimit) attempt(addr netip.Prefix) (wait time.Duration, giveBack func()) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(addr, now)
	if tokens := b.TokensAt(now); tokens < 1 {
		secs := math.Ceil((1 - tokens) * l.every.Seconds())
		return time.Duration(secs) * time.Second, nil
	}
	res := b.ReserveN(now, 1)
	return 0, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		// At the reservation's own time: a limiter gives nothing back
		// for a cancel dated after it.
		res.CancelAt(now)
	}
}

// clientAddr is the address sign-in failures are counted against: the
// connection's peer, or, when the peer is a trusted proxy, the nearest
// address in X-Forwarded-For that is not one. An IPv6 client counts by
// its /64, which one host usually holds whole.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Prefix {
	peer := parseAddr(r.RemoteAddr)
	if !peer.IsValid() {
		return netip.Prefix{}
	}
	addr := peer
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a := parseAddr(strings.TrimSpace(hops[i]))
			if !a.IsValid() {
				break // a hop that is not an address: trust nothing before it
			}
			addr = a
			if !isTrusted(a, trusted) {
				break
			}
		}
	}
	if addr.Is4() {
		return netip.PrefixFrom(addr, 32)
	}
	p, _ := addr.Prefix(64)
	return p
}

func parseAddr(s string) netip.Addr {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
