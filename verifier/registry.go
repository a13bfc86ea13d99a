package verifier

import (
	"context"
	"fmt"
	"strings"
)

// Brand is a trusted brand: its interface URL (the receipt's brand and the
// delegation token's aud) and where its signing keys are published, either
// directly (JWKSURI) or through RFC 8414 metadata (MetadataURL).
type Brand struct {
	InterfaceURL string
	JWKSURI      string
	MetadataURL  string
	// Issuer, when set, is the iss delegation tokens must carry; with
	// MetadataURL it defaults to the metadata's issuer.
	Issuer string
}

// Agent is a registered personal agent (PACT §3.1).
type Agent struct {
	Issuer  string
	JWKSURI string
	Enabled bool
}

// Registry is the live KeySource: configured brands and personal agents,
// with their keys fetched through a Fetcher. Keys are fetched only from
// configured URIs (and the jwks_uri of configured metadata).
type Registry struct {
	fetcher *Fetcher
	brands  map[string]Brand
	agents  map[string]Agent
	open    bool
	// callers fetches the documents of open agents, whose addresses
	// callers name (Fetcher.forCallers).
	callers *Fetcher
	// grants, when set, fetches the documents of open agents for
	// OpenAgent (Fetcher.forGrants).
	grants *Fetcher
}

// OpenAgents makes the registry accept any personal agent whose issuer
// serves OpenID Connect discovery ({iss}/.well-known/openid-configuration)
// naming its own issuer and a jwks_uri (PACT §3.1: a Provider's policy).
// Registered agents, enabled or not, keep their registration. Discovery
// and its keys are fetched apart from the configured ones, from public
// addresses only (never loopback, whatever AllowInsecureLoopback says),
// with a cache and fetches of their own, both bounded.
func (r *Registry) OpenAgents(open bool) {
	r.open = open
	if open && r.callers == nil {
		r.callers = r.fetcher.forCallers()
	}
}

// OpenAgentsOnGrant makes OpenAgent find the keys of a personal agent no
// one registered as OpenAgents makes Agent find them (OIDC discovery, from
// public addresses only), through a fetcher of its own that keeps each
// set's bytes and every usable key, so that the set checked with can be
// kept as a snapshot and parsed again later. Agent is left as it was: the
// caller decides when an agent is taken on a grant (see
// GrantedAgentSource).
func (r *Registry) OpenAgentsOnGrant() {
	if r.grants == nil {
		r.grants = r.fetcher.forGrants()
	}
}

// OpenAgent is Agent for a personal agent a brand granted: a registered
// one as Agent finds it, one no one registered through OIDC discovery
// when OpenAgentsOnGrant was called (else as Agent: ErrUntrusted). Its
// sets keep their bytes (Snapshot.Body).
func (r *Registry) OpenAgent(ctx context.Context, issuer string, refresh bool) (Signer, error) {
	if _, ok := r.agents[issuer]; ok || r.grants == nil {
		return r.Agent(ctx, issuer, refresh)
	}
	return r.discoveredBy(ctx, r.grants, issuer, refresh)
}

// NewRegistry returns a Registry. It checks every configured URI against
// the fetcher's rules.
func NewRegistry(f *Fetcher, brands []Brand, agents []Agent) (*Registry, error) {
	r := &Registry{fetcher: f, brands: map[string]Brand{}, agents: map[string]Agent{}}
	for _, b := range brands {
		if b.InterfaceURL == "" || (b.JWKSURI == "") == (b.MetadataURL == "") {
			return nil, fmt.Errorf("brand %q: set interfaceUrl and exactly one of jwksUri or metadataUrl", b.InterfaceURL)
		}
		for _, u := range []string{b.JWKSURI, b.MetadataURL} {
			if u != "" {
				if err := f.CheckURI(u); err != nil {
					return nil, fmt.Errorf("brand %s: %w", b.InterfaceURL, err)
				}
			}
		}
		r.brands[b.InterfaceURL] = b
	}
	for _, a := range agents {
		if a.Issuer == "" || a.JWKSURI == "" {
			return nil, fmt.Errorf("personal agent %q: issuer and jwksUri are required", a.Issuer)
		}
		if err := f.CheckURI(a.JWKSURI); err != nil {
			return nil, fmt.Errorf("personal agent %s: %w", a.Issuer, err)
		}
		r.agents[a.Issuer] = a
	}
	return r, nil
}

