// Package pacttest builds PACT fixtures for tests and benchmarks: signing
// keys for brands and personal agents, JWKS servers on loopback, and
// receipts with their request JWTs and delegation tokens.
package pacttest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/verifier"
)

// Key is a signing key with its kid.
type Key struct {
	Kid     string
	Alg     jose.SignatureAlgorithm
	private any
	signer  jose.Signer
}

// NewKey generates an ES256 (P-256) or RS256 (2048-bit) key.
func NewKey(kid string, alg jose.SignatureAlgorithm) (*Key, error) {
	var priv any
	var err error
	switch alg {
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, fmt.Errorf("unsupported alg %s", alg)
	}
	if err != nil {
		return nil, err
	}
	k := &Key{Kid: kid, Alg: alg, private: priv}
	k.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: priv, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	return k, err
}

// MustKey is NewKey that panics on error, for test set-up.
func MustKey(kid string, alg jose.SignatureAlgorithm) *Key {
	k, err := NewKey(kid, alg)
	if err != nil {
		panic(err)
	}
	return k
}

// Public returns the public JWK.
func (k *Key) Public() jose.JSONWebKey {
	j := jose.JSONWebKey{Key: k.private, KeyID: k.Kid, Algorithm: string(k.Alg), Use: "sig"}
	return j.Public()
}

// PublicKey returns the raw public key.
func (k *Key) PublicKey() any { return k.Public().Key }

// Sign signs claims (marshalled to JSON) as a compact JWS with typ JWT.
func (k *Key) Sign(claims any) string { return k.sign(k.signer, claims) }

// SignTyp signs claims as a compact JWS with header typ.
func (k *Key) SignTyp(typ string, claims any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: jose.JSONWebKey{Key: k.private, KeyID: k.Kid}}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		panic(err)
	}
	return k.sign(signer, claims)
}

