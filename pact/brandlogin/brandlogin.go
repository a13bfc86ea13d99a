// Package brandlogin is what people see in a browser: the built-in demo
// Brand login (password sign-in, a Brand session, the hand-off to the
// Provider with a signed assertion, and the account page listing the
// personal agents the User allowed, to revoke them) for brands without a
// login of their own, and the Provider's consent page of PACT §5.3, which
// verifies the Brand login's single-use assertion and records the User's
// decision. Plain server-rendered HTML without JavaScript; every form
// carries a CSRF token or a ticket bound to a cookie.
package brandlogin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/pactledger/pactledger/internal/logbound"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
)

// Config configures the pages.
type Config struct {
	// BaseURL is the Provider's public URL; the demo logins are served at
	// BaseURL/brands/{brandId}/.
	BaseURL string
	Brands  map[string]*brand.Brand
	Store   *store.Store
	// Issuer returns a delegating brand's authorization server issuer: its
	// consent page is {issuer}/consent, the decision {issuer}/decision.
	Issuer func(brandID string) string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
	// AgentNames are the personal agents' names as customers know them,
	// by issuer; an agent without one is named by its address alone.
	AgentNames map[string]string
	// Revocations, when set, are the ledger's recorded revocations: the
	// account page shows a grant the ledger records revoked as revoked
	// (LedgerRevoked), and neither the consent page nor a step-up's
	// approval carries its scopes.
	Revocations oauth.Revocations
	// DenialNotRecorded, when set, is told of each User's denial that was
	// recorded (the device authorization is denied) but whose refusal was
	// not queued for the ledger, for want of room in the denied consents'
	// share of the outbox (store.Store.LimitDeniedConsents): the
	// Provider counts it and warns.
	DenialNotRecorded func(ctx context.Context, brand string)
}

// Pages serves the demo logins and the consent pages.
type Pages struct {
	cfg     Config
	demo    map[string]*demoLogin      // brands' built-in logins, by brand id
	signers map[string]assertionSigner // who signs each brand's assertions
	guesses guesses                    // unknown user codes each Brand User presented
	// failed bounds the log lines of failed demo sign-ins: anyone can post
	// the form.
	failed *logbound.Limiter
}

// Failed demo sign-ins are logged at most failedBurst at once and
// failedRate a second after that.
const (
	failedBurst = 10
	failedRate  = 1.0
)

// demoHashers is how many password checks the demo logins run at once,
// for every brand together: half the cores the process may use, at least
// one (a check takes tens of milliseconds of a core).
func demoHashers() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// New prepares the pages, with a demo login (and its assertion key) for
// each brand that has accounts with passwords and no login of its own.
func New(cfg Config) (*Pages, error) {
	if cfg.BaseURL == "" || cfg.Store == nil || cfg.Issuer == nil {
		return nil, errors.New("brandlogin: base URL, store and issuer are required")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Pages{cfg: cfg, demo: map[string]*demoLogin{}, failed: logbound.New(failedBurst, failedRate)}
	// One bound of password checks for every brand's demo login: a bound
	// each would let a flood at several brands take every core.
	hashing := make(chan struct{}, demoHashers())
	for id, b := range cfg.Brands {
		if b.Login == nil && slices.ContainsFunc(b.Accounts, func(a brand.Account) bool { return a.PasswordHash != "" }) {
			d, err := newDemoLogin()
			if err != nil {
				return nil, err
			}
			d.hashing = hashing
			p.demo[id] = d
		}
	}
	var err error
	if p.signers, err = p.assertionSigners(); err != nil {
		return nil, fmt.Errorf("brandlogin: %w", err)
	}
	return p, nil
}

// HasDemo reports whether the built-in demo login serves brandID.
func (p *Pages) HasDemo(brandID string) bool { return p.demo[brandID] != nil }

// LoginURL is the Brand's login page the verification URI points to: the
// Brand's own, or the built-in demo login.
func (p *Pages) LoginURL(b *brand.Brand) string {
	if b.Login != nil {
		return b.Login.URL
	}
	return p.demoBase(b) + "/login"
}

// ReturnURL is where the Brand's login POSTs its assertion: the Provider's
// consent page.
func (p *Pages) ReturnURL(b *brand.Brand) string { return p.cfg.Issuer(b.ID) + "/consent" }

// VerificationURI is the link the personal agent shows the User: the
// Brand's login, told where to return the User (PACT §5.3), with the user
// code when one is given.
func (p *Pages) VerificationURI(b *brand.Brand, userCode string) string {
	u := p.LoginURL(b)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	u += sep + "return_to=" + url.QueryEscape(p.ReturnURL(b))
	if userCode != "" {
		u += "&user_code=" + url.QueryEscape(userCode)
	}
	return u
}

// demoBase is where a brand's built-in login is served.
func (p *Pages) demoBase(b *brand.Brand) string { return p.cfg.BaseURL + "/brands/" + b.ID }

// secureCookies: the pages' cookies are Secure when the Provider is served
// over https.
func (p *Pages) secureCookies() bool { return strings.HasPrefix(p.cfg.BaseURL, "https://") }

// describe returns the descriptions of scope ids, verbatim from the card.
func describe(b *brand.Brand, ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		d := id
		if s := b.Scope(id); s != nil {
			d = s.Description
		}
		out = append(out, d)
	}
	return out
}

// displayUser names a Brand user on pages: the account's email when the
// brand lists it.
func displayUser(b *brand.Brand, id string) string {
	if a := b.Account(id); a != nil && a.Email != "" {
		return a.Email
	}
	return id
}

// slug makes a scope id usable as an HTML id.
func slug(id string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, id)
}

// origin is a URL's scheme and host: how pages name a personal agent.
// agentWords names the personal agent client for a User: its name as
// customers know it, when the registry gives one, then its address.
func (p *Pages) agentWords(client string) string {
	if n := p.cfg.AgentNames[client]; n != "" {
		return n + " (" + origin(client) + ")"
	}
	return origin(client)
}

func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	return u.Scheme + "://" + u.Host
}
