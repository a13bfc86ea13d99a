// Package pact is the embedded PACT 1.0 Provider, Identity profile (spec
// §2, §3, §4, §6): it serves each Brand's Agent Card, authenticates every
// request with the personal agent's signed JWT, and runs the Brand's
// support agent over the HTTP+JSON binding of A2A 1.0, with contexts and
// idempotent retries kept in its own bbolt file. Brands are data (YAML).
package pact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pactledger/pactledger/pact/brand"
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
	// SigningKeyPath is the ES256 key that signs delegation tokens; created
	// on first use. Default: provider-signing-key.json beside StorePath.
	SigningKeyPath string
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
	// Domains maps a brand's own host name to its id: the Provider then
	// serves that brand's card at https://{domain}/.well-known/agent-card.json
	// (PACT §2.1) when it receives that host's requests.
	Domains map[string]string
}

// Provider serves the A2A operations of every Brand.
type Provider struct {
	cfg   Config
	store *store
	key   *signingKey

	perAgent, perUser *limiter

	mu    sync.Mutex
	locks map[string]*convLock // one turn at a time per context; only held ones

	pipeWake chan struct{}

	demo map[string]*demoLogin // brands' built-in logins, by brand id
}

// New opens the Provider's store.
func New(cfg Config) (*Provider, error) {
	if cfg.Verifier == nil || cfg.Keys == nil || len(cfg.Brands) == 0 || cfg.StorePath == "" || cfg.BaseURL == "" {
		return nil, errors.New("pact: verifier, keys, brands, store path and base URL are required")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Agent == nil {
		cfg.Agent = Scripted{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PollInterval < time.Second {
		cfg.PollInterval = pollInterval
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.SigningKeyPath == "" {
		cfg.SigningKeyPath = filepath.Join(filepath.Dir(cfg.StorePath), "provider-signing-key.json")
	}
	key, err := loadSigningKey(cfg.SigningKeyPath)
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg.StorePath)
	if err != nil {
		return nil, err
	}
	for d, id := range cfg.Domains {
		if cfg.Brands[id] == nil {
			st.close()
			return nil, fmt.Errorf("pact: domain %s names unknown brand %q", d, id)
		}
	}
	demo := map[string]*demoLogin{}
	for id, b := range cfg.Brands {
		if b.Login == nil && slices.ContainsFunc(b.Accounts, func(a Account) bool { return a.PasswordHash != "" }) {
			if demo[id], err = newDemoLogin(); err != nil {
				st.close()
				return nil, err
			}
		}
	}
	return &Provider{cfg: cfg, store: st, key: key, locks: map[string]*convLock{}, perAgent: newLimiter(cfg.PerAgent), perUser: newLimiter(cfg.PerUser), pipeWake: make(chan struct{}, 1), demo: demo}, nil
}

// Close closes the store.
func (p *Provider) Close() error { return p.store.close() }

// InterfaceURL is a brand's A2A interface URL.
func (p *Provider) InterfaceURL(brandID string) string { return p.cfg.BaseURL + "/a2a/" + brandID }

// route is a matched A2A operation.
type route struct {
	creds credentials
	brand *Brand
	del   *DelegationClaims // the verified delegation token, when one was sent
	op    func(w http.ResponseWriter, r *http.Request, rt route, who *verifier.RequestClaims)
	arg   string // task id, where the path has one
}

// ServeHTTP routes first (unknown brand or path: 404, wrong method: 405,
// no A2A body), then authenticates, then runs the operation.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/.well-known/agent-card.json" {
		host := strings.ToLower(r.Host)
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
		if id, ok := p.cfg.Domains[host]; ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			p.card(w, p.cfg.Brands[id])
			return
		}
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/brands/"); ok {
		id, op, _ := strings.Cut(rest, "/")
		if b := p.cfg.Brands[id]; b != nil && p.demo[id] != nil {
			p.serveDemo(w, r, b, op)
			return
		}
		http.NotFound(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/a2a/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	brandID, op, _ := strings.Cut(rest, "/")
	b := p.cfg.Brands[brandID]
	if b == nil {
		http.NotFound(w, r)
		return
	}
	if b.Delegation && (op == "oauth/.well-known/oauth-authorization-server" || op == "oauth/jwks.json") {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return
		}
		if op == "oauth/jwks.json" {
			p.jwks(w)
		} else {
			p.metadata(w, b)
		}
		return
	}
	if b.Delegation && (op == "oauth/consent" || op == "oauth/decision") {
		// Pages the User's browser posts to: no personal-agent JWT.
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
		if op == "oauth/consent" {
			p.consentIn(w, r, b)
		} else {
			p.decisionIn(w, r, b)
		}
		return
	}
	if op == ".well-known/agent-card.json" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return
		}
		p.card(w, b)
		return
	}
	rt, allowed := p.match(op, r.Method, b.Delegation)
	if rt.op == nil {
		if allowed != "" {
			methodNotAllowed(w, allowed)
		} else {
			http.NotFound(w, r)
		}
		return
	}
	rt.brand = b
	// PACT §3.4: authenticate before reading the body.
	who, err := p.authenticate(r)
	if errors.Is(err, verifier.ErrUndecided) {
		// The agent's keys could not be fetched: neither accepted nor
		// rejected. The agent may retry; a 401 would say its JWT is bad.
		p.cfg.Logger.WarnContext(r.Context(), "personal-agent keys unavailable", slog.String("brand", b.ID), slog.String("reason", err.Error()))
		w.Header().Set("Retry-After", "10")
		http.Error(w, "the personal agent's keys could not be fetched; retry", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		p.cfg.Logger.InfoContext(r.Context(), "personal-agent JWT rejected", slog.String("brand", b.ID), slog.String("reason", err.Error()))
		w.Header().Set("WWW-Authenticate", `Bearer realm="a2a"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	// PACT §5.5: the delegation token, when sent, checked after the PA JWT.
	if h := r.Header.Get("X-A2A-User-Delegation"); h != "" {
		tok, _ := bearerToken(h)
		del, err := p.verifyDelegation(b, who, h)
		if err != nil {
			p.cfg.Logger.InfoContext(r.Context(), "delegation token rejected", slog.String("brand", b.ID), slog.String("reason", err.Error()))
			w.Header().Set("WWW-Authenticate", `Bearer realm="a2a", error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rt.del = del
		rt.creds.delegation = tok
	}
	rt.creds.paJWT, _ = bearerToken(r.Header.Get("Authorization"))
	// PACT §6: 429 with Retry-After per personal agent and per (agent, sub);
	// a refused request spends no token.
	now := p.cfg.Now()
	okAgent, waitAgent, undoAgent := p.perAgent.allow(who.Iss, now)
	okUser, waitUser := true, time.Duration(0)
	if okAgent {
		okUser, waitUser, _ = p.perUser.allow(who.Iss+"\x00"+who.Sub, now)
		if !okUser {
			undoAgent()
		}
	}
	if !okAgent || !okUser {
		wait := max(waitAgent, waitUser)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	rt.op(w, r, rt, who)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	w.WriteHeader(http.StatusMethodNotAllowed)
}

// match finds the operation for op and method. When the path is an A2A
// operation but the method is not, it returns the allowed methods.
func (p *Provider) match(op, method string, delegation bool) (route, string) {
	type entry struct {
		method string
		fn     func(http.ResponseWriter, *http.Request, route, *verifier.RequestClaims)
	}
	var table []entry
	var arg string
	switch {
	case delegation && op == "oauth/device_authorization":
		table = []entry{{http.MethodPost, p.deviceAuthorization}}
	case delegation && op == "oauth/token":
		table = []entry{{http.MethodPost, p.token}}
	case op == "message:send":
		table = []entry{{http.MethodPost, p.send}}
	case op == "message:stream":
		table = []entry{{http.MethodPost, unsupported("streaming is not supported (capabilities.streaming is false)")}}
	case op == "tasks":
		table = []entry{{http.MethodGet, p.listTasks}}
	case op == "extendedAgentCard":
		table = []entry{{http.MethodGet, unsupported("there is no extended agent card (capabilities.extendedAgentCard is false)")}}
	case strings.HasPrefix(op, "tasks/"):
		t := strings.TrimPrefix(op, "tasks/")
		switch {
		case strings.HasSuffix(t, ":cancel") && !strings.Contains(t, "/"):
			arg = strings.TrimSuffix(t, ":cancel")
			table = []entry{{http.MethodPost, taskNotFound}}
		case strings.HasSuffix(t, ":subscribe") && !strings.Contains(t, "/"):
			arg = strings.TrimSuffix(t, ":subscribe")
			table = []entry{{http.MethodPost, unsupported("streaming is not supported (capabilities.streaming is false)")}, {http.MethodGet, unsupported("streaming is not supported (capabilities.streaming is false)")}}
		case strings.Contains(t, "/pushNotificationConfigs"):
			id, sub, _ := strings.Cut(t, "/pushNotificationConfigs")
			arg = id
			push := pushNotSupported
			if sub == "" {
				table = []entry{{http.MethodPost, push}, {http.MethodGet, push}}
			} else if strings.HasPrefix(sub, "/") && !strings.Contains(sub[1:], "/") && len(sub) > 1 {
				table = []entry{{http.MethodGet, push}, {http.MethodDelete, push}}
			}
		case t != "" && !strings.ContainsAny(t, "/:"):
			arg = t
			table = []entry{{http.MethodGet, taskNotFound}}
		}
	}
	if arg != "" && strings.ContainsAny(arg, "/:") {
		return route{}, ""
	}
	var allowed []string
	for _, e := range table {
		if e.method == method {
			return route{op: e.fn, arg: arg}, ""
		}
		allowed = append(allowed, e.method)
	}
	return route{}, strings.Join(allowed, ", ")
}

func unsupported(msg string) func(http.ResponseWriter, *http.Request, route, *verifier.RequestClaims) {
	return func(w http.ResponseWriter, _ *http.Request, _ route, _ *verifier.RequestClaims) {
		writeError(w, newErr(ReasonUnsupported, msg))
	}
}

func pushNotSupported(w http.ResponseWriter, _ *http.Request, _ route, _ *verifier.RequestClaims) {
	writeError(w, newErr(ReasonPushNotSupported, "push notifications are not supported (capabilities.pushNotifications is false)"))
}

func taskNotFound(w http.ResponseWriter, _ *http.Request, rt route, _ *verifier.RequestClaims) {
	writeError(w, taskErr(rt.arg))
}

// authenticate verifies the personal-agent JWT of PACT §3.2.
func (p *Provider) authenticate(r *http.Request) (*verifier.RequestClaims, error) {
	tok, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return nil, errors.New("no bearer token")
	}
	return p.cfg.Verifier.VerifyPAJWT(r.Context(), tok, p.cfg.Now(), p.cfg.Keys)
}

// bearerToken reads the credentials of an Authorization (or
// X-A2A-User-Delegation) header value with the Bearer scheme: the scheme
// name in any case (RFC 9110 §11.1), one or more spaces, then the token
// (RFC 6750 §2.1), with no whitespace inside it.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.Trim(tok, " ")
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", false
	}
	return tok, true
}

