package verifier_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// TestHostileJWKS: with nothing cached, an endpoint that hangs, is too big,
// redirects or lies leaves the brand's keys unobtainable: the error wraps
// ErrFetch (undecided, retry), never a key set that verifies nothing.
func TestHostileJWKS(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	good := pacttest.NewJWKS(sc.Brand.Key)
	defer good.Close()

	hang := newPeer(t, nil)
	hang.hang()
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys":[` + strings.Repeat(`{"kty":"oct","k":"AAAA"},`, 10000) + `{}]}`))
	}))
	defer huge.Close()
	redirect := httptest.NewServer(http.RedirectHandler(good.URL(), http.StatusFound))
	defer redirect.Close()

	tests := []struct {
		name    string
		uri     string
		body    string
		wantBad bool // the body was fetched and rejected
	}{
		{name: "hangs", uri: hang.URL()},
		{name: "huge", uri: huge.URL},
		{name: "redirect", uri: redirect.URL},
		{name: "not JSON", body: "<html>hello</html>", wantBad: true},
		{name: "no keys array", body: `{"kty":"EC"}`, wantBad: true},
		{name: "keys not an array", body: `{"keys":"x"}`, wantBad: true},
		{name: "empty keys", body: `{"keys":[]}`, wantBad: true},
		{name: "odd keys only", body: `{"keys":[{"kty":"oct","k":"c2VjcmV0"},{"kty":"EC","crv":"P-384","x":"AA","y":"AA"},{"kty":"RSA","n":"AQAB","e":"AQAB"},42,"x",null,{"kty":"EC","crv":"P-256","x":"bad","y":"bad"}]}`, wantBad: true},
		{name: "encryption key only", body: `{"keys":[` + mustJSON(encKey(t)) + `]}`, wantBad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uri := tc.uri
			if tc.body != "" {
				j := pacttest.NewJWKS()
				defer j.Close()
				j.SetRaw([]byte(tc.body))
				uri = j.URL()
			}
			f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Timeout: 300 * time.Millisecond})
			reg, err := verifier.NewRegistry(f, []verifier.Brand{{InterfaceURL: sc.Brand.ID, JWKSURI: uri}}, sc.Agents())
			if err != nil {
				t.Fatal(err)
			}
			// The hanging endpoint never answers: that this returns at all
			// shows the fetch timeout bounds the wait.
			s, err := reg.Brand(context.Background(), sc.Brand.ID, false)
			if !errors.Is(err, verifier.ErrFetch) {
				t.Fatalf("Brand = %v, %v; want an error wrapping ErrFetch", s.Keys, err)
			}
			if got := errors.Is(err, verifier.ErrBadJWKS); got != tc.wantBad {
				t.Fatalf("errors.Is(%v, ErrBadJWKS) = %v, want %v", err, got, tc.wantBad)
			}
		})
	}
}

// encKey is a P-256 key published for encryption only (use "enc").
func encKey(t *testing.T) jose.JSONWebKey {
	t.Helper()
	k := pacttest.MustKey("enc", jose.ES256).Public()
	k.Use = "enc"
	return k
}

