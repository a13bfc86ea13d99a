// Package pact is the embedded PACT 1.0 Provider, Identity and Delegated
// profiles, assembled from its parts: it opens the Provider's store
// (package store), prepares the login and consent pages (brandlogin),
// serves the A2A and OAuth routes (provider) with a brand's agent (agent),
// and drains the outbox to the ledger (pipeline). Brands are data (package
// brand; the demo brands are files in pact/brands). A personal agent links
// package client, never this one.
package pact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pactledger/pactledger/pact/agent"
	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/provider"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Config configures a Provider.
type Config struct {
	// BaseURL is the public URL the Provider is reached at, such as
	// https://provider.example.com; interface URLs are BaseURL/a2a/{brandId}.
	BaseURL string
	// Verifier checks personal-agent JWTs against Keys (the shared
	// personal-agent registry and audience).
	Verifier *verifier.Verifier
	Keys     verifier.KeySource
	// Brands by id.
	Brands map[string]*Brand
	// Agent answers messages; default Scripted.
	Agent Agent
	// StorePath is the Provider's bbolt file.
	StorePath string
	// AgentNames are the personal agents' names as customers know them,
	// by issuer (the registry's displayName): the consent and account
	// pages show them beside the agent's address.
	AgentNames map[string]string
	// SigningKeyPath is the ES256 key that signs delegation tokens and
	// receipts, with the retired keys still published; created on first
	// use, unless the store holds what a key signed (ErrNoSigningKey);
	// refused when it lacks a key that signed the store's entries for the
	// ledger (ErrKeyFileMismatch).
	// Default: SigningKeyPath(StorePath).
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
	// PollInterval is the least time between token polls of a device
	// authorization (RFC 8628 §3.5); default 5 s.
	PollInterval time.Duration
	// MaxOutboxBytes bounds the receipts and refusals held for the
	// ledger, waiting or set aside (store.LimitOutbox); default 1 GiB.
	MaxOutboxBytes int64
	// RefusalLimit limits, per brand, the identity refusals queued for
	// the ledger (refusals of account actions asked under PACT §3 alone,
	// which record no action and no grant): past it the agent is answered
	// as ever and the refusal is counted (RefusalsNotRecorded), not
	// queued. Zero: no limit.
	RefusalLimit Limit
	// RefusalOutboxPercent is the part of MaxOutboxBytes, in percent, that
	// identity refusals may hold (store.LimitIdentityRefusals): the rest
	// stays for receipts, a User's denied consent (within its own share,
	// DenialOutboxPercent) and the other refusals, whatever number of
	// identity refusals come. 1 to 100; default
	// DefaultRefusalOutboxPercent.
	RefusalOutboxPercent int
	// PruneInterval is how often RunPruner prunes what has come due in the
	// store (docs/design/040); default DefaultPruneInterval.
	PruneInterval time.Duration
	// Domains maps a brand's own host name to its id: the Provider then
	// serves that brand's card at https://{domain}/.well-known/agent-card.json
	// (PACT §2.1) when it receives that host's requests.
	Domains map[string]string
	// Revocations, when set, reads the revocations the ledger records
	// (ledgerctl revoke, at any replica of its row store): a grant the
	// ledger records revoked is revoked at the Provider at its next use,
	// as if the User had revoked it. It is read at every request under a
	// delegation token, so it must be a read of the row store, not a call
	// to a ledgerd.
	Revocations Revocations
}

// The parts' names a caller configures a Provider with.
type (
	// Limit is a token bucket of requests per second.
	Limit = provider.Limit
	// Agent is a brand's support agent.
	Agent = agent.Agent
	// Turn is one user message to a brand agent.
	Turn = agent.Turn
	// Reply is an agent's answer.
	Reply = agent.Reply
	// Scripted is the default agent, an interpreter of the brand file.
	Scripted = agent.Scripted
	// LedgerClient posts the outbox to a ledger's REST API.
	LedgerClient = pipeline.LedgerClient
	// Sink receives the outbox, in order.
	Sink = pipeline.Sink
	// ActionLogEntry is one entry of the application action log.
	ActionLogEntry = store.ActionLogEntry
	// Grant is what a User approved for a personal agent at a Brand.
	Grant = oauth.Grant
	// Revocations reads the revocation the ledger records for a grant.
	Revocations = oauth.Revocations
	// RecordedRevocation is the ledger's record of a grant's revocation,
	// as the Provider honours it.
	RecordedRevocation = oauth.Recorded
	// NotRecorded counts a brand's identity refusals answered but not
	// queued for the ledger: over its Config.RefusalLimit (OverRate), or
	// for want of room in the outbox (OverRoom); and its denied consents
	// honoured but not queued for want of room (DenialsOverRoom).
	NotRecorded = provider.NotRecorded
	// SetAsideEntry is an outbox entry the ledger refused as invalid, or
	// that cannot be read, kept for an operator.
	SetAsideEntry = store.SetAsideEntry
	// Retried says what RetryPipelineSetAside put back (Retried), and
	// what it passed over, which stays set aside: entries that cannot be
	// read (Unreadable), and entries of a brand no longer configured or
	// no longer delegating, or served at another interface URL (Held:
	// ErrBrandNotConfigured).
	Retried = store.Retried
)