// card serves the Agent Card of PACT §2.1.
func (p *Provider) card(w http.ResponseWriter, b *Brand) {
	skills := b.Skills
	if skills == nil {
		skills = []Skill{}
	}
	schemes := map[string]any{
		"paJwt": map[string]any{"httpAuthSecurityScheme": map[string]string{"scheme": "Bearer", "bearerFormat": "JWT"}},
	}
	requirements := []map[string]any{{"schemes": map[string]any{"paJwt": map[string]any{"list": []string{}}}}}
	if b.Delegation {
		// PACT §5.1: the device flow, and a second requirement naming both.
		// The brand's scopes in the order its file lists them.
		scopes := orderedScopes(b.Scopes)
		schemes["userDelegation"] = map[string]any{"oauth2SecurityScheme": map[string]any{
			"flows": map[string]any{"deviceCode": map[string]any{
				"deviceAuthorizationUrl": p.issuer(b) + "/device_authorization",
				"tokenUrl":               p.issuer(b) + "/token",
				"scopes":                 scopes,
			}},
			"oauth2MetadataUrl": p.metadataURL(b),
		}}
		requirements = append(requirements, map[string]any{"schemes": map[string]any{"paJwt": map[string]any{"list": []string{}}, "userDelegation": map[string]any{"list": []string{}}}})
	}
	card := map[string]any{
		"name":        b.Name,
		"description": b.Description,
		"supportedInterfaces": []map[string]string{{
			"url": p.InterfaceURL(b.ID), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0",
		}},
		"provider":             map[string]string{"organization": b.Organization, "url": p.cfg.BaseURL},
		"version":              b.Version,
		"capabilities":         map[string]bool{"streaming": false, "pushNotifications": false, "extendedAgentCard": false},
		"securitySchemes":      schemes,
		"securityRequirements": requirements,
		"defaultInputModes":    []string{"text/plain"},
		"defaultOutputModes":   []string{"text/plain"},
		"skills":               skills,
	}
	writeA2A(w, http.StatusOK, card)
}