func TestParseKeySetKeepsGoodKeysBesideOddOnes(t *testing.T) {
	k := pacttest.MustKey("good", jose.ES256)
	j := pacttest.NewJWKS(k)
	defer j.Close()
	body := `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"good"},` + mustJSON(k.Public()) + `,{"kty":"EC","crv":"P-256","x":"bad","y":"bad"}]}`
	ks, err := verifier.ParseKeySet(verifier.NewSnapshot("u", time.Now(), []byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	if ks.Skipped != 2 {
		t.Fatalf("skipped = %d, want 2", ks.Skipped)
	}
}

func mustJSON(k jose.JSONWebKey) string {
	b, err := k.MarshalJSON()
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestFetchURIRules(t *testing.T) {
	tests := []struct {
		uri      string
		loopback bool
		ok       bool
	}{
		{"https://pa.example/jwks.json", false, true},
		{"http://pa.example/jwks.json", true, false},
		{"http://127.0.0.1:8080/jwks.json", false, false},
		{"http://127.0.0.1:8080/jwks.json", true, true},
		{"http://localhost/jwks.json", true, true},
		{"http://[::1]/jwks.json", true, true},
		{"file:///etc/passwd", true, false},
		{"ftp://pa.example/jwks.json", true, false},
		{"/relative", true, false},
	}
	for _, tc := range tests {
		err := verifier.CheckFetchURI(tc.uri, tc.loopback)
		if (err == nil) != tc.ok {
			t.Errorf("CheckFetchURI(%q, %v) = %v, want ok=%v", tc.uri, tc.loopback, err, tc.ok)
		}
		if err != nil && !errors.Is(err, verifier.ErrFetch) {
			t.Errorf("error %v does not wrap ErrFetch", err)
		}
	}
}

func TestBrandKeysThroughRFC8414Metadata(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"issuer":"` + sc.AuthServer + `","jwks_uri":"` + sc.Brand.JWKS.URL() + `","token_endpoint":"https://x/token"}`))
	}))
	defer meta.Close()
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, []verifier.Brand{{InterfaceURL: sc.Brand.ID, MetadataURL: meta.URL + "/.well-known/oauth-authorization-server"}}, sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Checks {
		if c.Result != verifier.Pass {
			t.Fatalf("%s = %v: %s", c.Name, c.Result, c.Detail)
		}
	}
	// The metadata's issuer is the iss delegation tokens must carry.
	r := sc.Mint(pacttest.Spec{})
	r.TokenClaims["iss"] = "https://another-as.example"
	sc.Resign(r)
	res, _ = v.Verify(context.Background(), input(r), reg)
	if results(res)["delegation_token"] != verifier.Fail {
		t.Fatalf("token from another issuer passed: %+v", res.Checks)
	}
}

func TestFailingEndpointIsNotHammeredAndStaleKeysServe(t *testing.T) {
	k1 := pacttest.MustKey("k1", jose.ES256)
	p := newPeer(t, []byte(`{"keys":[`+mustJSON(k1.Public())+`]}`))
	clk := newClock()
	fetched := make(chan string, 16)
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: clk.Now, OnFetch: func(r string) { fetched <- r }})
	ctx := context.Background()
	first, err := f.Keys(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	wantFetch(t, fetched, verifier.FetchOK)

	// TTL passes and the endpoint goes down: the keys last fetched still
	// serve, and its one background refetch fails.
	p.refuse()
	clk.Add(10 * time.Minute)
	if ks, err := f.Keys(ctx, p.URL()); err != nil || ks.Snapshot.ID != first.Snapshot.ID {
		t.Fatalf("Keys past TTL with the endpoint down = %v, %v; want the stale set", ks, err)
	}
	wantFetch(t, fetched, verifier.FetchError)
	if ks, err := f.Keys(ctx, p.URL()); err != nil || ks.Snapshot.ID != first.Snapshot.ID {
		t.Fatalf("Keys after a failed refetch = %v, %v; want the stale set", ks, err)
	}
	if got, want := f.Staleness(clk.Now()), map[string]time.Duration{p.URL(): 10 * time.Minute}; !maps.Equal(got, want) {
		t.Fatalf("Staleness = %v, want %v", got, want)
	}

	// Past MaxStale the set is no longer served: undecided (ErrFetch), and
	// the failing endpoint is asked once per MinRefetch, not once per call.
	clk.Add(2 * time.Hour)
	before := p.hits.Load()
	for i := range 5 {
		if ks, err := f.Keys(ctx, p.URL()); !errors.Is(err, verifier.ErrFetch) {
			t.Fatalf("call %d past MaxStale = %v, %v; want an error wrapping ErrFetch", i, ks, err)
		}
	}
	wantFetch(t, fetched, verifier.FetchError)
	if n := p.hits.Load() - before; n != 1 {
		t.Fatalf("failing endpoint hit %d times for 5 calls", n)
	}

	// Once it is back and MinRefetch has passed, the keys are fetched again.
	p.serve([]byte(`{"keys":[` + mustJSON(k1.Public()) + `]}`))
	clk.Add(10 * time.Second)
	if _, err := f.Keys(ctx, p.URL()); err != nil {
		t.Fatal(err)
	}
	if got := f.Staleness(clk.Now()); len(got) != 0 {
		t.Fatalf("Staleness after a good fetch = %v, want none", got)
	}
}

func TestDisabledAgentFails(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	agents := sc.Agents()
	agents[0].Enabled = false
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), sc.Brands(), agents)
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	res, _ := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
	if results(res)["request_signature"] != verifier.Fail {
		t.Fatalf("disabled agent passed: %+v", res.Checks)
	}
}

func TestOpenAgentPolicy(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	pa := pacttest.MustKey("open-pa", jose.ES256)
	j := pacttest.NewJWKS(pa)
	defer j.Close()
	var issuer string
	disc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"issuer":"` + issuer + `","jwks_uri":"` + j.URL() + `"}`))
	}))
	defer disc.Close()
	issuer = disc.URL
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	tok := pa.Sign(map[string]any{"iss": issuer, "sub": "u", "aud": sc.Audience, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Minute).Unix()})
	for _, open := range []bool{false, true} {
		reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, sc.Agents())
		if open {
			reg.OpenAgentsOnLoopback()
		}
		_, err := v.VerifyPAJWT(context.Background(), tok, time.Now(), reg)
		if (err == nil) != open {
			t.Fatalf("open=%v: %v", open, err)
		}
	}
	// Discovery must name the same issuer.
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, nil)
	reg.OpenAgentsOnLoopback()
	bad := pa.Sign(map[string]any{"iss": issuer + "/", "sub": "u", "aud": sc.Audience, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Minute).Unix()})
	if _, err := v.VerifyPAJWT(context.Background(), bad, time.Now(), reg); err == nil {
		t.Fatal("issuer mismatch with discovery accepted")
	}
}