// Errors of RetryPipelineSetAside.
var (
	// ErrNotSetAside: no entry with that sequence number is set aside.
	ErrNotSetAside = store.ErrNotFound
	// ErrUnreadable: the entry set aside cannot be read, so posting it
	// again cannot help.
	ErrUnreadable = store.ErrUnreadable
	// ErrBrandNotConfigured: the entry set aside is a receipt, or a
	// refusal under a delegation token, of a brand not configured, no
	// longer delegating, or made under another provider.baseUrl (an
	// interface URL the Provider no longer serves the brand at): posted,
	// the ledger would record it UNAUTHORIZED ("not a trusted brand") for
	// good (docs/design/039).
	ErrBrandNotConfigured = errors.New("the entry is of a brand that is not configured, no longer delegates, or is now at another interface URL")
)

// MaxSetAsidePage caps one page of PipelineSetAsideEntries.
const MaxSetAsidePage = store.MaxSetAsidePage

// RefusalsAtOnce is the most refusals the pipeline has in flight at once
// (pipeline.RefusalsAtOnce).
const RefusalsAtOnce = pipeline.RefusalsAtOnce

// Provider is the embedded Provider: its routes, its store, its pipeline
// and its pruner, with one lifecycle (New, RunPipeline and RunPruner,
// Close).
type Provider struct {
	server     *provider.Server
	store      *store.Store
	baseURL    string
	brands     map[string]*Brand
	pages      *brandlogin.Pages
	now        func() time.Time
	log        *slog.Logger
	pruneEvery time.Duration

	// mu guards closed and the start of a run: closing is closed by
	// Close, which then waits for the runs of RunPruner to end.
	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	runs    sync.WaitGroup
}

// New opens the Provider's store and assembles the Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Verifier == nil || cfg.Keys == nil || len(cfg.Brands) == 0 || cfg.StorePath == "" || cfg.BaseURL == "" {
		return nil, errors.New("pact: verifier, keys, brands, store path and base URL are required")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SigningKeyPath == "" {
		cfg.SigningKeyPath = SigningKeyPath(cfg.StorePath)
	}
	st, err := store.Open(cfg.StorePath)
	if err != nil {
		return nil, err
	}
	if cfg.MaxOutboxBytes <= 0 {
		cfg.MaxOutboxBytes = DefaultMaxOutboxBytes
	}
	st.LimitOutbox(cfg.MaxOutboxBytes)
	if cfg.RefusalOutboxPercent <= 0 || cfg.RefusalOutboxPercent > 100 {
		cfg.RefusalOutboxPercent = DefaultRefusalOutboxPercent
	}
	st.LimitIdentityRefusals(percentOf(cfg.MaxOutboxBytes, cfg.RefusalOutboxPercent))
	st.LimitDeniedConsents(percentOf(cfg.MaxOutboxBytes, DenialOutboxPercent))
	if err := checkOutboxBrands(st, cfg.BaseURL, cfg.Brands); err != nil {
		st.Close()
		return nil, err
	}
	p, err := assemble(cfg, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return p, nil
}

// percentOf is pct percent of n, at least 1 (0 would mean no bound).
func percentOf(n int64, pct int) int64 {
	return max(1, n/100*int64(pct)+n%100*int64(pct)/100)
}

