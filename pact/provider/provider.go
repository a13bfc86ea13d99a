// Package provider is the PACT 1.0 Provider's HTTP side, Identity and
// Delegated profiles (spec §2–§6): it routes and serves each Brand's Agent
// Card, authenticates every request with the personal agent's signed JWT
// and, when sent, the delegation token, runs the Brand's agent over the
// HTTP+JSON binding of A2A 1.0 with contexts and idempotent retries, signs
// receipts, and serves the OAuth endpoints of the device flow. What a turn
// keeps goes to the store in one operation; the login and consent pages
// are package brandlogin's.
package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pactledger/pactledger/internal/logbound"
	"github.com/pactledger/pactledger/pact/agent"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Config configures a Server.
type Config struct {
	// BaseURL is the public URL the Provider is reached at, such as
	// https://provider.example.com; interface URLs are BaseURL/a2a/{brandId}
	// (InterfaceURL).
	BaseURL string
	// Verifier checks personal-agent JWTs against Keys (the shared
	// personal-agent registry and audience).
	Verifier *verifier.Verifier
	Keys     verifier.KeySource
	// Brands by id.
	Brands map[string]*brand.Brand
	// Agent answers messages; default agent.Scripted.
	Agent agent.Agent
	// Store is the Provider's store.
	Store *store.Store
	// Pages are the login and consent pages, which share BaseURL.
	Pages *brandlogin.Pages
	// SigningKeyPath is the ES256 key that signs delegation tokens and
	// receipts, with the retired keys still published; created on first
	// use, unless Store holds grants or outbox entries (ErrNoSigningKey);
	// refused when it lacks a key that signed Store's entries for the
	// ledger (ErrKeyFileMismatch).
	SigningKeyPath string
	// RetiredKeyTTL is how long a retired signing key stays published
	// after its rotation (RotateSigningKey); default DefaultRetiredKeyTTL.
	RetiredKeyTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies; default 64 KiB.
	MaxBodyBytes int64
	// PerAgent limits each personal agent; PerUser each (agent, sub).
	// Over the limit: 429 with Retry-After (PACT §6). Zero: no limit.
	PerAgent, PerUser Limit
	// RefusalLimit limits, per brand, the identity refusals queued for
	// the ledger: the refusals of account actions asked under PACT §3
	// alone, which record no action and no grant. Past it the personal
	// agent is answered as ever (in chat, or with a step-up) and the
	// refusal is not queued but counted (RefusalsNotRecorded) and logged
	// at warn level, at most once a minute per brand. Zero: no limit.
	RefusalLimit Limit
	// PollInterval is the least time between token polls of a device
	// authorization (RFC 8628 §3.5); default 5 s, at least 1 s.
	PollInterval time.Duration
	// Domains maps a brand's own host name to its id: the Provider then
	// serves that brand's card at https://{domain}/.well-known/agent-card.json
	// (PACT §2.1) when it receives that host's requests.
	Domains map[string]string
	// Revocations, when set, are the ledger's recorded revocations: a grant
	// the ledger records revoked (ledgerctl revoke) is revoked at the
	// Provider at its next use (a request under its token, a turn kept, a
	// token request, or a new grant of its agent that would carry its
	// scopes), as if the User had revoked it on the account page.
	Revocations oauth.Revocations
}

// Server serves the A2A operations of every Brand.
type Server struct {
	cfg   Config
	key   *keyRing
	locks turnLocks

	perAgent, perUser *limiter
	refusals          *refusalCap
	// rejected bounds the log lines of rejected personal-agent JWTs and
	// delegation tokens: anyone can send one.
	rejected *logbound.Limiter
}

// InterfaceURL is a brand's A2A interface URL at the Provider's baseURL.
func InterfaceURL(baseURL, brandID string) string {
	return strings.TrimRight(baseURL, "/") + "/a2a/" + brandID
}

// Issuer is a delegating brand's authorization server issuer at the
// Provider's baseURL: its OAuth endpoints are under it.
func Issuer(baseURL, brandID string) string { return InterfaceURL(baseURL, brandID) + "/oauth" }

// Rejected personal-agent JWTs and delegation tokens are logged at most
// rejectedBurst at once and rejectedRate a second after that, each
// reason cut to maxLoggedReason bytes (it quotes the token's claims).
const (
	rejectedBurst   = 10
	rejectedRate    = 1.0
	maxLoggedReason = 300
)