func (k *Key) sign(signer jose.Signer, claims any) string {
	b, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	jws, err := signer.Sign(b)
	if err != nil {
		panic(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return s
}

// JWKS serves a key set whose keys can be replaced (key rotation).
type JWKS struct {
	Server *httptest.Server
	mu     sync.Mutex
	body   []byte
	delay  time.Duration
	gate   chan struct{} // closed: responses go out (Hold)
	held   chan struct{} // a value for each request held at gate
	hits   int
}

// Requests returns how many requests the server has received.
func (j *JWKS) Requests() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.hits
}

// NewJWKS starts a loopback JWKS server with keys.
func NewJWKS(keys ...*Key) *JWKS {
	j := &JWKS{}
	j.Set(keys...)
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.mu.Lock()
		b, d, gate, held := j.body, j.delay, j.gate, j.held
		j.hits++
		j.mu.Unlock()
		if gate != nil {
			select {
			case held <- struct{}{}:
			default:
			}
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	return j
}

// Set replaces the published keys.
func (j *JWKS) Set(keys ...*Key) {
	var set jose.JSONWebKeySet
	for _, k := range keys {
		set.Keys = append(set.Keys, k.Public())
	}
	b, err := json.Marshal(set)
	if err != nil {
		panic(err)
	}
	j.mu.Lock()
	j.body = b
	j.mu.Unlock()
}

// SetDelay makes every response wait d first (a slow signer).
func (j *JWKS) SetDelay(d time.Duration) {
	j.mu.Lock()
	j.delay = d
	j.mu.Unlock()
}

// Hold makes every response wait until release is called (a signer that
// hangs until the test says so); each response then carries the body
// published at the time of its request. arrived receives a value when a
// request is held (those that find it full are held without one).
func (j *JWKS) Hold() (arrived <-chan struct{}, release func()) {
	gate, held := make(chan struct{}), make(chan struct{}, 16)
	j.mu.Lock()
	j.gate, j.held = gate, held
	j.mu.Unlock()
	var once sync.Once
	return held, func() {
		once.Do(func() {
			j.mu.Lock()
			if j.gate == gate {
				j.gate, j.held = nil, nil
			}
			j.mu.Unlock()
			close(gate)
		})
	}
}

// SetRaw publishes body as is.
func (j *JWKS) SetRaw(body []byte) {
	j.mu.Lock()
	j.body = body
	j.mu.Unlock()
}

// Body returns the JWKS bytes currently published.
func (j *JWKS) Body() []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.body
}

// Static is a verifier.KeySource serving the scenario's current keys from
// memory, for tests that must not touch the network.
func (s *Scenario) Static(fetched time.Time) verifier.KeySource {
	return staticKeys{s: s, at: fetched}
}

type staticKeys struct {
	s  *Scenario
	at time.Time
}

func (k staticKeys) keys(p Party) (verifier.Signer, error) {
	ks, err := verifier.ParseKeySet(verifier.NewSnapshot(p.JWKS.URL(), k.at, p.JWKS.Body()))
	return verifier.Signer{Keys: ks}, err
}

func (k staticKeys) Brand(_ context.Context, url string, _ bool) (verifier.Signer, error) {
	if url != k.s.Brand.ID {
		return verifier.Signer{}, fmt.Errorf("%w: brand %s", verifier.ErrUntrusted, url)
	}
	return k.keys(k.s.Brand)
}

func (k staticKeys) Agent(_ context.Context, iss string, _ bool) (verifier.Signer, error) {
	if iss != k.s.PA.ID {
		return verifier.Signer{}, fmt.Errorf("%w: agent %s", verifier.ErrUntrusted, iss)
	}
	return k.keys(k.s.PA)
}

// URL is the JWKS URL.
func (j *JWKS) URL() string { return j.Server.URL + "/jwks.json" }

// Close stops the server.
func (j *JWKS) Close() { j.Server.Close() }

// Party is one side of a scenario: a brand or a personal agent.
type Party struct {
	ID   string // interface URL (brand) or issuer (PA)
	Key  *Key
	JWKS *JWKS
}

// Scenario is a brand and a personal agent that can mint consistent
// receipts, request JWTs and delegation tokens.
type Scenario struct {
	Brand    Party
	PA       Party
	Audience string
	// AuthServer is the delegation token iss.
	AuthServer string
}

// NewScenario starts JWKS servers for a brand and a PA signing with alg.
func NewScenario(brandAlg, paAlg jose.SignatureAlgorithm) *Scenario {
	bk := MustKey("brand-k3", brandAlg)
	pk := MustKey("pa-2026-09", paAlg)
	s := &Scenario{
		Brand:      Party{Key: bk, JWKS: NewJWKS(bk)},
		PA:         Party{Key: pk, JWKS: NewJWKS(pk)},
		Audience:   "urn:pactledger:test-provider",
		AuthServer: "https://provider.example.com/a2a/acme",
	}
	s.Brand.ID = s.Brand.JWKS.Server.URL + "/a2a/acme"
	s.PA.ID = s.PA.JWKS.Server.URL
	return s
}

// Close stops both JWKS servers.
func (s *Scenario) Close() {
	s.Brand.JWKS.Close()
	s.PA.JWKS.Close()
}

// Receipt is one receipt with everything a pipeline posts.
type Receipt struct {
	Claims          map[string]any
	RequestClaims   map[string]any
	TokenClaims     map[string]any
	ReceiptJWS      string
	RequestJWT      string
	DelegationToken string
	Actions         []verifier.Action
}

// Spec describes a receipt to mint. Zero fields take the defaults of the
// playbook's worked scenario.
type Spec struct {
	User       string
	GrantID    string
	Target     string
	Tool       string
	ArgsJSON   string
	Granted    string   // space-separated scopes in the token
	ScopesUsed []string // receipt scopesUsed
	At         time.Time
	Sub        string // PA JWT sub
	Jti        string // PA JWT jti; random when empty
}

// Mint signs a receipt, request JWT and delegation token per spec. Callers
// may edit the claims and re-sign with Resign.
func (s *Scenario) Mint(sp Spec) *Receipt {
	if sp.User == "" {
		sp.User = "acct-48213"
	}
	if sp.GrantID == "" {
		sp.GrantID = "a2agrant_7Q2F"
	}
	if sp.Tool == "" {
		sp.Tool = "cancel_order"
	}
	if sp.Target == "" {
		sp.Target = "A-5531"
	}
	if sp.ArgsJSON == "" {
		sp.ArgsJSON = fmt.Sprintf(`{"order":%q}`, sp.Target)
	}
	if sp.Granted == "" {
		sp.Granted = "orders:read orders:cancel"
	}
	if sp.ScopesUsed == nil {
		sp.ScopesUsed = []string{"orders:cancel"}
	}
	if sp.At.IsZero() {
		sp.At = time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	}
	if sp.Sub == "" {
		sp.Sub = "pa-user-1"
	}
	r := &Receipt{
		Claims: map[string]any{
			"grantId":    sp.GrantID,
			"user":       sp.User,
			"pa":         s.PA.ID,
			"brand":      s.Brand.ID,
			"scopesUsed": sp.ScopesUsed,
			"actions":    []map[string]any{{"tool": sp.Tool, "argsHash": verifier.ArgsHash(sp.ArgsJSON)}},
			"ts":         sp.At.Format(time.RFC3339),
		},
		RequestClaims: map[string]any{
			"iss": s.PA.ID,
			"sub": sp.Sub,
			"aud": s.Audience,
			"iat": sp.At.Add(-10 * time.Second).Unix(),
			"exp": sp.At.Add(110 * time.Second).Unix(),
		},
		TokenClaims: map[string]any{
			"iss":       s.AuthServer,
			"aud":       s.Brand.ID,
			"sub":       sp.User,
			"client_id": s.PA.ID,
			"scope":     sp.Granted,
			"grant_id":  sp.GrantID,
			"iat":       sp.At.Add(-5 * time.Minute).Unix(),
			"exp":       sp.At.Add(55 * time.Minute).Unix(),
		},
		Actions: []verifier.Action{{Tool: sp.Tool, Target: sp.Target, ArgsJSON: sp.ArgsJSON}},
	}
	if sp.Jti == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		sp.Jti = fmt.Sprintf("%x", b)
	}
	r.RequestClaims["jti"] = sp.Jti
	s.Resign(r)
	return r
}

// Resign signs the receipt's claims again with the scenario's keys.
func (s *Scenario) Resign(r *Receipt) {
	r.ReceiptJWS = s.Brand.Key.Sign(r.Claims)
	r.RequestJWT = s.PA.Key.Sign(r.RequestClaims)
	r.DelegationToken = s.Brand.Key.Sign(r.TokenClaims)
}

// Brands and Agents return the verifier registry entries for the scenario.
func (s *Scenario) Brands() []verifier.Brand {
	return []verifier.Brand{{InterfaceURL: s.Brand.ID, JWKSURI: s.Brand.JWKS.URL(), Issuer: s.AuthServer}}
}

// Agents returns the PA registry entry.
func (s *Scenario) Agents() []verifier.Agent {
	return []verifier.Agent{{Issuer: s.PA.ID, JWKSURI: s.PA.JWKS.URL(), Enabled: true}}
}

// GrantOf is the grant_id of a delegation token (its claims read without
// checking its signature).
func GrantOf(t testing.TB, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		GrantID string `json:"grant_id"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.GrantID == "" {
		t.Fatalf("token claims %s: %v", payload, err)
	}
	return c.GrantID
}