// checkOutboxBrands refuses a start whose brands no longer include one
// that receipts or refusals waiting in the outbox are of, no longer let it
// delegate, or serve it at another interface URL (provider.baseUrl
// changed): the ledger checks those entries with the keys of the brand at
// the entry's interface URL, which it takes from the Provider's delegating
// brands at baseURL, and would record them UNAUTHORIZED ("not a trusted
// brand") for good.
func checkOutboxBrands(st *store.Store, baseURL string, brands map[string]*Brand) error {
	waiting, err := st.OutboxBrands()
	if err != nil {
		return fmt.Errorf("pact: %w", err)
	}
	var gone, oldBases []string
	fileGone := false
	for url, n := range waiting {
		g := brandGone(url, baseURL, brands)
		switch {
		case g.why == "":
			continue
		case g.oldBase != "":
			if !slices.Contains(oldBases, g.oldBase) {
				oldBases = append(oldBases, g.oldBase)
			}
		default:
			fileGone = true
		}
		gone = append(gone, entries(n)+" of "+g.why)
	}
	if len(gone) == 0 {
		return nil
	}
	slices.Sort(gone)
	slices.Sort(oldBases)
	var undo, redo []string
	if fileGone {
		undo = append(undo, "put the brand file back as it was in provider.brandsDir")
		redo = append(redo, "remove or change the file")
	}
	switch len(oldBases) {
	case 0:
	case 1:
		undo = append(undo, "set provider.baseUrl back to "+oldBases[0])
		redo = append(redo, "set provider.baseUrl to "+baseURL)
	default:
		undo = append(undo, "set provider.baseUrl back to each of "+strings.Join(oldBases, ", ")+" in turn")
		redo = append(redo, "set provider.baseUrl to "+baseURL)
	}
	todo := strings.Join(undo, ", and ")
	return fmt.Errorf("pact: the Provider's outbox holds, waiting for the ledger (receipts, or refusals under a delegation token), %s: "+
		"posted now, the ledger would record them UNAUTHORIZED (\"not a trusted brand\") for good. %s%s and start ledgerd; once the outbox has "+
		"drained (pactledger_provider_pipeline_depth 0, or \"waiting for the ledger 0\" in ledgerctl provider outbox), stop it, %s, and "+
		"start it again (docs/operations.md, \"The Provider's outbox\")",
		strings.Join(gone, "; "), strings.ToUpper(todo[:1]), todo[1:], strings.Join(redo, " and "))
}

// untrusted says why the ledger would not trust an entry's brand; why is
// "" when it would.
type untrusted struct {
	why string
	// oldBase is the provider.baseUrl the entry was made under, when
	// only the base URL differs.
	oldBase string
}

// brandGone says why the ledger would not trust the brand of interface URL
// url (pipeline.Item.Brand) with the Provider's brands at baseURL: nothing
// when it is one of them, delegates and is at that interface URL
// (provider.InterfaceURL), or url is not a Provider's interface URL.
func brandGone(url, baseURL string, brands map[string]*Brand) untrusted {
	i := strings.LastIndex(url, "/a2a/")
	if i < 0 {
		return untrusted{}
	}
	id := url[i+len("/a2a/"):]
	switch b := brands[id]; {
	case b == nil:
		return untrusted{why: fmt.Sprintf("brand %q, which is not among the configured brands", id)}
	case !b.Delegation:
		return untrusted{why: fmt.Sprintf("brand %q, whose file no longer sets delegation: true", id)}
	}
	if now := provider.InterfaceURL(baseURL, id); url != now {
		return untrusted{why: fmt.Sprintf("brand %q at %s, while provider.baseUrl %s makes it %s", id, url, baseURL, now), oldBase: url[:i]}
	}
	return untrusted{}
}

// entries says n entries.
func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return strconv.Itoa(n) + " entries"
}

// assemble builds the pages and routes over an open store.
func assemble(cfg Config, st *store.Store) (*Provider, error) {
	// The pages count a denial not recorded with the routes' other
	// refusals not recorded; srv is set before either serves a request.
	var srv *provider.Server
	pages, err := brandlogin.New(brandlogin.Config{BaseURL: cfg.BaseURL, Brands: cfg.Brands, Store: st, Now: cfg.Now, Logger: cfg.Logger, AgentNames: cfg.AgentNames,
		Revocations: cfg.Revocations, Issuer: func(id string) string { return provider.Issuer(cfg.BaseURL, id) },
		DenialNotRecorded: func(ctx context.Context, brand string) { srv.DenialNotRecorded(ctx, brand) }})
	if err != nil {
		return nil, fmt.Errorf("pact: %w", err)
	}
	srv, err = provider.New(provider.Config{BaseURL: cfg.BaseURL, Verifier: cfg.Verifier, Keys: cfg.Keys, Brands: cfg.Brands, Agent: cfg.Agent,
		Store: st, Pages: pages, SigningKeyPath: cfg.SigningKeyPath, RetiredKeyTTL: cfg.RetiredKeyTTL, Now: cfg.Now, Logger: cfg.Logger, MaxBodyBytes: cfg.MaxBodyBytes,
		PerAgent: cfg.PerAgent, PerUser: cfg.PerUser, RefusalLimit: cfg.RefusalLimit, PollInterval: cfg.PollInterval, Domains: cfg.Domains, Revocations: cfg.Revocations})
	if err != nil {
		return nil, fmt.Errorf("pact: %w", err)
	}
	if cfg.PruneInterval <= 0 {
		cfg.PruneInterval = DefaultPruneInterval
	}
	return &Provider{server: srv, store: st, baseURL: cfg.BaseURL, brands: cfg.Brands, pages: pages, now: cfg.Now, log: cfg.Logger, pruneEvery: cfg.PruneInterval,
		closing: make(chan struct{})}, nil
}

