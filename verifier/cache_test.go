package verifier_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// cached is a verifier with a signature cache and the registry its metrics
// are read from.
type cached struct {
	v   *verifier.Verifier
	reg *prometheus.Registry
}

func newCached(t *testing.T, sc *pacttest.Scenario, size int) *cached {
	t.Helper()
	reg := prometheus.NewRegistry()
	v, err := verifier.New(verifier.Config{Audience: sc.Audience, CacheSize: size, Metrics: verifier.NewCacheMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	return &cached{v: v, reg: reg}
}

// metric returns the value of the counter or gauge name.
func (c *cached) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := c.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// hitsMisses returns the cache's hit and miss counts.
func (c *cached) hitsMisses(t *testing.T) (float64, float64) {
	return c.metric(t, "pactledger_signature_cache_hits_total"), c.metric(t, "pactledger_signature_cache_misses_total")
}

// verify runs v on in against the scenario's current keys.
func verify(t *testing.T, v *verifier.Verifier, sc *pacttest.Scenario, in verifier.Input) map[string]verifier.Outcome {
	t.Helper()
	res, err := v.Verify(context.Background(), in, sc.Static(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return results(res)
}

// withToken is r's receipt and request JWT with the delegation token tok.
func withToken(r *pacttest.Receipt, tok string) verifier.Input {
	in := input(r)
	in.DelegationToken = tok
	return in
}

// tamperPayload changes the token's scope claim and re-encodes the payload,
// keeping the original header and signature.
func tamperPayload(t *testing.T, tok string) string {
	t.Helper()
	segs := pacttest.Segments(tok)
	var claims map[string]any
	if _, err := verifier.DecodeClaims(tok, &claims); err != nil {
		t.Fatal(err)
	}
	claims["scope"] = "orders:read orders:cancel orders:refund"
	b, _ := json.Marshal(claims)
	segs[1] = pacttest.Encode(b)
	return pacttest.Join(segs)
}

// TestCacheHitNeverTurnsAFailIntoAPass verifies a delegation token once
// (caching it), then presents it in a row that must fail, and compares the
// cached verifier's checks with those of a verifier without a cache. Where
// the token and key set are the same the cache must hit and the row still
// fail on the per-row check; where the bytes differ it must miss.
func TestCacheHitNeverTurnsAFailIntoAPass(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	tests := []struct {
		name string
		// present changes the scenario and returns the row to verify, given
		// the cached token.
		present  func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input
		wantFail string // the check that must FAIL; "" when all must PASS
		wantHit  bool
	}{
		{
			name: "the same token in another turn passes from the cache",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), Target: "A-2"}), tok)
			},
			wantHit: true,
		},
		{
			name: "expired at the receipt's ts",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(57 * time.Minute), Target: "A-2"}), tok)
			},
			wantFail: verifier.CheckDelegationToken, wantHit: true,
		},
		{
			name: "issued after the receipt's ts",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(-6 * time.Minute), Target: "A-2"}), tok)
			},
			wantFail: verifier.CheckDelegationToken, wantHit: true,
		},
		{
			name: "another user's receipt",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), User: "acct-other", Target: "A-2"}), tok)
			},
			wantFail: verifier.CheckBindings, wantHit: true,
		},
		{
			name: "scopes beyond the grant",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), ScopesUsed: []string{"orders:refund"}, Target: "A-2"}), tok)
			},
			wantFail: verifier.CheckScopesWithin, wantHit: true,
		},
		{
			name: "key rotated out of the brand's set",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				k := pacttest.MustKey("brand-k4", jose.ES256)
				sc.Brand.Key = k
				sc.Brand.JWKS.Set(k)
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), Target: "A-2"}), tok)
			},
			wantFail: verifier.CheckDelegationToken,
		},
		{
			name: "another set with a different key under the same kid",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				k := pacttest.MustKey("brand-k3", jose.ES256)
				sc.Brand.Key = k
				sc.Brand.JWKS.Set(k)
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), Target: "A-2"}), tok)
			},
			wantFail: verifier.CheckDelegationToken,
		},
		{
			name: "a set that keeps the old key beside a new one is checked again",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				sc.Brand.JWKS.Set(sc.Brand.Key, pacttest.MustKey("brand-k4", jose.ES256))
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), Target: "A-2"}), tok)
			},
		},
		{
			name: "tampered payload",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), Target: "A-2"}), tamperPayload(t, tok))
			},
			wantFail: verifier.CheckDelegationToken,
		},
		{
			name: "tampered signature",
			present: func(t *testing.T, sc *pacttest.Scenario, tok string) verifier.Input {
				return withToken(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), Target: "A-2"}), pacttest.TamperSignature(tok))
			},
			wantFail: verifier.CheckDelegationToken,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := pacttest.NewScenario(jose.ES256, jose.ES256)
			defer sc.Close()
			c := newCached(t, sc, 100)
			first := sc.Mint(pacttest.Spec{At: at})
			for name, got := range verify(t, c.v, sc, input(first)) {
				if got != verifier.Pass {
					t.Fatalf("first turn: %s = %s, want PASS", name, got)
				}
			}
			if h, m := c.hitsMisses(t); h != 0 || m != 1 {
				t.Fatalf("after the first turn: hits %v misses %v, want 0 and 1", h, m)
			}

			in := tc.present(t, sc, first.DelegationToken)
			now := sc.Static(time.Now())
			gotRes, err := c.v.Verify(context.Background(), in, now)
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := newVerifier(t, sc)
			wantRes, err := plain.Verify(context.Background(), in, now)
			if err != nil {
				t.Fatal(err)
			}
			// Every check as the verifier without a cache has it, detail
			// and all, and what the row takes from the token's claims.
			if !reflect.DeepEqual(gotRes.Checks, wantRes.Checks) {
				t.Errorf("cached checks\n%+v\nuncached\n%+v", gotRes.Checks, wantRes.Checks)
			}
			if !slices.Equal(gotRes.ScopeGranted, wantRes.ScopeGranted) || !gotRes.GrantExpires.Equal(wantRes.GrantExpires) {
				t.Errorf("cached grant %v until %v, uncached %v until %v", gotRes.ScopeGranted, gotRes.GrantExpires, wantRes.ScopeGranted, wantRes.GrantExpires)
			}
			got := results(gotRes)
			for name, g := range got {
				switch {
				case name == tc.wantFail && g != verifier.Fail:
					t.Errorf("%s = %s, want FAIL", name, g)
				case tc.wantFail == "" && g != verifier.Pass:
					t.Errorf("%s = %s, want PASS", name, g)
				}
			}
			h, m := c.hitsMisses(t)
			if tc.wantHit && (h != 1 || m != 1) {
				t.Errorf("hits %v misses %v: the second turn should have been a hit", h, m)
			}
			if !tc.wantHit && (h != 0 || m < 2) {
				t.Errorf("hits %v misses %v: the second turn should have been a miss", h, m)
			}
			// One token, one entry: checked again against another key set,
			// it replaces its entry.
			if n := c.metric(t, "pactledger_signature_cache_entries"); n != 1 {
				t.Errorf("%v entries for one token, want 1", n)
			}
		})
	}
}