// orderedScopes is the card's scope map (id to description), written in
// the brand's order: encoding/json would sort a Go map's keys.
type orderedScopes []Scope

// MarshalJSON implements json.Marshaler.
func (o orderedScopes) MarshalJSON() ([]byte, error) {
	buf := []byte{'{'}
	for i, s := range o {
		if i > 0 {
			buf = append(buf, ',')
		}
		k, err := json.Marshal(s.ID)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(s.Description)
		if err != nil {
			return nil, err
		}
		buf = append(append(append(buf, k...), ':'), v...)
	}
	return append(buf, '}'), nil
}

func (p *Provider) listTasks(w http.ResponseWriter, r *http.Request, _ route, _ *verifier.RequestClaims) {
	size := 50
	if v := r.URL.Query().Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, newErr(ReasonInvalidParams, "pageSize must be between 1 and 100"))
			return
		}
		size = n
	}
	writeA2A(w, http.StatusOK, map[string]any{"tasks": []any{}, "nextPageToken": "", "pageSize": size, "totalSize": 0})
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// convLock serializes the turns of one context. holders counts the turns
// that hold it or wait for it; the last to leave removes it from the map,
// so the map holds only contexts with a turn in progress.
type convLock struct {
	mu      sync.Mutex
	holders int
}

// lock takes the lock of context id and returns its release.
func (p *Provider) lock(id string) func() {
	p.mu.Lock()
	l := p.locks[id]
	if l == nil {
		l = &convLock{}
		p.locks[id] = l
	}
	l.holders++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		if l.holders--; l.holders == 0 {
			delete(p.locks, id)
		}
		p.mu.Unlock()
	}
}

