package provider

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"
)

// One personal agent signing a new sub with every request it may send keeps
// no more than maxLimiterKeys buckets, however long the subs, and the latest
// are kept.
func TestLimiterKeysAreBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	pad := strings.Repeat("s", 1<<10)
	tests := []struct {
		name  string
		n     int
		every time.Duration
	}{
		{"at the agent's rate for ten minutes", 100 * 600, 10 * time.Millisecond},
		{"all at once", 3 * maxLimiterKeys, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(Limit{Rate: 5, Burst: 20})
			key := func(i int) string { return "https://pa.example\x00" + pad + fmt.Sprint(i) }
			for i := range tt.n {
				if ok, _, _ := l.allow(key(i), now.Add(time.Duration(i)*tt.every)); !ok {
					t.Fatalf("request %d refused", i)
				}
			}
			if n := len(l.keys); n > maxLimiterKeys {
				t.Fatalf("%d buckets kept, want at most %d", n, maxLimiterKeys)
			}
			if _, ok := l.keys[sha256.Sum256([]byte(key(tt.n-1)))]; !ok {
				t.Fatal("the latest key has no bucket")
			}
		})
	}
}

// A bucket is kept while it is refilling, so waiting less than that does
// not reset it; at the bound, the least recently used goes; once a bucket
// is full again it is forgotten.
func TestLimiterForgetsLeastRecentlyUsed(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newLimiter(Limit{Rate: 5, Burst: 20})
	has := func(key string) bool { _, ok := l.keys[sha256.Sum256([]byte(key))]; return ok }
	for i := range 20 {
		if ok, _, _ := l.allow("a", now); !ok {
			t.Fatalf("request %d of a burst of 20 refused", i)
		}
	}
	if ok, wait, _ := l.allow("a", now); ok || wait != 200*time.Millisecond {
		t.Fatalf("past the burst: allowed %v, wait %v; want refused for 200ms", ok, wait)
	}
	for i := range maxLimiterKeys - 1 {
		l.allow(fmt.Sprint("k", i), now.Add(time.Second))
	}
	// One second refilled 5 tokens of "a", no more, and it is now the latest used.
	for i := range 5 {
		if ok, _, _ := l.allow("a", now.Add(time.Second)); !ok {
			t.Fatalf("request %d of 5 refilled refused", i)
		}
	}
	if ok, _, _ := l.allow("a", now.Add(time.Second)); ok {
		t.Fatal("a sixth request allowed a second after the burst")
	}
	l.allow("new", now.Add(time.Second))
	if got := len(l.keys); got != maxLimiterKeys {
		t.Fatalf("%d buckets kept, want %d", got, maxLimiterKeys)
	}
	if has("k0") || !has("a") || !has("k1") || !has("new") {
		t.Fatalf("at the bound: k0 kept %v, a %v, k1 %v, new %v; want all but k0", has("k0"), has("a"), has("k1"), has("new"))
	}
	// 20 tokens at 5 a second: four seconds later every bucket is full again.
	l.allow("late", now.Add(5*time.Second))
	if got := len(l.keys); got != 1 || l.byUse.Len() != 1 {
		t.Fatalf("%d buckets kept (%d in use order) once the others were full, want the new one alone", got, l.byUse.Len())
	}
}
