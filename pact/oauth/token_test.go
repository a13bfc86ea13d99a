package oauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/verifier"
)

func signingKey(t *testing.T, kid string) jose.JSONWebKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
}

func sign(t *testing.T, k jose.JSONWebKey, typ string, claims any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

// A delegation token passes only as PACT §5.5 says: the Provider's key by
// its kid, typ at+jwt, the brand's issuer and interface, unexpired within
// 30 s, the personal agent as client, and a grant.
func TestVerifyDelegation(t *testing.T) {
	const iss, aud, client = "https://p.example/a2a/acme/oauth", "https://p.example/a2a/acme", "https://pa.example"
	key, other := signingKey(t, "provider-1"), signingKey(t, "provider-1")
	keys, err := verifier.KeySetOf("provider-signing-key.json", &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	g := &Grant{ID: "a2agrant_1", Client: client, User: "acct-1"}
	good := NewDelegationClaims(g, iss, aud, "orders:read", "j1", t0)
	edit := func(f func(c *DelegationClaims)) DelegationClaims {
		c := NewDelegationClaims(g, iss, aud, "orders:read", "j1", t0)
		f(&c)
		return c
	}
	tests := []struct {
		name   string
		key    jose.JSONWebKey
		typ    string
		claims DelegationClaims
		now    time.Time
		want   string // in the error; "" for a pass
	}{
		{"good", key, "at+jwt", good, t0, ""},
		{"typ with application/", key, "application/at+jwt", good, t0, ""},
		{"within the skew", key, "at+jwt", good, t0.Add(AccessTokenTTL + 20*time.Second), ""},
		{"expired", key, "at+jwt", good, t0.Add(AccessTokenTTL + time.Minute), "expired"},
		{"a receipt's typ", key, "JWT", good, t0, "typ"},
		{"another key with the same kid", other, "at+jwt", good, t0, "signature"},
		{"an unknown kid", signingKey(t, "provider-2"), "at+jwt", good, t0, "kid"},
		{"another brand's issuer", key, "at+jwt", edit(func(c *DelegationClaims) { c.Issuer = "https://p.example/a2a/sky/oauth" }), t0, "issuer"},
		{"another interface", key, "at+jwt", edit(func(c *DelegationClaims) { c.Audience = []string{"https://p.example/a2a/sky"} }), t0, "audience"},
		{"another client", key, "at+jwt", edit(func(c *DelegationClaims) { c.ClientID = "https://other.example" }), t0, "client_id"},
		{"no exp", key, "at+jwt", edit(func(c *DelegationClaims) { c.Expiry = nil }), t0, "exp"},
		{"no grant", key, "at+jwt", edit(func(c *DelegationClaims) { c.GrantID = "" }), t0, "grant_id"},
		{"issued in the future", key, "at+jwt", good, t0.Add(-time.Minute), "future"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := VerifyDelegation(sign(t, tc.key, tc.typ, tc.claims), keys, iss, aud, client, tc.now)
			if tc.want == "" {
				if err != nil || c.GrantID != g.ID || c.Subject != g.User || c.Scope != "orders:read" {
					t.Fatalf("%+v %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
	// The compact form is bounded before it is parsed.
	if _, err := VerifyDelegation(strings.Repeat("a", verifier.MaxTokenBytes+1), keys, iss, aud, client, t0); !errors.Is(err, verifier.ErrMalformed) {
		t.Fatalf("an oversized token: %v", err)
	}
}

// A delegation token ends with its grant when the grant ends within the
// token's hour.
func TestDelegationTokenEndsWithItsGrant(t *testing.T) {
	g := &Grant{ID: "a2agrant_1", Client: "https://pa.example", User: "acct-1", Expires: t0.Add(10 * time.Minute)}
	if c := NewDelegationClaims(g, "i", "a", "orders:read", "j1", t0); !c.Expiry.Time().Equal(g.Expires) {
		t.Errorf("token of a grant ending in 10 min ends at %v, want %v", c.Expiry.Time(), g.Expires)
	}
	g.Expires = t0.Add(GrantTTL)
	if c := NewDelegationClaims(g, "i", "a", "orders:read", "j1", t0); !c.Expiry.Time().Equal(t0.Add(AccessTokenTTL)) {
		t.Errorf("token of a long grant ends at %v, want an hour after issue", c.Expiry.Time())
	}
}
