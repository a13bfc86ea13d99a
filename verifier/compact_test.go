package verifier_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// grantClaims is a claim type as a caller of VerifyCompact writes one: the
// registered claims embedded, its own beside them.
type grantClaims struct {
	verifier.Claims
	Scope string `json:"scope"`
}

// TestVerifyCompact: the one compact-JWS check the consent page, the
// delegated flow and the agent client share. Each case changes one thing
// about a good token and names the error class it must give.
func TestVerifyCompact(t *testing.T) {
	key := pacttest.MustKey("brand-1", jose.ES256)
	other := pacttest.MustKey("brand-1", jose.ES256) // same kid, another key
	keys, err := verifier.KeySetOf("https://brand.example/jwks.json", &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	good := func() map[string]any {
		return map[string]any{"iss": "https://brand.example", "aud": "https://brand.example/a2a/shop", "sub": "acct-1",
			"iat": now.Unix() - 60, "exp": now.Unix() + 3600, "scope": "orders:read"}
	}
	want := verifier.Expected{Issuer: "https://brand.example", Audience: "https://brand.example/a2a/shop", Typ: "at+jwt", Time: now, MaxLifetime: 2 * time.Hour}
	header := func() map[string]any { return map[string]any{"alg": "ES256", "kid": "brand-1", "typ": "at+jwt"} }

	tests := []struct {
		name    string
		token   func() string
		want    func(verifier.Expected) verifier.Expected
		wantErr error
	}{
		{name: "good", token: func() string { return key.SignHeader(header(), good()) }},
		{name: "typ with application/ and in other case", token: func() string {
			h := header()
			h["typ"] = "application/AT+JWT"
			return key.SignHeader(h, good())
		}},
		{name: "aud as an array naming it", token: func() string {
			c := good()
			c["aud"] = []string{"https://other.example", "https://brand.example/a2a/shop"}
			return key.SignHeader(header(), c)
		}},
		{name: "expired within the leeway", token: func() string {
			c := good()
			c["exp"] = now.Unix() - 30
			return key.SignHeader(header(), c)
		}},
		{name: "expired beyond the leeway", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			c["exp"] = now.Unix() - 300
			return key.SignHeader(header(), c)
		}},
		{name: "no exp", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			delete(c, "exp")
			return key.SignHeader(header(), c)
		}},
		{name: "not valid yet", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			c["nbf"] = now.Unix() + 600
			return key.SignHeader(header(), c)
		}},
		{name: "issued in the future", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			c["iat"] = now.Unix() + 600
			return key.SignHeader(header(), c)
		}},
		{name: "lifetime too long", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			c["exp"] = now.Unix() + 3*3600
			return key.SignHeader(header(), c)
		}},
		{name: "exp not a number", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			c["exp"] = "tomorrow"
			return key.SignHeader(header(), c)
		}},
		{name: "another issuer", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			c["iss"] = "https://evil.example"
			return key.SignHeader(header(), c)
		}},
		{name: "another audience", wantErr: verifier.ErrClaims, token: func() string {
			c := good()
			c["aud"] = "https://brand.example/a2a/other"
			return key.SignHeader(header(), c)
		}},
		{name: "another typ", wantErr: verifier.ErrClaims, token: func() string {
			h := header()
			h["typ"] = "JWT"
			return key.SignHeader(h, good())
		}},
		{name: "no kid", wantErr: verifier.ErrUnknownKid, token: func() string {
			h := header()
			delete(h, "kid")
			return key.SignHeader(h, good())
		}},
		{name: "no kid, allowed", want: func(e verifier.Expected) verifier.Expected { e.KidOptional = true; return e }, token: func() string {
			h := header()
			delete(h, "kid")
			return key.SignHeader(h, good())
		}},
		{name: "unknown kid", wantErr: verifier.ErrUnknownKid, token: func() string {
			h := header()
			h["kid"] = "brand-2"
			return key.SignHeader(h, good())
		}},
		{name: "signed by another key", wantErr: verifier.ErrSignature, token: func() string { return other.SignHeader(header(), good()) }},
		{name: "alg none", wantErr: verifier.ErrSignature, token: func() string {
			return pacttest.SignWith(map[string]any{"alg": "none", "kid": "brand-1", "typ": "at+jwt"}, good(), pacttest.Unsigned)
		}},
		{name: "HS256 with the public key as secret", wantErr: verifier.ErrSignature, token: func() string {
			return pacttest.SignWith(map[string]any{"alg": "HS256", "kid": "brand-1", "typ": "at+jwt"}, good(), pacttest.HS256(key.PublicPEM()))
		}},
		{name: "claims not an object", wantErr: verifier.ErrMalformed, token: func() string { return key.SignHeader(header(), []string{"x"}) }},
		{name: "not a compact JWS", wantErr: verifier.ErrMalformed, token: func() string { return "a.b" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := want
			if tc.want != nil {
				w = tc.want(w)
			}
			var c grantClaims
			s, err := verifier.VerifyCompact(tc.token(), keys, &c, w)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if s.Kid != "brand-1" || s.Alg != "ES256" || c.Subject != "acct-1" || c.Scope != "orders:read" {
					t.Fatalf("verified %+v with claims %+v", s, c)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestVerifyCompactSignatureOnly: without claims, only the signature and
// kid are checked, so an expired token's payload comes back (the agent
// client reads receipts this way).
func TestVerifyCompactSignatureOnly(t *testing.T) {
	key := pacttest.MustKey("r1", jose.RS256)
	keys, err := verifier.KeySetOf("https://brand.example/jwks.json", &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := verifier.VerifyCompact(key.Sign(map[string]any{"exp": 1}), keys, nil, verifier.Expected{})
	if err != nil || string(s.Payload) != `{"exp":1}` || s.Alg != "RS256" {
		t.Fatalf("%+v %v", s, err)
	}
}
