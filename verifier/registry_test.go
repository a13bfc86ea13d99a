package verifier_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// TestRegistryErrorContract: Brand and Agent wrap ErrFetch exactly when the
// keys could not be obtained for a reason that may pass, and ErrUntrusted
// when the signer is not trusted (decided).
func TestRegistryErrorContract(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	down := newPeer(t, nil)
	down.refuse()
	noJWKSURI := newPeer(t, []byte(`{"issuer":"https://as.example"}`))
	var discIssuer, discNames string
	disc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"issuer":"` + discNames + `","jwks_uri":"` + sc.PA.JWKS.URL() + `"}`))
	}))
	defer disc.Close()
	discIssuer, discNames = disc.URL, disc.URL+"/other"
	discDown := httptest.NewServer(http.NotFoundHandler())
	discDown.Close()

	brands := append(sc.Brands(),
		verifier.Brand{InterfaceURL: "https://brand.jwks-down.example", JWKSURI: down.URL()},
		verifier.Brand{InterfaceURL: "https://brand.meta-down.example", MetadataURL: down.URL()},
		verifier.Brand{InterfaceURL: "https://brand.meta-bad.example", MetadataURL: noJWKSURI.URL()},
	)
	agents := append(sc.Agents(),
		verifier.Agent{Issuer: "https://pa.disabled.example", JWKSURI: sc.PA.JWKS.URL()},
		verifier.Agent{Issuer: "https://pa.down.example", JWKSURI: down.URL(), Enabled: true},
	)
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), brands, agents)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenAgentsOnLoopback()
	closed, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name                  string
		call                  func(ctx context.Context) error
		wantFetch, wantUntrus bool
	}{
		{name: "untrusted brand", wantUntrus: true, call: func(ctx context.Context) error {
			_, err := reg.Brand(ctx, "https://brand.unknown.example", false)
			return err
		}},
		{name: "unregistered agent, closed registry", wantUntrus: true, call: func(ctx context.Context) error {
			_, err := closed.Agent(ctx, "https://pa.unknown.example", false)
			return err
		}},
		{name: "disabled agent", wantUntrus: true, call: func(ctx context.Context) error {
			_, err := reg.Agent(ctx, "https://pa.disabled.example", false)
			return err
		}},
		{name: "discovery names another issuer", wantUntrus: true, call: func(ctx context.Context) error {
			_, err := reg.Agent(ctx, discIssuer, false)
			return err
		}},
		{name: "brand JWKS down", wantFetch: true, call: func(ctx context.Context) error {
			_, err := reg.Brand(ctx, "https://brand.jwks-down.example", false)
			return err
		}},
		{name: "brand JWKS down, unknown kid", wantFetch: true, call: func(ctx context.Context) error {
			_, err := reg.Brand(ctx, "https://brand.jwks-down.example", true)
			return err
		}},
		{name: "brand metadata down", wantFetch: true, call: func(ctx context.Context) error {
			_, err := reg.Brand(ctx, "https://brand.meta-down.example", false)
			return err
		}},
		{name: "brand metadata without jwks_uri", wantFetch: true, call: func(ctx context.Context) error {
			_, err := reg.Brand(ctx, "https://brand.meta-bad.example", false)
			return err
		}},
		{name: "agent JWKS down", wantFetch: true, call: func(ctx context.Context) error {
			_, err := reg.Agent(ctx, "https://pa.down.example", false)
			return err
		}},
		{name: "open discovery unreachable", wantFetch: true, call: func(ctx context.Context) error {
			_, err := reg.Agent(ctx, discDown.URL, false)
			return err
		}},
		{name: "trusted brand", call: func(ctx context.Context) error {
			_, err := reg.Brand(ctx, sc.Brand.ID, false)
			return err
		}},
		{name: "registered agent", call: func(ctx context.Context) error {
			_, err := reg.Agent(ctx, sc.PA.ID, true)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(context.Background())
			if got := errors.Is(err, verifier.ErrFetch); got != tc.wantFetch {
				t.Errorf("errors.Is(%v, ErrFetch) = %v, want %v", err, got, tc.wantFetch)
			}
			if got := errors.Is(err, verifier.ErrUntrusted); got != tc.wantUntrus {
				t.Errorf("errors.Is(%v, ErrUntrusted) = %v, want %v", err, got, tc.wantUntrus)
			}
			if !tc.wantFetch && !tc.wantUntrus && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
		})
	}
}

// TestStaleMetadataServes: brand metadata past TTL keeps serving while its
// endpoint fails, and the failure shows in Staleness.
func TestStaleMetadataServes(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	meta := newPeer(t, []byte(`{"issuer":"`+sc.AuthServer+`","jwks_uri":"`+sc.Brand.JWKS.URL()+`"}`))
	clk := newClock()
	fetched := make(chan string, 16)
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: clk.Now, OnFetch: func(r string) { fetched <- r }})
	reg, err := verifier.NewRegistry(f, []verifier.Brand{{InterfaceURL: sc.Brand.ID, MetadataURL: meta.URL()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := reg.Brand(ctx, sc.Brand.ID, false); err != nil {
		t.Fatal(err)
	}
	wantFetch(t, fetched, verifier.FetchOK) // metadata
	wantFetch(t, fetched, verifier.FetchOK) // JWKS

	meta.refuse()
	clk.Add(6 * time.Minute)
	// The metadata and the JWKS are both past TTL: both refetched in the
	// background (the metadata fails), both served stale meanwhile.
	s, err := reg.Brand(ctx, sc.Brand.ID, false)
	if err != nil || s.Issuer != sc.AuthServer || s.Keys == nil {
		t.Fatalf("Brand with stale metadata = %+v, %v", s, err)
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case r := <-fetched:
			got[r] = true
		case <-time.After(10 * time.Second):
			t.Fatal("background refetches did not finish")
		}
	}
	if !got[verifier.FetchOK] || !got[verifier.FetchError] {
		t.Fatalf("fetch results = %v, want one ok (JWKS) and one error (metadata)", got)
	}
	if st := f.Staleness(clk.Now()); st[meta.URL()] != 6*time.Minute || len(st) != 1 {
		t.Fatalf("Staleness = %v, want %s for %s only", st, 6*time.Minute, meta.URL())
	}
	if _, err := reg.Brand(ctx, sc.Brand.ID, false); err != nil {
		t.Fatalf("Brand after the metadata refetch failed: %v", err)
	}
}