// Brand implements KeySource. The error wraps ErrUntrusted when the brand is
// not configured, and ErrFetch when its metadata or keys could not be
// obtained for a reason that may pass (see Fetcher.Keys and Refresh).
func (r *Registry) Brand(ctx context.Context, interfaceURL string, refresh bool) (Signer, error) {
	b, ok := r.brands[interfaceURL]
	if !ok {
		return Signer{}, fmt.Errorf("%w: brand %q is not a trusted brand", ErrUntrusted, interfaceURL)
	}
	uri, issuer := b.JWKSURI, b.Issuer
	var metaErr error // the metadata was not refetched for this call
	if b.MetadataURL != "" {
		mIss, mJWKS, err := r.fetcher.Metadata(ctx, b.MetadataURL)
		if refresh {
			// After an unknown kid: the brand may have moved its keys to
			// a new jwks_uri. A kid the keys lack is decided unknown only
			// when the metadata naming them was refetched for this call
			// too; else the metadata as cached names the keys, and a kid
			// they lack stays undecided.
			rIss, rJWKS, rerr := r.fetcher.RefreshMetadata(ctx, b.MetadataURL)
			if rJWKS != "" {
				mIss, mJWKS, err = rIss, rJWKS, nil
			}
			metaErr = rerr
		}
		if err != nil {
			return Signer{}, err
		}
		if err := r.fetcher.CheckURI(mJWKS); err != nil {
			return Signer{}, err
		}
		uri = mJWKS
		if issuer == "" {
			issuer = mIss
		}
	}
	ks, err := r.keys(ctx, uri, refresh)
	if err == nil && metaErr != nil {
		err = fmt.Errorf("%w: the brand's metadata was not refetched for this kid: %w", ErrFetch, metaErr)
	}
	return Signer{Keys: ks, Issuer: issuer, Aged: !refresh && r.fetcher.aged(ks)}, err
}

// Registered reports whether a personal agent of issuer is registered,
// enabled or not: one that is not is taken only under OpenAgents.
func (r *Registry) Registered(issuer string) bool {
	_, ok := r.agents[issuer]
	return ok
}

// Agent implements KeySource. The error wraps ErrUntrusted when the agent is
// not registered (nor discoverable under OpenAgents) or is disabled, and
// ErrFetch when its discovery document or keys could not be obtained for a
// reason that may pass.
func (r *Registry) Agent(ctx context.Context, issuer string, refresh bool) (Signer, error) {
	a, ok := r.agents[issuer]
	if !ok && r.open {
		return r.discovered(ctx, issuer, refresh)
	}
	if !ok {
		return Signer{}, fmt.Errorf("%w: personal agent %q is not registered", ErrUntrusted, issuer)
	}
	if !a.Enabled {
		return Signer{}, fmt.Errorf("%w: personal agent %q is disabled", ErrUntrusted, issuer)
	}
	ks, err := r.keys(ctx, a.JWKSURI, refresh)
	return Signer{Keys: ks, Aged: !refresh && r.fetcher.aged(ks)}, err
}

func (r *Registry) keys(ctx context.Context, uri string, refresh bool) (*KeySet, error) {
	return keysFrom(ctx, r.fetcher, uri, refresh)
}

func keysFrom(ctx context.Context, f *Fetcher, uri string, refresh bool) (*KeySet, error) {
	if refresh {
		return f.Refresh(ctx, uri)
	}
	return f.Keys(ctx, uri)
}

// discovered finds an unregistered agent's keys through OIDC discovery.
func (r *Registry) discovered(ctx context.Context, issuer string, refresh bool) (Signer, error) {
	return r.discoveredBy(ctx, r.callers, issuer, refresh)
}

// discoveredBy is discovered through the fetcher f.
func (r *Registry) discoveredBy(ctx context.Context, f *Fetcher, issuer string, refresh bool) (Signer, error) {
	if err := f.checkCallerURI(issuer); err != nil {
		return Signer{}, fmt.Errorf("%w: personal agent %q: %w", ErrUntrusted, issuer, err)
	}
	disc := strings.TrimRight(issuer, "/") + "/.well-known/openid-configuration"
	iss, jwksURI, err := f.Metadata(ctx, disc)
	var metaErr error // discovery was not refetched for this call (see Brand)
	if refresh {
		rIss, rJWKS, rerr := f.RefreshMetadata(ctx, disc)
		if rJWKS != "" {
			iss, jwksURI, err = rIss, rJWKS, nil
		}
		metaErr = rerr
	}
	if err != nil {
		// Unreachable or unusable discovery may pass: undecided (ErrFetch).
		return Signer{}, fmt.Errorf("personal agent %q: discovery: %w", issuer, err)
	}
	if iss != issuer {
		return Signer{}, fmt.Errorf("%w: personal agent %q: discovery names issuer %q", ErrUntrusted, issuer, iss)
	}
	if err := f.checkCallerURI(jwksURI); err != nil {
		return Signer{}, fmt.Errorf("%w: personal agent %q: %w", ErrUntrusted, issuer, err)
	}
	ks, err := keysFrom(ctx, f, jwksURI, refresh)
	if err == nil && metaErr != nil {
		err = fmt.Errorf("%w: personal agent %q: discovery was not refetched for this kid: %w", ErrFetch, issuer, metaErr)
	}
	return Signer{Keys: ks, Aged: !refresh && f.aged(ks)}, err
}
