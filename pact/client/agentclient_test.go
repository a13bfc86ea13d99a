package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/pact/a2a"
)

// authServer is a Brand's authorization server on loopback: its RFC 8414
// metadata at issuer + wellKnown, its keys, and a token endpoint that
// answers with token (or pending while pending > 0).
type authServer struct {
	srv     *httptest.Server
	issuer  string
	key     jose.JSONWebKey
	md      map[string]string // metadata members served
	token   string
	pending atomic.Int32
	hits    atomic.Int32 // requests to the token and device endpoints
}

func newAuthServer(t *testing.T) *authServer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a := &authServer{key: jose.JSONWebKey{Key: priv, KeyID: "brand-1", Algorithm: "ES256", Use: "sig"}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/a2a/shop/oauth" + wellKnown:
			_ = json.NewEncoder(w).Encode(a.md)
		case "/a2a/shop/oauth/jwks.json":
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{a.key.Public()}})
		case "/a2a/shop/oauth/token", "/a2a/shop/oauth/device_authorization":
			a.hits.Add(1)
			if a.pending.Add(-1) >= 0 {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"authorization_pending"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": a.token, "refresh_token": "rt", "expires_in": 3600, "scope": "orders:read"})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(a.srv.Close)
	a.issuer = a.srv.URL + "/a2a/shop/oauth"
	a.md = map[string]string{"issuer": a.issuer, "token_endpoint": a.issuer + "/token",
		"device_authorization_endpoint": a.issuer + "/device_authorization", "jwks_uri": a.issuer + "/jwks.json"}
	return a
}

// flow is the device flow a card of this server names.
func (a *authServer) flow() *DeviceFlow {
	return &DeviceFlow{DeviceAuthorizationURL: a.issuer + "/device_authorization", TokenURL: a.issuer + "/token",
		MetadataURL: a.issuer + wellKnown, Scopes: map[string]string{"orders:read": "Look up your orders"}}
}

func (a *authServer) iface() string { return a.srv.URL + "/a2a/shop" }

// sign is the compact JWS of claims by key.
func sign(t *testing.T, key jose.JSONWebKey, claims any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := sig.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := obj.CompactSerialize()
	return s
}