// TestCacheIsBoundedLeastRecentlyUsed fills a cache of two with three
// tokens: the least recently used one is evicted and checked again.
func TestCacheIsBoundedLeastRecentlyUsed(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	c := newCached(t, sc, 2)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	var rs []*pacttest.Receipt
	for i := range 3 {
		rs = append(rs, sc.Mint(pacttest.Spec{At: at.Add(time.Duration(i) * time.Second), GrantID: "g" + strings.Repeat("x", i)}))
	}
	turn := func(i int) {
		t.Helper()
		again := sc.Mint(pacttest.Spec{At: at.Add(time.Minute), GrantID: "g" + strings.Repeat("x", i)})
		for name, got := range verify(t, c.v, sc, withToken(again, rs[i].DelegationToken)) {
			if got != verifier.Pass {
				t.Fatalf("token %d: %s = %s", i, name, got)
			}
		}
	}
	turn(0)
	turn(1)
	turn(0) // 0 is now the most recently used
	turn(2) // evicts 1
	if e := c.metric(t, "pactledger_signature_cache_evictions_total"); e != 1 {
		t.Fatalf("evictions %v, want 1", e)
	}
	if n := c.metric(t, "pactledger_signature_cache_entries"); n != 2 {
		t.Fatalf("entries %v, want 2", n)
	}
	turn(0) // hit
	turn(1) // miss: evicted
	h, m := c.hitsMisses(t)
	if h != 2 || m != 4 {
		t.Fatalf("hits %v misses %v, want 2 and 4", h, m)
	}
}

// TestCacheSharedAcrossGoroutines verifies one token once, then from many
// goroutines at once (run with -race): every turn passes from the cache.
func TestCacheSharedAcrossGoroutines(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	c := newCached(t, sc, 8)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	tok := sc.Mint(pacttest.Spec{At: at}).DelegationToken
	var turns []*pacttest.Receipt
	for i := range 32 {
		turns = append(turns, sc.Mint(pacttest.Spec{At: at.Add(time.Duration(i) * time.Second)}))
	}
	ks := sc.Static(at)
	if _, err := c.v.Verify(context.Background(), withToken(turns[0], tok), ks); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(turns))
	for _, r := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.v.Verify(context.Background(), withToken(r, tok), ks)
			if err != nil {
				errs <- err.Error()
				return
			}
			for _, ch := range res.Checks {
				if ch.Result != verifier.Pass {
					errs <- ch.Name + " " + ch.Result.String()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := c.metric(t, "pactledger_signature_cache_entries"); n != 1 {
		t.Fatalf("entries %v, want 1", n)
	}
	if h, m := c.hitsMisses(t); h != 32 || m != 1 {
		t.Fatalf("hits %v misses %v, want 32 and 1", h, m)
	}
}

func TestNegativeCacheSizeRefused(t *testing.T) {
	if _, err := verifier.New(verifier.Config{Audience: "a", CacheSize: -1}); err == nil {
		t.Fatal("a negative cache size was accepted")
	}
}
