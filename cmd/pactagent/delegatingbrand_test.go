package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/client"
)

// delegatingBrand is a Brand's Provider on loopback whose answers a test sets:
// the card, the authorization server's metadata and keys, a token
// endpoint answering a refresh with refreshAnswer, and message:send
// answering with a receipt. Its clock is clock ahead of this machine's:
// tokens and receipts carry times from it. It checks
// no personal-agent JWT: the tests using it are about what the agent does
// with the answers.
type delegatingBrand struct {
	srv    *httptest.Server
	key    jose.JSONWebKey
	iface  string
	issuer string

	mu            sync.Mutex
	refreshAnswer map[string]any
	clock         time.Duration
	refreshed     []string // refresh tokens the token endpoint got
	sent          []string // delegation tokens message:send got
}

const (
	fakeAgentIssuer = "https://pa.example"
	fakeAccount     = "acct-1"
	fakeGrant       = "a2agrant_1"
)

func newDelegatingBrand(t *testing.T) *delegatingBrand {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := &delegatingBrand{key: jose.JSONWebKey{Key: priv, KeyID: "brand-1", Algorithm: "ES256", Use: "sig"}}
	mux := http.NewServeMux()
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	b.iface = b.srv.URL + "/a2a/shop"
	b.issuer = b.iface + "/oauth"
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /a2a/shop/.well-known/agent-card.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"name":                "Shop Support",
			"provider":            map[string]any{"organization": "Shop", "url": b.srv.URL},
			"supportedInterfaces": []any{map[string]any{"url": b.iface, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}},
			"securitySchemes": map[string]any{
				"paJwt": map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer", "bearerFormat": "JWT"}},
				"userDelegation": map[string]any{"oauth2SecurityScheme": map[string]any{
					"flows": map[string]any{"deviceCode": map[string]any{
						"deviceAuthorizationUrl": b.issuer + "/device_authorization", "tokenUrl": b.issuer + "/token",
						"scopes": map[string]string{"orders:read": "Look up your orders"}}},
					"oauth2MetadataUrl": b.issuer + "/.well-known/oauth-authorization-server"}},
			},
		})
	})
	mux.HandleFunc("GET /a2a/shop/oauth/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]string{"issuer": b.issuer, "token_endpoint": b.issuer + "/token",
			"device_authorization_endpoint": b.issuer + "/device_authorization", "jwks_uri": b.issuer + "/jwks.json"})
	})
	mux.HandleFunc("GET /a2a/shop/oauth/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{b.key.Public()}})
	})
	mux.HandleFunc("POST /a2a/shop/oauth/token", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if r.FormValue("grant_type") != "refresh_token" || b.refreshAnswer == nil {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_grant"})
			return
		}
		b.refreshed = append(b.refreshed, r.FormValue("refresh_token"))
		writeJSON(w, b.refreshAnswer)
	})
	mux.HandleFunc("POST /a2a/shop/message:send", func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.sent = append(b.sent, r.Header.Get("X-A2A-User-Delegation"))
		claims := a2a.ReceiptClaims{GrantID: fakeGrant, User: fakeAccount, PA: fakeAgentIssuer, Brand: b.iface, ScopesUsed: []string{"orders:read"},
			Actions: []a2a.ReceiptAction{{Tool: "lookup_orders"}}, TS: time.Now().Add(b.clock).UTC().Format(time.RFC3339)}
		payload, _ := json.Marshal(claims)
		meta, _ := json.Marshal(map[string]any{"pact.receipt": map[string]any{"jws": b.sign(t, claims), "claims": json.RawMessage(payload)}})
		text := "Order A-1 has shipped."
		w.Header().Set("Content-Type", "application/a2a+json")
		_ = json.NewEncoder(w).Encode(map[string]any{"message": a2a.Message{MessageID: "r-1", ContextID: "ctx-1", Role: "ROLE_AGENT",
			Parts: []a2a.Part{{Text: &text}}, Metadata: meta}})
	})
	return b
}

// sign is the compact JWS of claims by the Brand's key.
func (b *delegatingBrand) sign(t *testing.T, claims any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: b.key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := sig.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// token is a delegation token of the grant, issued now by the Brand's
// clock for an hour, with aud as given.
func (b *delegatingBrand) token(t *testing.T, aud any) string {
	now := time.Now().Add(b.clock)
	return b.sign(t, map[string]any{"iss": b.issuer, "aud": aud, "sub": fakeAccount, "client_id": fakeAgentIssuer, "grant_id": fakeGrant,
		"scope": "orders:read", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

func (b *delegatingBrand) card() string { return b.iface + "/.well-known/agent-card.json" }

// agentFor sets up a personal agent for the fake Brand's Provider, with
// user's grant there expiring at expires, and returns its directory.
func (b *delegatingBrand) agentFor(t *testing.T, user string, expires time.Time) string {
	t.Helper()
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"init", "--dir", dir, "--issuer", fakeAgentIssuer, "--audience", "urn:test:shop", "--provider", b.srv.URL}, &out); err != nil {
		t.Fatal(err)
	}
	g := &grantFile{Interface: b.iface, User: user,
		Server: client.AuthServer{Issuer: b.issuer, MetadataURL: b.issuer + "/.well-known/oauth-authorization-server", TokenURL: b.issuer + "/token"},
		Token: client.TokenSet{AccessToken: b.token(t, b.iface), RefreshToken: "rt-1", Scopes: []string{"orders:read"}, Expires: expires,
			GrantID: fakeGrant, User: fakeAccount, Issuer: b.issuer, Audience: b.iface}}
	raw, _ := json.Marshal(map[string]*grantFile{grantKey(b.iface, b.issuer, user): g})
	if err := os.WriteFile(filepath.Join(dir, "grants.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