// otherHost is a server at another origin that counts what reaches it.
func otherHost(t *testing.T, hits *atomic.Int32) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"message":{"messageId":"r","contextId":"c","role":"ROLE_AGENT","parts":[{"text":"ok"}]},"access_token":"x"}`))
	}))
	t.Cleanup(s.Close)
	return s
}

// A card's device flow is used only when it is its interface's Provider's:
// its URLs at the Provider's origins, its metadata's issuer the one the
// metadata URL was formed from (RFC 8414 §3.3), the card's endpoints the
// metadata's. A card copying a Brand's but naming its own token endpoint
// gets nothing sent there.
func TestCheckFlowTakesOnlyTheProvidersAuthorizationServer(t *testing.T) {
	a := newAuthServer(t)
	var otherHits atomic.Int32
	other := otherHost(t, &otherHits)
	for _, tc := range []struct {
		name string
		edit func(f *DeviceFlow)
		md   map[string]string
		want string // in the error; "" for none
	}{
		{name: "the Brand's own"},
		{name: "token endpoint on another host", edit: func(f *DeviceFlow) { f.TokenURL = other.URL + "/token" }, want: "is not at the Provider"},
		{name: "device endpoint on another host", edit: func(f *DeviceFlow) { f.DeviceAuthorizationURL = other.URL + "/da" }, want: "is not at the Provider"},
		{name: "metadata on another host", edit: func(f *DeviceFlow) { f.MetadataURL = other.URL + wellKnown }, want: "is not at the Provider"},
		{name: "no metadata", edit: func(f *DeviceFlow) { f.MetadataURL = "" }, want: "no oauth2MetadataUrl"},
		{name: "token endpoint not the metadata's", edit: func(f *DeviceFlow) { f.TokenURL = a.issuer + "/other-token" }, want: "not the endpoints"},
		{name: "metadata naming another issuer", md: map[string]string{"issuer": "https://somebody-else.example"}, want: "RFC 8414 §3.3"},
		{name: "metadata naming no issuer", md: map[string]string{"issuer": ""}, want: "RFC 8414 §3.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := a.md
			defer func() { a.md = saved }()
			if tc.md != nil {
				a.md = map[string]string{}
				for k, v := range saved {
					a.md[k] = v
				}
				for k, v := range tc.md {
					a.md[k] = v
				}
			}
			f := a.flow()
			if tc.edit != nil {
				tc.edit(f)
			}
			c := newClient(&sleeper{}, a.srv.URL)
			got, err := c.CheckFlow(context.Background(), f)
			if tc.want == "" {
				want := AuthServer{Issuer: a.issuer, MetadataURL: a.issuer + wellKnown, TokenURL: a.issuer + "/token"}
				if err != nil || *got != want {
					t.Fatalf("got %+v, %v; want %+v", got, err, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %+v, %v; want an error saying %q", got, err, tc.want)
			}
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

// RFC 8414 §3.1 puts the well-known path before the issuer's path; PACT
// §5.1 shows it after. Either is the issuer's metadata URL; no other is.
func TestMetadataURLs(t *testing.T) {
	got := metadataURLs("https://p.example/a2a/shop/oauth")
	want := []string{"https://p.example/a2a/shop/oauth" + wellKnown, "https://p.example" + wellKnown + "/a2a/shop/oauth"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("metadataURLs = %q, want %q", got, want)
	}
	if got := metadataURLs("https://p.example"); len(got) != 1 || got[0] != "https://p.example"+wellKnown {
		t.Errorf("metadataURLs of a host = %q", got)
	}
}

// A request carrying the personal-agent JWT goes only to the Provider's
// origins, whose audience the JWT names: message:send, device
// authorization, token and refresh alike.
func TestSignedRequestsGoOnlyToTheProvider(t *testing.T) {
	var hits atomic.Int32
	other := otherHost(t, &hits)
	a := newAuthServer(t)
	ctx := context.Background()
	for _, providers := range [][]string{{a.srv.URL}, {a.srv.URL, "https://p.example"}} {
		c := newClient(&sleeper{}, providers...)
		f := &DeviceFlow{DeviceAuthorizationURL: other.URL + "/da", TokenURL: other.URL + "/token", Scopes: map[string]string{"s": "S"}}
		calls := map[string]func() error{
			"send":      func() error { _, err := c.Send(ctx, other.URL+"/a2a/x", "u", "", "", "hi"); return err },
			"delegated": func() error { _, err := c.SendDelegated(ctx, other.URL+"/a2a/x", "u", "", "", "hi", "tok"); return err },
			"authorize": func() error { _, err := c.StartAuthorization(ctx, f, "u", []string{"s"}); return err },
			"token": func() error {
				_, err := c.WaitForToken(ctx, f, "u", &DeviceStart{DeviceCode: "d", Interval: 1, ExpiresIn: 60}, nil)
				return err
			},
			"refresh": func() error {
				_, err := c.Refresh(ctx, &AuthServer{TokenURL: other.URL + "/token"}, "u", "rt")
				return err
			},
		}
		for name, call := range calls {
			var oe *OriginError
			if err := call(); !errors.As(err, &oe) {
				t.Errorf("%s with Providers %q: %v, want an OriginError", name, providers, err)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

func TestOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://P.example/a/b?c": "https://p.example",
		"https://p.example:443/":  "https://p.example",
		"http://127.0.0.1:8090":   "http://127.0.0.1:8090",
		"http://[::1]:80/x":       "http://[::1]",
		"http://[::1]:8090":       "http://[::1]:8090",
		"ftp://p.example":         "",
		"p.example":               "",
		"https://u:p@p.example":   "",
	} {
		got, err := Origin(in)
		if want == "" && err == nil || want != "" && got != want {
			t.Errorf("Origin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A receipt is the grant's: signed with the same keys as its delegation
// token (PACT §5.6), those of the server that issued it, whose metadata
// names it; the token's grant and user; scopes the token grants; a time
// within the token's life. A time far from this machine's clock is noted,
// not refused: the action happened at the Brand, and the receipt is the
// user's evidence of it.
func TestVerifyReceiptBindsTheReceiptToTheGrant(t *testing.T) {
	a := newAuthServer(t)
	iface := a.iface()
	now := time.Now().Truncate(time.Second)
	tokClaims := map[string]any{"iss": a.issuer, "aud": iface, "sub": "acct-1", "grant_id": "a2agrant_1", "scope": "orders:read orders:cancel",
		"iat": now.Add(-10 * time.Minute).Unix(), "exp": now.Add(50 * time.Minute).Unix(), "client_id": "https://pa.example"}
	otherPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKey := jose.JSONWebKey{Key: otherPriv, KeyID: "brand-1", Algorithm: "ES256", Use: "sig"}
	good := a2a.ReceiptClaims{GrantID: "a2agrant_1", User: "acct-1", PA: "https://pa.example", Brand: iface, ScopesUsed: []string{"orders:cancel"},
		Actions: []a2a.ReceiptAction{{Tool: "cancel_order"}}, TS: now.Format(time.RFC3339)}
	for _, tc := range []struct {
		name     string
		receipt  func(r *a2a.ReceiptClaims)
		token    func(c map[string]any)
		tokenKey *jose.JSONWebKey
		server   func(s *AuthServer)
		md       map[string]string
		want     string
		warn     string // in the receipt's ClockWarning when it verifies
	}{
		{name: "the grant's"},
		{name: "another grant", receipt: func(r *a2a.ReceiptClaims) { r.GrantID = "a2agrant_SOMEONE_ELSES" }, want: "not the token's"},
		{name: "another user", receipt: func(r *a2a.ReceiptClaims) { r.User = "another-user" }, want: "not the token's"},
		{name: "a scope not granted", receipt: func(r *a2a.ReceiptClaims) { r.ScopesUsed = []string{"refunds:issue"} }, want: "does not grant"},
		{name: "before the token", receipt: func(r *a2a.ReceiptClaims) { r.TS = now.Add(-20 * time.Minute).Format(time.RFC3339) }, want: "issued in the future"},
		{name: "after the token", token: func(c map[string]any) {
			c["iat"], c["exp"] = now.Add(-65*time.Minute).Unix(), now.Add(-5*time.Minute).Unix()
		},
			receipt: func(r *a2a.ReceiptClaims) { r.TS = now.Add(-time.Minute).Format(time.RFC3339) }, want: "expired"},
		{name: "old, within the token's life", token: func(c map[string]any) { c["iat"] = now.Add(-2 * time.Hour).Unix() },
			receipt: func(r *a2a.ReceiptClaims) { r.TS = now.Add(-time.Hour).Format(time.RFC3339) }, warn: "1h0m0s behind this machine's clock"},
		{name: "this clock 40 s slow", receipt: func(r *a2a.ReceiptClaims) { r.TS = now.Add(40 * time.Second).Format(time.RFC3339) }, warn: "40s ahead of this machine's clock"},
		{name: "this clock 10 min fast", receipt: func(r *a2a.ReceiptClaims) { r.TS = now.Add(-10 * time.Minute).Format(time.RFC3339) }, warn: "10m0s behind"},
		{name: "within the skew", receipt: func(r *a2a.ReceiptClaims) { r.TS = now.Add(25 * time.Second).Format(time.RFC3339) }},
		{name: "a time to come, after the token", receipt: func(r *a2a.ReceiptClaims) { r.TS = now.Add(51 * time.Minute).Format(time.RFC3339) }, want: "expired"},
		{name: "no time", receipt: func(r *a2a.ReceiptClaims) { r.TS = "" }, want: "not an RFC 3339 time"},
		{name: "a token of another key", tokenKey: &otherKey, want: "the delegation token"},
		{name: "a token of another issuer", token: func(c map[string]any) { c["iss"] = "https://somebody-else.example" }, want: "issuer"},
		{name: "a token for another interface", token: func(c map[string]any) { c["aud"] = iface + "x" }, want: "audience"},
		{name: "a grant naming no server", server: func(s *AuthServer) { s.Issuer = "" }, want: "checked against its grant"},
		{name: "a server the metadata does not name", server: func(s *AuthServer) { s.Issuer = "https://somebody-else.example" }, want: "which issued the grant"},
		{name: "metadata naming another issuer", md: map[string]string{"issuer": "https://somebody-else.example"}, want: "RFC 8414 §3.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := a.md
			defer func() { a.md = saved }()
			if tc.md != nil {
				a.md = map[string]string{"jwks_uri": saved["jwks_uri"]}
				for k, v := range tc.md {
					a.md[k] = v
				}
			}
			claims, tc2 := good, map[string]any{}
			for k, v := range tokClaims {
				tc2[k] = v
			}
			if tc.receipt != nil {
				tc.receipt(&claims)
			}
			if tc.token != nil {
				tc.token(tc2)
			}
			tk := a.key
			if tc.tokenKey != nil {
				tk = *tc.tokenKey
			}
			ts := &TokenSet{AccessToken: sign(t, tk, tc2)}
			jws := sign(t, a.key, claims)
			payload, _ := json.Marshal(claims)
			meta, _ := json.Marshal(map[string]any{"pact.receipt": map[string]any{"jws": jws, "claims": json.RawMessage(payload)}})
			srv := AuthServer{Issuer: a.issuer, MetadataURL: a.issuer + wellKnown, TokenURL: a.issuer + "/token"}
			if tc.server != nil {
				tc.server(&srv)
			}
			c := newClient(&sleeper{}, a.srv.URL)
			c.Now = func() time.Time { return now }
			r, err := c.VerifyGrantReceipt(context.Background(), &srv, iface, ts, &a2a.Message{Metadata: meta})
			if tc.want == "" {
				if err != nil || r.Claims.GrantID != "a2agrant_1" {
					t.Fatalf("got %+v, %v", r, err)
				}
				if tc.warn == "" && r.ClockWarning != "" || !strings.Contains(r.ClockWarning, tc.warn) {
					t.Fatalf("clock warning %q, want one saying %q", r.ClockWarning, tc.warn)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an error saying %q", err, tc.want)
			}
		})
	}
}

// A Client that names no Provider sends nothing signed: it cannot tell
// where its JWTs' audience holds. Its card and key fetches, which carry
// no token, still go.
func TestAClientWithoutProvidersSendsNothingSigned(t *testing.T) {
	a := newAuthServer(t)
	ctx := context.Background()
	c := newClient(&sleeper{})
	f := a.flow()
	calls := map[string]func() error{
		"send":      func() error { _, err := c.Send(ctx, a.iface(), "u", "", "", "hi"); return err },
		"delegated": func() error { _, err := c.SendDelegated(ctx, a.iface(), "u", "", "", "hi", "tok"); return err },
		"authorize": func() error { _, err := c.StartAuthorization(ctx, f, "u", []string{"orders:read"}); return err },
		"token": func() error {
			_, err := c.WaitForToken(ctx, f, "u", &DeviceStart{DeviceCode: "d", Interval: 1, ExpiresIn: 60}, nil)
			return err
		},
		"refresh": func() error {
			_, err := c.Refresh(ctx, &AuthServer{Issuer: a.issuer, TokenURL: a.issuer + "/token"}, "u", "rt")
			return err
		},
		"check flow": func() error { _, err := c.CheckFlow(ctx, f); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrNoProviders) {
			t.Errorf("%s: %v, want ErrNoProviders", name, err)
		}
	}
	if n := a.hits.Load(); n != 0 {
		t.Errorf("the Brand's token and device endpoints got %d requests", n)
	}
}