// send is message:send (PACT §4).
func (p *Provider) send(w http.ResponseWriter, r *http.Request, rt route, who *verifier.RequestClaims) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, newErr(ReasonInvalidParams, "request body unreadable or larger than "+strconv.FormatInt(p.cfg.MaxBodyBytes, 10)+" bytes"))
		return
	}
	msg, text, aerr := parseSend(body)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	out, aerr := p.turn(r.Context(), rt, who, msg, text)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// parseSend applies the request rules of PACT §4.1, in order: a bad body,
// role, part kinds (before blank text), text, taskId, messageId.
func parseSend(body []byte) (*Message, string, *a2aError) {
	var req SendMessageRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "", newErr(ReasonInvalidParams, "request body is not a SendMessageRequest")
	}
	m := req.Message
	if m == nil {
		return nil, "", newErr(ReasonInvalidParams, "message is required")
	}
	if m.Role != "ROLE_USER" {
		return nil, "", newErr(ReasonInvalidParams, "message role must be ROLE_USER")
	}
	var texts []string
	for _, part := range m.Parts {
		if !part.TextOnly() {
			return nil, "", newErr(ReasonContentType, "only text parts are supported")
		}
		if strings.TrimSpace(*part.Text) != "" {
			texts = append(texts, *part.Text)
		}
	}
	if len(texts) == 0 {
		return nil, "", newErr(ReasonInvalidParams, "message needs at least one non-blank text part")
	}
	if m.TaskID != "" {
		return nil, "", taskErr(m.TaskID)
	}
	if m.MessageID == "" || len(m.MessageID) > 256 {
		return nil, "", newErr(ReasonInvalidParams, "messageId is required (up to 256 characters)")
	}
	if len(m.ContextID) > 256 {
		return nil, "", newErr(ReasonInvalidParams, "Unknown contextId")
	}
	return m, strings.Join(texts, "\n"), nil
}