// ServeHTTP serves the cards, the A2A and OAuth routes and the pages.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.server.ServeHTTP(w, r) }

// Close stops RunPruner, waits for it to return, and closes the store.
// Stop RunPipeline first.
func (p *Provider) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
	}
	p.mu.Unlock()
	p.runs.Wait()
	return p.store.Close()
}

// RevocationStatement is the Provider's signed statement that it revoked
// grant id as of at, for the ledger (provider.Server.RevocationStatement):
// "" when it cannot make one the ledger would trust, or cannot read the
// grant (logged: the revocation is posted without it rather than hold
// up the outbox behind it).
func (p *Provider) RevocationStatement(id string, at time.Time) (string, error) {
	st, err := p.server.RevocationStatement(id, at)
	if err != nil {
		p.log.Error("the Provider cannot sign its statement of a revocation; posting the revocation without it, which a copy of its store from before it will not honour",
			slog.String("grant", id), slog.String("error", err.Error()))
		return "", nil
	}
	return st, nil
}

// Signed reports whether statement is the Provider's own revocation
// statement of grant as of at, signed by one of its keys
// (provider.Server.Signed).
func (p *Provider) Signed(statement, grant string, at time.Time) bool {
	return p.server.Signed(statement, grant, at)
}

// InterfaceURL is a brand's A2A interface URL.
func (p *Provider) InterfaceURL(brandID string) string { return p.server.InterfaceURL(brandID) }

// String describes the provider for logs.
func (p *Provider) String() string { return p.server.String() }

// Retention returns the retention classes its brands' tools name, and for
// each scope the longest class of the tools needing it, merged across
// brands under the default periods (brand.Retention). ledgerd files its
// brands under its configured periods with BrandRetention instead.
func (p *Provider) Retention() (tools, scopes map[string]retention.Class) {
	return p.server.Retention()
}

// BrandSigners returns, for each delegating brand, its interface URL and
// the keys and issuer its delegation tokens and receipts carry.
func (p *Provider) BrandSigners() map[string]verifier.Signer { return p.server.BrandSigners() }

// PipelineDepth is the number of receipts, refusals and revocations
// waiting for the ledger.
func (p *Provider) PipelineDepth() int { return p.store.Depth() }

// RetiredKeysHeld is the number of the Provider's retired signing keys
// kept published past provider.retiredKeyTTL for what they signed that
// waits for the ledger (docs/design/037).
func (p *Provider) RetiredKeysHeld() int { return p.server.RetiredKeysHeld() }

// DefaultMaxOutboxBytes is Config.MaxOutboxBytes's default.
const DefaultMaxOutboxBytes = 1 << 30

// DefaultRefusalOutboxPercent is Config.RefusalOutboxPercent's default.
const DefaultRefusalOutboxPercent = 50

// DenialOutboxPercent is the part of Config.MaxOutboxBytes, in percent,
// that the refusals of denied consents may hold
// (store.LimitDeniedConsents), apart from the identity refusals' share:
// a User signed in once can deny any number of requests their agent
// makes, each refusal carrying the agent's request JWT, so however many
// come the rest stays for receipts and the other refusals. Past it a
// denial is honoured and its refusal counted (RefusalsNotRecorded), not
// queued (docs/design/042).
const DenialOutboxPercent = 10

// RefusalsNotRecorded counts, by brand id, the identity refusals answered
// but not queued for the ledger since New, and the denied consents
// honoured but not queued; every brand is listed.
func (p *Provider) RefusalsNotRecorded() map[string]NotRecorded {
	return p.server.RefusalsNotRecorded()
}

// PipelineBytes is the size of what waits in the outbox for the ledger.
func (p *Provider) PipelineBytes() int64 { return p.store.OutboxBytes() }

// PipelineSetAside is the number of receipts, refusals and revocations
// the ledger refused as invalid, set aside in the store's
// pipeline_rejected: on record at the Provider (a receipt also with its
// agent) but not in the ledger.
func (p *Provider) PipelineSetAside() int { return p.store.SetAsideCount() }