// peer is a loopback JWKS endpoint that a test makes serve, hang (hold each
// request until the test releases it), refuse (503) or lie (any body).
type peer struct {
	srv     *httptest.Server
	hits    atomic.Int32
	arrived chan struct{} // one value per request that reached the handler

	mu      sync.Mutex
	hanging bool
	refused bool
	body    []byte
	release chan struct{} // closed to let held requests answer
}

func newPeer(t *testing.T, body []byte) *peer {
	t.Helper()
	p := &peer{arrived: make(chan struct{}, 64), body: body, release: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		select {
		case p.arrived <- struct{}{}:
		default:
		}
		p.mu.Lock()
		hanging, release := p.hanging, p.release
		p.mu.Unlock()
		if hanging {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		p.mu.Lock()
		refused, body := p.refused, p.body
		p.mu.Unlock()
		if refused {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(func() {
		p.releaseWith(nil)
		p.srv.Close()
	})
	return p
}

func (p *peer) URL() string { return p.srv.URL + "/jwks.json" }

// hang holds every request from now on until releaseWith.
func (p *peer) hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hanging, p.release = true, make(chan struct{})
}

// releaseWith lets held requests (and later ones) answer body (when not nil).
func (p *peer) releaseWith(body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if body != nil {
		p.body, p.refused = body, false
	}
	if p.hanging {
		p.hanging = false
		close(p.release)
	}
}

func (p *peer) refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused = true
}

func (p *peer) serve(body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused, p.body = false, body
}

// waitArrived waits until a request reaches the handler.
func (p *peer) waitArrived(t *testing.T) {
	t.Helper()
	select {
	case <-p.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the endpoint")
	}
}

// clock is a settable clock safe for the fetcher's goroutines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// wantFetch waits for the next fetch result reported through OnFetch.
func wantFetch(t *testing.T, fetched <-chan string, want string) {
	t.Helper()
	select {
	case got := <-fetched:
		if got != want {
			t.Fatalf("fetch result = %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no fetch result; want %q", want)
	}
}

// returns runs call and fails the test if it does not return while the
// endpoint is held: a call that waited for the hanging fetch never would.
func returns[T any](t *testing.T, what string, call func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- call() }()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited for the hanging endpoint", what)
		panic("unreachable")
	}
}