// New loads (or creates) the signing key and returns the Server.
func New(cfg Config) (*Server, error) {
	if cfg.Verifier == nil || cfg.Keys == nil || len(cfg.Brands) == 0 || cfg.Store == nil || cfg.Pages == nil || cfg.BaseURL == "" || cfg.SigningKeyPath == "" {
		return nil, errors.New("provider: verifier, keys, brands, store, pages, signing key path and base URL are required")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Agent == nil {
		cfg.Agent = agent.Scripted{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PollInterval < time.Second {
		cfg.PollInterval = oauth.PollInterval
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	domains, err := hostNames(cfg.Domains, cfg.Brands)
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	cfg.Domains = domains
	key, err := openKeyRing(cfg.SigningKeyPath, cfg.RetiredKeyTTL, cfg.Now(), cfg.Store, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, key: key, locks: turnLocks{held: map[string]*convLock{}},
		perAgent: newLimiter(cfg.PerAgent), perUser: newLimiter(cfg.PerUser), refusals: newRefusalCap(cfg.Brands, cfg.RefusalLimit, cfg.Logger),
		rejected: logbound.New(rejectedBurst, rejectedRate)}, nil
}

// RefusalsNotRecorded counts, by brand id, the identity refusals answered
// but not queued for the ledger since New (Config.RefusalLimit), and the
// denied consents honoured but not queued (DenialNotRecorded). Every
// configured brand is listed.
func (s *Server) RefusalsNotRecorded() map[string]NotRecorded { return s.refusals.counts() }

// DenialNotRecorded counts a User's denial of consent at brand that was
// honoured but whose refusal was not queued for the ledger, for want of
// room in the denied consents' share of the outbox
// (brandlogin.Config.DenialNotRecorded), and warns as for identity
// refusals, at most once a minute per brand.
func (s *Server) DenialNotRecorded(ctx context.Context, brand string) {
	s.refusals.dropped(ctx, brand, denialOverRoom, s.cfg.Now().UTC())
}

// InterfaceURL is a brand's A2A interface URL.
func (s *Server) InterfaceURL(brandID string) string { return InterfaceURL(s.cfg.BaseURL, brandID) }

// issuer is a delegating brand's authorization server issuer.
func (s *Server) issuer(b *brand.Brand) string { return Issuer(s.cfg.BaseURL, b.ID) }

// String describes the provider for logs.
func (s *Server) String() string {
	ids := make([]string, 0, len(s.cfg.Brands))
	for _, b := range s.cfg.Brands {
		ids = append(ids, b.ID)
	}
	slices.Sort(ids)
	return fmt.Sprintf("PACT provider at %s with %d brands (%s)", s.cfg.BaseURL, len(ids), strings.Join(ids, ", "))
}

// Retention returns the retention classes its brands' tools name, and for
// each scope the longest class of the tools needing it, merged across
// brands (brand.Retention), for the ledger's retention tables.
func (s *Server) Retention() (tools, scopes map[string]retention.Class) {
	return brand.Retention(s.cfg.Brands)
}

// BrandSigners returns, for each delegating brand, its interface URL and
// the keys and issuer its delegation tokens and receipts carry (the keys
// its JWKS publishes now: the current key and the retired ones still in
// their period), so a ledger in the same process can verify them without
// fetching its own JWKS. Ask again for each check: what is published
// changes as retirements end.
func (s *Server) BrandSigners() map[string]verifier.Signer {
	pub := s.key.published(s.cfg.Now())
	pub.signersOnce.Do(func() {
		pub.signers = map[string]verifier.Signer{}
		for _, b := range s.cfg.Brands {
			if !b.Delegation {
				continue
			}
			ks, err := verifier.ParseKeySet(verifier.NewSnapshot(s.issuer(b)+"/jwks.json", pub.from, pub.jwks))
			if err != nil {
				continue
			}
			pub.signers[s.InterfaceURL(b.ID)] = verifier.Signer{Keys: ks, Issuer: s.issuer(b)}
		}
	})
	return pub.signers
}

// signed says what the store holds that a signing key signed: grants
// (their delegation tokens, the receipts of their turns) and entries for
// the ledger, waiting or set aside; "" for nothing.
func signed(st *store.Store) (string, error) {
	n, err := st.Stats()
	if err != nil {
		return "", err
	}
	if n.Grants == 0 && n.Outbox == 0 && n.SetAside == 0 {
		return "", nil
	}
	return fmt.Sprintf("grants %d, entries waiting for the ledger %d, set aside %d", n.Grants, n.Outbox, n.SetAside), nil
}

// turnLocks serializes the turns of each context.
type turnLocks struct {
	mu   sync.Mutex
	held map[string]*convLock // only contexts with a turn in progress
}

// convLock serializes the turns of one context. holders counts the turns
// that hold it or wait for it; the last to leave removes it from the map,
// so the map holds only contexts with a turn in progress.
type convLock struct {
	mu      sync.Mutex
	holders int
}

// lock takes the lock of context id and returns its release.
func (t *turnLocks) lock(id string) func() {
	t.mu.Lock()
	l := t.held[id]
	if l == nil {
		l = &convLock{}
		t.held[id] = l
	}
	l.holders++
	t.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		t.mu.Lock()
		if l.holders--; l.holders == 0 {
			delete(t.held, id)
		}
		t.mu.Unlock()
	}
}
