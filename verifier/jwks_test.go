package verifier_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

func TestHostileJWKS(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	good := pacttest.NewJWKS(sc.Brand.Key)
	defer good.Close()

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys":[` + strings.Repeat(`{"kty":"oct","k":"AAAA"},`, 10000) + `{}]}`))
	}))
	defer huge.Close()
	redirect := httptest.NewServer(http.RedirectHandler(good.URL(), http.StatusFound))
	defer redirect.Close()

	tests := []struct {
		name   string
		uri    string
		body   string
		wantOK bool
	}{
		{name: "slow", uri: slow.URL},
		{name: "huge", uri: huge.URL},
		{name: "redirect", uri: redirect.URL},
		{name: "not JSON", body: "<html>hello</html>"},
		{name: "no keys array", body: `{"kty":"EC"}`},
		{name: "keys not an array", body: `{"keys":"x"}`},
		{name: "odd keys only", body: `{"keys":[{"kty":"oct","k":"c2VjcmV0"},{"kty":"EC","crv":"P-384","x":"AA","y":"AA"},{"kty":"RSA","n":"AQAB","e":"AQAB"},42,"x",null,{"kty":"EC","crv":"P-256","x":"bad","y":"bad"}]}`},
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
			v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
			start := time.Now()
			res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Verify took %s: the fetch timeout did not bound it", d)
			}
			if got := results(res)["receipt_signature"]; got != verifier.Fail {
				t.Fatalf("receipt_signature = %v, want FAIL: %+v", got, res.Checks)
			}
		})
	}
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
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	good := pacttest.NewJWKS(sc.Brand.Key)
	defer good.Close()
	var hits atomic.Int32
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		resp, err := http.Get(good.URL())
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, resp.Body)
	}))
	defer srv.Close()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: func() time.Time { return now }})
	reg, _ := verifier.NewRegistry(f, []verifier.Brand{{InterfaceURL: sc.Brand.ID, JWKSURI: srv.URL}}, sc.Agents())
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	verify := func() verifier.Outcome {
		res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
		if err != nil {
			t.Fatal(err)
		}
		return results(res)["receipt_signature"]
	}
	if verify() != verifier.Pass {
		t.Fatal("first verify failed")
	}
	// TTL passes and the endpoint goes down: the keys last fetched still serve.
	failing.Store(true)
	now = now.Add(10 * time.Minute)
	if verify() != verifier.Pass {
		t.Fatal("stale keys did not serve while the endpoint fails")
	}
	// Past the staleness bound the check fails, and the failing endpoint is
	// asked once per MinRefetch, not once per receipt.
	now = now.Add(2 * time.Hour)
	before := hits.Load()
	for range 5 {
		if verify() != verifier.Fail {
			t.Fatal("verified against keys older than the staleness bound")
		}
	}
	if n := hits.Load() - before; n != 1 {
		t.Fatalf("failing endpoint hit %d times for 5 receipts", n)
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
		reg.OpenAgents(open)
		_, err := v.VerifyPAJWT(context.Background(), tok, time.Now(), reg)
		if (err == nil) != open {
			t.Fatalf("open=%v: %v", open, err)
		}
	}
	// Discovery must name the same issuer.
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, nil)
	reg.OpenAgents(true)
	bad := pa.Sign(map[string]any{"iss": issuer + "/", "sub": "u", "aud": sc.Audience, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Minute).Unix()})
	if _, err := v.VerifyPAJWT(context.Background(), bad, time.Now(), reg); err == nil {
		t.Fatal("issuer mismatch with discovery accepted")
	}
}