type keysResult struct {
	ks  *verifier.KeySet
	err error
}

func jwksOf(keys ...*pacttest.Key) []byte {
	var parts []string
	for _, k := range keys {
		parts = append(parts, mustJSON(k.Public()))
	}
	return []byte(`{"keys":[` + strings.Join(parts, ",") + `]}`)
}

// TestStaleSetServedWhileRefetchHangs: past TTL, callers get the cached set
// at once while one refetch hangs at the endpoint; when it lands, the new
// set serves.
func TestStaleSetServedWhileRefetchHangs(t *testing.T) {
	k1, k2 := pacttest.MustKey("k1", jose.ES256), pacttest.MustKey("k2", jose.ES256)
	p := newPeer(t, jwksOf(k1))
	clk := newClock()
	fetched := make(chan string, 16)
	var staleServed atomic.Int32
	f := verifier.NewFetcher(verifier.FetcherConfig{
		AllowInsecureLoopback: true, Timeout: time.Minute, Now: clk.Now,
		OnFetch: func(r string) { fetched <- r },
		OnStale: func(time.Duration) { staleServed.Add(1) },
	})
	ctx := context.Background()
	first, err := f.Keys(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	wantFetch(t, fetched, verifier.FetchOK)
	p.waitArrived(t)

	p.hang()
	clk.Add(5*time.Minute + time.Second)
	const callers = 8
	results := make(chan keysResult, callers)
	for range callers {
		go func() {
			ks, err := f.Keys(ctx, p.URL())
			results <- keysResult{ks, err}
		}()
	}
	for range callers {
		r := returns(t, "Keys with a stale set", func() keysResult { return <-results })
		if r.err != nil || r.ks.Snapshot.ID != first.Snapshot.ID {
			t.Fatalf("Keys past TTL = %v, %v; want the cached set", r.ks, r.err)
		}
	}
	// The refetch reached the endpoint and is held there: only one for all
	// the callers.
	p.waitArrived(t)
	if got := p.hits.Load(); got != 2 {
		t.Fatalf("endpoint hit %d times, want 2 (first fetch, one refetch)", got)
	}
	if got := staleServed.Load(); got != callers {
		t.Fatalf("OnStale called %d times, want %d", got, callers)
	}

	p.releaseWith(jwksOf(k1, k2))
	wantFetch(t, fetched, verifier.FetchOK)
	ks, err := f.Keys(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	if string(ks.Snapshot.Body) != string(jwksOf(k1, k2)) {
		t.Fatalf("after the refetch Keys serves %s, want the new set", ks.Snapshot.Body)
	}
}

// TestFirstFetchIsShared: callers with nothing cached wait for one fetch.
func TestFirstFetchIsShared(t *testing.T) {
	k1 := pacttest.MustKey("k1", jose.ES256)
	p := newPeer(t, jwksOf(k1))
	p.hang()
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Timeout: time.Minute})
	const callers = 8
	results := make(chan keysResult, callers)
	for range callers {
		go func() {
			ks, err := f.Keys(context.Background(), p.URL())
			results <- keysResult{ks, err}
		}()
	}
	p.waitArrived(t)
	p.releaseWith(nil)
	for range callers {
		r := <-results
		if r.err != nil || string(r.ks.Snapshot.Body) != string(jwksOf(k1)) {
			t.Fatalf("Keys = %v, %v", r.ks, r.err)
		}
	}
	if got := p.hits.Load(); got != 1 {
		t.Fatalf("endpoint hit %d times for %d callers, want 1", got, callers)
	}
}

