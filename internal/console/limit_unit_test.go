package console

import (
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestClientAddr(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name, remote, xff string
		trusted           []netip.Prefix
		want              string
	}{
		{"peer", "192.0.2.1:5555", "", nil, "192.0.2.1/32"},
		{"forwarded for from an untrusted peer is ignored", "192.0.2.1:5555", "198.51.100.7", proxies, "192.0.2.1/32"},
		{"trusted proxy", "10.1.2.3:5555", "198.51.100.7", proxies, "198.51.100.7/32"},
		{"the nearest untrusted hop", "10.1.2.3:5555", "203.0.113.9, 198.51.100.7, 10.4.4.4", proxies, "198.51.100.7/32"},
		{"a hop that is not an address stops the walk", "10.1.2.3:5555", "198.51.100.7, bogus, 10.4.4.4", proxies, "10.4.4.4/32"},
		{"only proxies", "10.1.2.3:5555", "10.4.4.4", proxies, "10.4.4.4/32"},
		{"no header", "10.1.2.3:5555", "", proxies, "10.1.2.3/32"},
		{"IPv6 by its /64", "[2001:db8:1:2:aaaa::1]:5555", "", nil, "2001:db8:1:2::/64"},
		{"IPv6 client behind an IPv6 proxy", "[fd00::1]:5555", "2001:db8:9:9::7", proxies, "2001:db8:9:9::/64"},
		{"IPv4-mapped IPv6", "[::ffff:192.0.2.1]:5555", "", nil, "192.0.2.1/32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/console/signin", nil)
			r.RemoteAddr = tc.remote
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			if got := clientAddr(r, tc.trusted).String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// A full table forgets addresses whose bucket has refilled; when none has,
// new addresses share one bucket rather than starting afresh.
func TestSigninLimitTableIsBounded(t *testing.T) {
	now := time.Date(2026, 10, 9, 9, 0, 0, 0, time.UTC)
	l := newSigninLimit(2, 10*time.Second, 2, func() time.Time { return now })
	a, b, c, d := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("192.0.2.2/32"), netip.MustParsePrefix("192.0.2.3/32"), netip.MustParsePrefix("192.0.2.4/32")
	for _, p := range []netip.Prefix{a, a, b, b} {
		l.attempt(p)
	}
	if w, _ := l.attempt(a); w != 10*time.Second {
		t.Fatalf("a waits %v, want 10s", w)
	}
	// The table is full of empty buckets: c and d share the overflow one.
	l.attempt(c)
	l.attempt(d)
	if w, _ := l.attempt(c); w != 10*time.Second {
		t.Fatalf("c waits %v, want 10s (the shared bucket is empty)", w)
	}
	if len(l.m) != 2 {
		t.Fatalf("%d addresses remembered, want at most 2", len(l.m))
	}
	// Once a and b have refilled, they are forgotten and c gets its own.
	now = now.Add(20 * time.Second)
	if w, _ := l.attempt(c); w != 0 {
		t.Fatalf("c waits %v after the refill", w)
	}
	if _, ok := l.m[c]; !ok || len(l.m) != 1 {
		t.Fatalf("table %v, want c alone", l.m)
	}
}

// Attempts sent at once are counted as they arrive: no more than the
// burst are let through to the key's lookup, and an attempt given back
// (a key the ledger knew) is not counted.
func TestSigninAttemptsAtOnceAreCountedAtOnce(t *testing.T) {
	now := time.Date(2026, 10, 9, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	l := newSigninLimit(5, 20*time.Second, 100, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	a := netip.MustParsePrefix("192.0.2.1/32")
	var through atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 60 {
		wg.Go(func() {
			<-start
			if w, _ := l.attempt(a); w == 0 {
				through.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := through.Load(); n != 5 {
		t.Fatalf("%d of 60 attempts at once let through, want 5", n)
	}
	b := netip.MustParsePrefix("192.0.2.2/32")
	for i := range 10 {
		w, giveBack := l.attempt(b)
		if w != 0 {
			t.Fatalf("sign-in %d of a known key: wait %v, want none (each gave its attempt back)", i+1, w)
		}
		mu.Lock()
		now = now.Add(time.Millisecond) // the key's lookup takes a while
		mu.Unlock()
		giveBack()
	}
}