// turn runs one message in its context: a new context when none is given;
// a stored reply for a repeated messageId (PACT §4.3).
func (p *Provider) turn(ctx context.Context, rt route, who *verifier.RequestClaims, m *Message, text string) (json.RawMessage, *a2aError) {
	b, del := rt.brand, rt.del
	now := p.cfg.Now().UTC()
	conv := &conversation{ID: m.ContextID, Brand: b.ID, PA: who.Iss, Sub: who.Sub, Created: now}
	isNew := m.ContextID == ""
	if isNew {
		conv.ID = newID()
	} else {
		c, err := p.store.conv(m.ContextID)
		// PACT §4.2: another Brand's or (PA, sub)'s context is unknown, said
		// the same way as one that does not exist.
		if err != nil || c.Brand != b.ID || c.PA != who.Iss || c.Sub != who.Sub {
			return nil, newErr(ReasonInvalidParams, "Unknown contextId")
		}
		conv = c
	}
	// Mark the turn as running first, so that a retry of this messageId
	// while it runs gets INVALID_PARAMS (PACT §4.3) instead of waiting.
	conv, stored, err := p.store.begin(conv, isNew, m.MessageID, now)
	var ae *a2aError
	switch {
	case errors.As(err, &ae):
		return nil, ae
	case err != nil:
		p.cfg.Logger.ErrorContext(ctx, "provider store", slog.String("error", err.Error()))
		return nil, newErr(ReasonInternal, "internal error")
	case stored != nil:
		return stored, nil
	}
	// One turn at a time per context; read its state after the previous one.
	id := conv.ID
	unlock := p.lock(id)
	defer unlock()
	if conv, err = p.store.conv(id); err != nil {
		p.store.abandon(&conversation{ID: id}, m.MessageID)
		p.cfg.Logger.ErrorContext(ctx, "provider store", slog.String("error", err.Error()))
		return nil, newErr(ReasonInternal, "internal error")
	}
	if conv.Closed {
		p.store.abandon(conv, m.MessageID)
		return nil, newErr(ReasonUnsupported, "this conversation is closed; start a new one without contextId")
	}
	records := &turnRecords{s: p.store, brand: b.ID}
	turn := Turn{Brand: b, PA: who.Iss, Sub: who.Sub, Text: text, State: conv.State, Records: records}
	if del != nil {
		// PACT §5.5: once a context ran as one Brand user, another user's
		// token is INVALID_PARAMS.
		if conv.User != "" && conv.User != del.Sub {
			p.store.abandon(conv, m.MessageID)
			return nil, newErr(ReasonInvalidParams, "this context acts for another user")
		}
		turn.User, turn.Scopes = del.Sub, strings.Fields(del.Scope)
	}
	rep, err := p.cfg.Agent.Respond(ctx, turn)
	if err != nil {
		p.store.abandon(conv, m.MessageID)
		p.cfg.Logger.ErrorContext(ctx, "brand agent failed", slog.String("brand", b.ID), slog.String("error", err.Error()))
		return nil, newErr(ReasonInternal, "the agent could not answer")
	}
	// The reply, the record changes, the action log and what goes to the
	// ledger commit together: a receipt is never queued for a reply that
	// was not kept, nor a reply kept without its receipt.
	body, fx, err := p.respond(ctx, b, who, del, conv, rep, now, rt.creds)
	if err == nil {
		fx.records = records.changed
		err = p.store.finish(conv, m.MessageID, body, rep.State, rep.Close, turn.User, now, &fx)
	}
	if err != nil {
		p.store.abandon(conv, m.MessageID)
		p.cfg.Logger.ErrorContext(ctx, "provider reply", slog.String("error", err.Error()))
		return nil, newErr(ReasonInternal, "internal error")
	}
	if len(fx.outbox) > 0 {
		p.wakePipeline()
	}
	return body, nil
}

// String describes the provider for logs.
func (p *Provider) String() string {
	return fmt.Sprintf("PACT provider at %s with %d brands", p.cfg.BaseURL, len(p.cfg.Brands))
}

// Retention returns the retention classes its brands' tools name, and for
// each scope the longest class of the tools needing it, merged across
// brands (brand.Retention), for the ledger's retention tables.
func (p *Provider) Retention() (tools, scopes map[string]retention.Class) {
	return brand.Retention(p.cfg.Brands)
}