// TestCallerGivingUpLeavesTheFetchRunning: the fetch belongs to every
// waiter, so one caller's cancelled ctx neither cancels it nor starts a
// second one.
func TestCallerGivingUpLeavesTheFetchRunning(t *testing.T) {
	k1 := pacttest.MustKey("k1", jose.ES256)
	p := newPeer(t, jwksOf(k1))
	p.hang()
	fetched := make(chan string, 16)
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Timeout: time.Minute, OnFetch: func(r string) { fetched <- r }})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := f.Keys(ctx, p.URL())
		errc <- err
	}()
	p.waitArrived(t)
	cancel()
	if err := <-errc; !errors.Is(err, verifier.ErrFetch) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Keys with a cancelled ctx = %v, want ErrFetch and context.Canceled", err)
	}
	p.releaseWith(nil)
	wantFetch(t, fetched, verifier.FetchOK)
	if _, err := f.Keys(context.Background(), p.URL()); err != nil {
		t.Fatal(err)
	}
	if got := p.hits.Load(); got != 1 {
		t.Fatalf("endpoint hit %d times, want 1", got)
	}
}

// TestUnknownKidWaitIsBounded: an unknown kid waits at most UnknownKidWait
// for a hanging refetch and is undecided (ErrFetch); callers whose kid is
// cached are not held meanwhile; the refetch goes on for later callers.
func TestUnknownKidWaitIsBounded(t *testing.T) {
	k1, k2 := pacttest.MustKey("k1", jose.ES256), pacttest.MustKey("k2", jose.ES256)
	p := newPeer(t, jwksOf(k1))
	clk := newClock()
	fetched := make(chan string, 16)
	f := verifier.NewFetcher(verifier.FetcherConfig{
		AllowInsecureLoopback: true, Timeout: time.Minute, UnknownKidWait: 20 * time.Millisecond, Now: clk.Now,
		OnFetch: func(r string) { fetched <- r },
	})
	ctx := context.Background()
	first, err := f.Keys(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	wantFetch(t, fetched, verifier.FetchOK)
	p.waitArrived(t)

	p.hang()
	r := returns(t, "Refresh", func() keysResult { ks, err := f.Refresh(ctx, p.URL()); return keysResult{ks, err} })
	if !errors.Is(r.err, verifier.ErrFetch) {
		t.Fatalf("Refresh while the endpoint hangs = %v, %v; want an error wrapping ErrFetch", r.ks, r.err)
	}
	p.waitArrived(t) // the refetch is held at the endpoint
	r = returns(t, "Keys with a fresh set", func() keysResult { ks, err := f.Keys(ctx, p.URL()); return keysResult{ks, err} })
	if r.err != nil || r.ks.Snapshot.ID != first.Snapshot.ID {
		t.Fatalf("Keys while a refetch hangs = %v, %v; want the cached set", r.ks, r.err)
	}
	// A second unknown kid joins the same refetch.
	clk.Add(time.Second)
	r = returns(t, "second Refresh", func() keysResult { ks, err := f.Refresh(ctx, p.URL()); return keysResult{ks, err} })
	if !errors.Is(r.err, verifier.ErrFetch) {
		t.Fatalf("second Refresh = %v, %v; want an error wrapping ErrFetch", r.ks, r.err)
	}
	if got := p.hits.Load(); got != 2 {
		t.Fatalf("endpoint hit %d times, want 2 (first fetch, one refetch)", got)
	}

	// The refetch lands: an unknown kid within MinRefetch gets its set,
	// undecided for a kid it lacks (it started before this kid was seen).
	p.releaseWith(jwksOf(k1, k2))
	wantFetch(t, fetched, verifier.FetchOK)
	ks, err := f.Refresh(ctx, p.URL())
	if !errors.Is(err, verifier.ErrFetch) || ks == nil || string(ks.Snapshot.Body) != string(jwksOf(k1, k2)) {
		t.Fatalf("Refresh after the refetch landed = %v, %v; want the new set and an error wrapping ErrFetch", ks, err)
	}
	if got := p.hits.Load(); got != 2 {
		t.Fatalf("endpoint hit %d times, want 2", got)
	}
}

// TestUnusableSetKeepsTheStaleOne: a fetched JWKS without a usable key (an
// oct key, HTML) is rejected; the cached set keeps serving and the good kid
// still verifies.
func TestUnusableSetKeepsTheStaleOne(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	p := newPeer(t, jwksOf(sc.Brand.Key))
	clk := newClock()
	rejected := make(chan struct{}, 4)
	f := verifier.NewFetcher(verifier.FetcherConfig{
		AllowInsecureLoopback: true, Now: clk.Now,
		OnFetch: func(r string) {
			if r == verifier.FetchRejected {
				rejected <- struct{}{}
			}
		},
	})
	reg, err := verifier.NewRegistry(f, []verifier.Brand{{InterfaceURL: sc.Brand.ID, JWKSURI: p.URL()}}, sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	verify := func() verifier.Outcome {
		t.Helper()
		res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
		if err != nil {
			t.Fatal(err)
		}
		return results(res)["receipt_signature"]
	}
	if got := verify(); got != verifier.Pass {
		t.Fatalf("first verify: receipt_signature = %v", got)
	}
	for _, body := range []string{`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"` + sc.Brand.Key.Kid + `"}]}`, "<html>maintenance</html>"} {
		p.serve([]byte(body))
		clk.Add(6 * time.Minute) // past TTL and MinRefetch: one background refetch
		if got := verify(); got != verifier.Pass {
			t.Fatalf("%s: receipt_signature with the stale set = %v", body, got)
		}
		select {
		case <-rejected:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the fetched body was not rejected", body)
		}
		if got := verify(); got != verifier.Pass {
			t.Fatalf("%s: receipt_signature after the unusable set was fetched = %v", body, got)
		}
		// An unknown kid meanwhile is undecided, not unknown.
		if _, err := f.Refresh(context.Background(), p.URL()); !errors.Is(err, verifier.ErrFetch) || !errors.Is(err, verifier.ErrBadJWKS) {
			t.Fatalf("%s: Refresh = %v, want ErrFetch and ErrBadJWKS", body, err)
		}
	}
}

// TestNoCachedSetAndEndpointDown: with nothing cached, a refused endpoint
// leaves the keys unobtainable: an error wrapping ErrFetch.
func TestNoCachedSetAndEndpointDown(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/jwks.json"
	closed.Close()
	refusing := newPeer(t, nil)
	refusing.refuse()
	tests := []struct {
		name string
		uri  string
	}{
		{"closed port", closedURL},
		{"503", refusing.URL()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
			if ks, err := f.Keys(context.Background(), tc.uri); !errors.Is(err, verifier.ErrFetch) {
				t.Fatalf("Keys = %v, %v; want an error wrapping ErrFetch", ks, err)
			}
			// Asked again within MinRefetch: the same answer without a fetch.
			if ks, err := f.Refresh(context.Background(), tc.uri); !errors.Is(err, verifier.ErrFetch) {
				t.Fatalf("Refresh = %v, %v; want an error wrapping ErrFetch", ks, err)
			}
		})
	}
	if got := refusing.hits.Load(); got != 1 {
		t.Fatalf("refusing endpoint hit %d times, want 1", got)
	}
}

// TestFailedRefetchIsUndecidedWithinMinRefetch: after an unknown kid whose
// refetch failed, Refresh answers ErrFetch (not the stale set) until
// MinRefetch has passed; after one that succeeded, the cached set with
// ErrFetch (undecided for a kid it lacks).
func TestFailedRefetchIsUndecidedWithinMinRefetch(t *testing.T) {
	k1, k2 := pacttest.MustKey("k1", jose.ES256), pacttest.MustKey("k2", jose.ES256)
	p := newPeer(t, jwksOf(k1))
	clk := newClock()
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: clk.Now})
	ctx := context.Background()
	if _, err := f.Keys(ctx, p.URL()); err != nil {
		t.Fatal(err)
	}
	p.refuse()
	clk.Add(time.Minute)
	if ks, err := f.Refresh(ctx, p.URL()); !errors.Is(err, verifier.ErrFetch) {
		t.Fatalf("Refresh with the endpoint down = %v, %v; want an error wrapping ErrFetch", ks, err)
	}
	// Back up, but within MinRefetch of the failed refetch: still undecided,
	// and the endpoint is not asked.
	p.serve(jwksOf(k1, k2))
	clk.Add(5 * time.Second)
	if ks, err := f.Refresh(ctx, p.URL()); !errors.Is(err, verifier.ErrFetch) {
		t.Fatalf("Refresh within MinRefetch of a failed refetch = %v, %v; want an error wrapping ErrFetch", ks, err)
	}
	// The cached set still serves callers whose kid it has.
	if _, err := f.Keys(ctx, p.URL()); err != nil {
		t.Fatalf("Keys = %v", err)
	}
	if got := p.hits.Load(); got != 2 {
		t.Fatalf("endpoint hit %d times, want 2", got)
	}
	// MinRefetch passed: refetched.
	clk.Add(5 * time.Second)
	ks, err := f.Refresh(ctx, p.URL())
	if err != nil || string(ks.Snapshot.Body) != string(jwksOf(k1, k2)) {
		t.Fatalf("Refresh after MinRefetch = %v, %v; want the new set", ks, err)
	}
	// Within MinRefetch of a successful refetch: the cached set, no
	// fetch, and an error wrapping ErrFetch: that refetch started before
	// this kid was seen, perhaps before its key was published, so a kid
	// the set lacks is undecided.
	clk.Add(time.Second)
	if ks2, err := f.Refresh(ctx, p.URL()); !errors.Is(err, verifier.ErrFetch) || ks2 == nil || ks2.Snapshot.ID != ks.Snapshot.ID {
		t.Fatalf("Refresh within MinRefetch of a good refetch = %v, %v; want the cached set and an error wrapping ErrFetch", ks2, err)
	}
	if got := p.hits.Load(); got != 3 {
		t.Fatalf("endpoint hit %d times, want 3", got)
	}
}

// TestFetcherRefusesURIsItMayNotFetch: a Fetcher asked for keys at a URI
// its rule refuses (plain http without AllowInsecureLoopback) answers
// with the rule's error every time and never asks the endpoint, while
// one that may fetch it gets the keys and then serves them from its cache.
func TestFetcherRefusesURIsItMayNotFetch(t *testing.T) {
	k := pacttest.MustKey("k1", jose.ES256)
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		w.Write([]byte(`{"keys":[` + mustJSON(k.Public()) + `]}`))
	}))
	defer srv.Close()
	ctx := context.Background()

	strict := verifier.NewFetcher(verifier.FetcherConfig{})
	for i := range 2 {
		if ks, err := strict.Keys(ctx, srv.URL); !errors.Is(err, verifier.ErrFetch) || !strings.Contains(err.Error(), "plain http") {
			t.Fatalf("call %d: keys %v, error %v; want the URI refused", i+1, ks, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the refused endpoint was asked %d times", n)
	}

	loopback := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	for i := range 2 {
		if _, err := loopback.Keys(ctx, srv.URL); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the endpoint was asked %d times for two calls within the TTL; want once", n)
	}
}