// PipelineSetAsideBytes is the size of the entries set aside: with
// PipelineBytes, what Config.MaxOutboxBytes bounds, since the Provider
// holds them for the ledger until it takes them.
func (p *Provider) PipelineSetAsideBytes() int64 { return p.store.SetAsideBytes() }

// PipelineMovedBack is how many entries the pipeline moved to the
// outbox's end since the store was opened, because the ledger could not
// fetch the keys of a signer of theirs (or of an entry of their grant
// before them): they wait there, not at the head, to be posted again.
func (p *Provider) PipelineMovedBack() int64 { return p.store.MovedBack() }

// PipelineSetAsideEntries lists up to limit (at most MaxSetAsidePage) of
// the entries set aside after sequence number after (0: from the first),
// in the order they were queued; more says whether any follow.
func (p *Provider) PipelineSetAsideEntries(after uint64, limit int) (entries []SetAsideEntry, more bool, err error) {
	return p.store.SetAsideEntries(after, min(limit, MaxSetAsidePage))
}

// RetryPipelineSetAside puts entries set aside back at the end of the
// outbox, in the order they were first queued, and wakes the pipeline: the
// entry seq, or with all every one that can be read (at most 10,000 a
// call). An entry of a brand not configured, no longer delegating, or
// made under another provider.baseUrl is not put back
// (ErrBrandNotConfigured; with all it is passed over and counted):
// posted, the ledger would record it UNAUTHORIZED for good.
func (p *Provider) RetryPipelineSetAside(seq uint64, all bool) (Retried, error) {
	return p.store.RetrySetAside(seq, all, func(it pipeline.Item) error {
		switch g := brandGone(it.Brand(), p.baseURL, p.brands); {
		case g.oldBase != "":
			return fmt.Errorf("%w: %s; set provider.baseUrl back to %s to post it", ErrBrandNotConfigured, g.why, g.oldBase)
		case g.why != "":
			return fmt.Errorf("%w: %s; put the brand file back as it was to post it", ErrBrandNotConfigured, g.why)
		}
		return nil
	})
}

// RunPipeline posts the outbox to sink in order until ctx is done (package
// pipeline): nothing is lost while the ledger is down.
func (p *Provider) RunPipeline(ctx context.Context, sink Sink) error {
	if n := p.store.SetAsideCount(); n > 0 {
		p.log.ErrorContext(ctx, "entries the ledger refused are set aside in the Provider's store (pipeline_rejected), not in the ledger; they hold their room under provider.outboxMaxBytes until it takes them",
			slog.Int("set_aside", n), slog.Int64("set_aside_bytes", p.store.SetAsideBytes()), slog.Int64("outbox_max_bytes", p.store.OutboxLimit()))
	}
	pipeline.Run(ctx, p.store, sink, p.store.Queued(), p.log)
	return nil
}

// Approve records that the User, signed in with the Brand as user, approved
// the device authorization with user code userCode for scopes (those they
// kept of the ones requested), as the consent page does: a step-up's
// approval carries nothing of a grant the ledger records revoked, and
// while the ledger's record cannot be read it records nothing.
func (p *Provider) Approve(userCode, user string, scopes []string) error {
	return p.pages.Approve(context.Background(), userCode, user, scopes)
}

// Deny records that the User refused the device authorization, as the
// consent page does: the refusal is queued for the ledger within the
// denied consents' share of the outbox (DenialOutboxPercent), and past it
// counted (RefusalsNotRecorded).
func (p *Provider) Deny(userCode, user string) error {
	return p.pages.Deny(context.Background(), userCode, user)
}

// ActionLog returns the action log entries of a receipt (by the hex SHA-256
// of its JWS).
func (p *Provider) ActionLog(receiptSHA string) ([]ActionLogEntry, error) {
	return p.store.ActionLog(receiptSHA)
}

// UserGrants lists a Brand user's grants, newest first.
func (p *Provider) UserGrants(brandID, user string) ([]Grant, error) {
	return p.store.UserGrants(brandID, user)
}

// RevokeGrant revokes a grant of a Brand user at the Provider (its
// delegation and refresh tokens stop working), with every other active
// grant of the same personal agent for that user, and queues the
// revocations for the ledger.
func (p *Provider) RevokeGrant(brandID, user, id string) error {
	return brandlogin.RevokeGrant(p.store, brandID, user, id, p.now().UTC())
}

// LoginURL is the Brand's login page the verification URI points to.
func (p *Provider) LoginURL(b *Brand) string { return p.pages.LoginURL(b) }

// ReturnURL is where the Brand's login POSTs its assertion: the Provider's
// consent page.
func (p *Provider) ReturnURL(b *Brand) string { return p.pages.ReturnURL(b) }
