package verifier_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// A brand configured through RFC 8414 metadata moves its keys to a new
// jwks_uri and signs with a key published there. An unknown kid refetches
// the metadata too, so the receipt verifies at the new address within
// the metadata's TTL; and while the metadata cannot be refetched, a kid
// the keys at the old address lack is undecided (the writer is told to
// retry), never a FAIL recorded for good.
func TestAKeyMovedToANewJWKSURIIsFoundAfterAnUnknownKid(t *testing.T) {
	for _, metadataDown := range []bool{false, true} {
		sc := pacttest.NewScenario(jose.ES256, jose.ES256)
		defer sc.Close()
		moved := pacttest.MustKey("brand-k4", jose.ES256)
		oldSet := newPeer(t, jwksOf(sc.Brand.Key))
		newSet := newPeer(t, jwksOf(sc.Brand.Key, moved))
		meta := newPeer(t, []byte(`{"issuer":"`+sc.AuthServer+`","jwks_uri":"`+oldSet.URL()+`"}`))
		clk := newClock()
		f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: clk.Now})
		reg, err := verifier.NewRegistry(f, []verifier.Brand{{InterfaceURL: sc.Brand.ID, MetadataURL: meta.URL()}}, sc.Agents())
		if err != nil {
			t.Fatal(err)
		}
		v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
		ctx := context.Background()
		if res, err := v.Verify(ctx, input(sc.Mint(pacttest.Spec{At: clk.Now()})), reg); err != nil || results(res)["receipt_signature"] != verifier.Pass {
			t.Fatalf("before the move: %v %v", err, res)
		}
		meta.serve([]byte(`{"issuer":"` + sc.AuthServer + `","jwks_uri":"` + newSet.URL() + `"}`))
		if metadataDown {
			meta.refuse()
		}
		clk.Add(time.Minute)
		r := sc.Mint(pacttest.Spec{At: clk.Now()})
		r.ReceiptJWS = moved.Sign(r.Claims)
		res, err := v.Verify(ctx, input(r), reg)
		switch {
		case metadataDown && !errors.Is(err, verifier.ErrUndecided):
			t.Errorf("metadata down: %v, %+v; want the receipt undecided", err, res)
		case !metadataDown && (err != nil || results(res)["receipt_signature"] != verifier.Pass):
			t.Errorf("a receipt signed with the key at the brand's new jwks_uri: %v, %+v; want it verified", err, res)
		}
	}
}

// An open agent (OIDC discovery) that moves its keys to a new jwks_uri is
// found there after an unknown kid, as a brand is.
func TestAnOpenAgentsKeyMovedToANewJWKSURIIsFound(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	old, moved := pacttest.MustKey("open-pa", jose.ES256), pacttest.MustKey("open-pa-2", jose.ES256)
	oldSet, newSet := newPeer(t, jwksOf(old)), newPeer(t, jwksOf(old, moved))
	var mu sync.Mutex
	issuer, jwksURI := "", oldSet.URL()
	disc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Write([]byte(`{"issuer":"` + issuer + `","jwks_uri":"` + jwksURI + `"}`))
	}))
	defer disc.Close()
	issuer = disc.URL
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, nil)
	reg.OpenAgentsOnLoopback()
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	claims := map[string]any{"iss": issuer, "sub": "u", "aud": sc.Audience, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Minute).Unix()}
	if _, err := v.VerifyPAJWT(context.Background(), old.Sign(claims), time.Now(), reg); err != nil {
		t.Fatalf("before the move: %v", err)
	}
	mu.Lock()
	jwksURI = newSet.URL()
	mu.Unlock()
	if _, err := v.VerifyPAJWT(context.Background(), moved.Sign(claims), time.Now(), reg); err != nil {
		t.Fatalf("a JWT signed with the key at the agent's new jwks_uri: %v", err)
	}
}
