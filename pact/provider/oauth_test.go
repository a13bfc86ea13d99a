package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

type oauthEnv struct {
	t     *testing.T
	sc    *pacttest.Scenario
	p     *Server
	st    *store.Store
	pages *brandlogin.Pages
	srv   *httptest.Server
	base  string
	mu    sync.Mutex
	now   time.Time
	brand *brand.Brand
	// cfg is what p was made with, for restart.
	cfg Config
	// live is the Server the test server serves: p, until a restart.
	live atomic.Pointer[Server]
	// ledgerRevs are the revocations the ledger records, by grant: the
	// Provider's Config.Revocations.
	ledgerRevs map[string]oauth.Recorded
	// ledgerDown, when set, makes the ledger's record unreadable to the
	// Provider and its pages alike.
	ledgerDown bool
}

// revokeInLedger records grant's revocation in the ledger as of at, as
// ledgerctl revoke with an admin key does.
func (e *oauthEnv) revokeInLedger(grant string, at time.Time) { e.recordInLedger(grant, at, true) }

// statedInLedger records in the ledger the Provider's own signed
// statement that it revoked grant as of at, as its pipeline posts one
// (docs/design/045).
func (e *oauthEnv) statedInLedger(grant string, at time.Time) { e.recordInLedger(grant, at, false) }

// recordInLedger records a revocation of grant as of at that stops the
// Provider: an admin's, or the Provider's own statement.
func (e *oauthEnv) recordInLedger(grant string, at time.Time, admin bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.ledgerRevs[grant]
	if admin && (r.Admin.IsZero() || at.Before(r.Admin)) {
		r.Admin = at
	}
	if r.At.IsZero() || at.Before(r.At) {
		r.At = at
	}
	e.ledgerRevs[grant] = r
}

// ledgerRevocation is the ledger's record the Provider reads.
func (e *oauthEnv) ledgerRevocation(_ context.Context, grant string) (oauth.Recorded, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ledgerDown {
		return oauth.Recorded{}, errors.New("row store unreachable")
	}
	return e.ledgerRevs[grant], nil
}

// setLedgerDown makes the ledger's record unreadable (down) or readable
// again.
func (e *oauthEnv) setLedgerDown(down bool) { e.mu.Lock(); defer e.mu.Unlock(); e.ledgerDown = down }

func (e *oauthEnv) clock() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }
func (e *oauthEnv) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

// builtinBrand reads a demo brand file of pact/brands.
func builtinBrand(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "brands", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agentName is the registered personal agent's name as customers know it.
const agentName = "My Agent"

func newOAuthEnv(t *testing.T) *oauthEnv {
	dir := t.TempDir()
	builtin := builtinBrand(t, "acme.yaml")
	shop := strings.Replace(builtin, "id: acme", "id: shop", 1)
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(shop), 0o600); err != nil {
		t.Fatal(err)
	}
	// acme here is the same brand without delegation.
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte(strings.Replace(builtin, "delegation: true", "delegation: false", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	brands, err := brand.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return newOAuthEnvWith(t, brands)
}

// newOAuthEnvWith serves brands (with a delegating "shop") at a test
// server: a store in a temporary directory, the pages and the routes,
// assembled as package pact does.
func newOAuthEnvWith(t *testing.T, brands map[string]*brand.Brand) *oauthEnv {
	var err error
	e := &oauthEnv{t: t, sc: pacttest.NewScenario(jose.ES256, jose.ES256), now: time.Now().UTC(), brand: brands["shop"], ledgerRevs: map[string]oauth.Recorded{}}
	t.Cleanup(e.sc.Close)
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, e.sc.Agents())
	v, _ := verifier.New(verifier.Config{Audience: e.sc.Audience})
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.live.Load().ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	dir := t.TempDir()
	if e.st, err = store.Open(filepath.Join(dir, "p.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	log := slog.New(slog.DiscardHandler)
	e.pages, err = brandlogin.New(brandlogin.Config{BaseURL: e.srv.URL, Brands: brands, Store: e.st, Now: e.clock, Logger: log,
		Issuer: func(id string) string { return Issuer(e.srv.URL, id) }, AgentNames: map[string]string{e.sc.PA.ID: agentName}, Revocations: e.ledgerRevocation,
		DenialNotRecorded: func(ctx context.Context, brand string) { e.live.Load().DenialNotRecorded(ctx, brand) }})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = Config{BaseURL: e.srv.URL, Verifier: v, Keys: reg, Brands: brands, Store: e.st, Pages: e.pages,
		SigningKeyPath: filepath.Join(dir, "key.json"), Logger: log, Now: e.clock, Revocations: e.ledgerRevocation}
	if e.p, err = New(e.cfg); err != nil {
		t.Fatal(err)
	}
	e.live.Store(e.p)
	e.base = e.srv.URL + "/a2a/shop"
	return e
}

// approve and deny answer a device authorization as the consent page
// does.
func (e *oauthEnv) approve(userCode, user string, scopes []string) error {
	_, err := e.st.DecideDevice(userCode, oauth.Decision{User: user, Approve: true, Scopes: scopes}, e.clock())
	return err
}

func (e *oauthEnv) deny(userCode, user string) error {
	return e.pages.Deny(context.Background(), userCode, user)
}

// jwt is a fresh personal-agent JWT (signed at the real time: the JWT is
// checked at the Provider's clock, which the tests keep near it).
func (e *oauthEnv) jwt() string { return e.jwtAs("u1") }

// jwtAs is the personal agent's JWT for its User sub.
func (e *oauthEnv) jwtAs(sub string) string {
	now := e.clock()
	return e.sc.PA.Key.Sign(map[string]any{"iss": e.sc.PA.ID, "sub": sub, "aud": e.sc.Audience, "iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix()})
}

func (e *oauthEnv) post(path string, form url.Values, token string) (int, map[string]any, http.Header) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, m, res.Header
}

func (e *oauthEnv) get(url string) (int, map[string]any) {
	res, err := http.Get(url)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

func TestDelegationCardAndMetadata(t *testing.T) {
	e := newOAuthEnv(t)
	code, card := e.get(e.base + "/.well-known/agent-card.json")
	if code != 200 {
		t.Fatal(code)
	}
	reqs := card["securityRequirements"].([]any)
	if len(reqs) != 2 || len(reqs[0].(map[string]any)["schemes"].(map[string]any)) != 1 || len(reqs[1].(map[string]any)["schemes"].(map[string]any)) != 2 {
		t.Fatalf("requirements %v", reqs)
	}
	ud := card["securitySchemes"].(map[string]any)["userDelegation"].(map[string]any)["oauth2SecurityScheme"].(map[string]any)
	flow := ud["flows"].(map[string]any)["deviceCode"].(map[string]any)
	if flow["deviceAuthorizationUrl"] != e.base+"/oauth/device_authorization" || flow["tokenUrl"] != e.base+"/oauth/token" ||
		flow["scopes"].(map[string]any)["orders:cancel"] != "Cancel an order that has not shipped" {
		t.Fatalf("flow %v", flow)
	}
	code, md := e.get(ud["oauth2MetadataUrl"].(string))
	if code != 200 || md["issuer"] != e.base+"/oauth" || md["jwks_uri"] != e.base+"/oauth/jwks.json" || md["device_authorization_endpoint"] != flow["deviceAuthorizationUrl"] ||
		md["token_endpoint"] != flow["tokenUrl"] || len(md["scopes_supported"].([]any)) != 4 || md["grant_types_supported"] == nil || md["token_endpoint_auth_methods_supported"] == nil {
		t.Fatalf("metadata %v", md)
	}
	code, jwks := e.get(md["jwks_uri"].(string))
	if code != 200 || len(jwks["keys"].([]any)) != 1 {
		t.Fatalf("jwks %v", jwks)
	}
	// A brand without delegation lists only the PA-JWT entry and serves no OAuth endpoints.
	_, acme := e.get(e.srv.URL + "/a2a/acme/.well-known/agent-card.json")
	if len(acme["securityRequirements"].([]any)) != 1 {
		t.Fatal("non-delegating brand lists delegation")
	}
	if code, _ := e.get(e.srv.URL + "/a2a/acme/oauth/.well-known/oauth-authorization-server"); code != 404 {
		t.Fatalf("non-delegating brand metadata = %d", code)
	}
}

func TestDeviceFlow(t *testing.T) {
	e := newOAuthEnv(t)
	form := url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read orders:cancel"}}
	if code, _, h := e.post("/oauth/device_authorization", form, ""); code != 401 || h.Get("WWW-Authenticate") != `Bearer realm="a2a"` {
		t.Fatalf("without a PA JWT: %d", code)
	}
	if code, m, _ := e.post("/oauth/device_authorization", url.Values{"client_id": {"https://other"}, "scope": {"orders:read"}}, e.jwt()); code != 401 || m["error"] != "invalid_client" {
		t.Fatalf("client_id != iss: %d %v", code, m)
	}
	if code, m, _ := e.post("/oauth/device_authorization", url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read admin:all"}}, e.jwt()); code != 400 || m["error"] != "invalid_scope" {
		t.Fatalf("unknown scope: %d %v", code, m)
	}
	code, da, _ := e.post("/oauth/device_authorization", form, e.jwt())
	if code != 200 || !regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`).MatchString(da["user_code"].(string)) ||
		da["verification_uri"] != e.srv.URL+"/brands/shop/login?return_to="+url.QueryEscape(e.base+"/oauth/consent") || !strings.HasSuffix(da["verification_uri_complete"].(string), da["user_code"].(string)) ||
		da["expires_in"] != float64(600) || da["interval"] != float64(5) {
		t.Fatalf("device authorization: %d %v", code, da)
	}
	tokForm := url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {da["device_code"].(string)}}
	if _, m, _ := e.post("/oauth/token", tokForm, e.jwt()); m["error"] != "authorization_pending" {
		t.Fatalf("pending: %v", m)
	}
	if _, m, _ := e.post("/oauth/token", tokForm, e.jwt()); m["error"] != "slow_down" {
		t.Fatalf("polling too fast: %v", m)
	}
	e.advance(11 * time.Second) // the interval grew to 10 s
	if _, m, _ := e.post("/oauth/token", tokForm, e.jwt()); m["error"] != "authorization_pending" {
		t.Fatalf("pending after waiting: %v", m)
	}
	// The User signs in with the Brand and unchecks orders:cancel.
	if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	e.advance(11 * time.Second)
	code, tok, _ := e.post("/oauth/token", tokForm, e.jwt())
	if code != 200 || tok["scope"] != "orders:read" || tok["token_type"] != "Bearer" || tok["expires_in"] != float64(3600) || tok["refresh_token"] == nil {
		t.Fatalf("token: %d %v", code, tok)
	}
	// The token verifies against the published JWKS and carries §5.4 claims.
	_, jwks := e.get(e.base + "/oauth/jwks.json")
	raw, _ := json.Marshal(jwks)
	ks, err := verifier.ParseKeySet(verifier.NewSnapshot("u", time.Now(), raw))
	if err != nil {
		t.Fatal(err)
	}
	at := tok["access_token"].(string)
	if _, alg, err := verifier.VerifySignature(at, ks); err != nil || alg != "ES256" {
		t.Fatalf("token signature: %v %s", err, alg)
	}
	var c oauth.DelegationClaims
	comp, _ := verifier.DecodeClaims(at, &c)
	if comp.Typ != "at+jwt" || c.Issuer != e.base+"/oauth" || len(c.Audience) != 1 || c.Audience[0] != e.base || c.Subject != "acct-48213" ||
		c.ClientID != e.sc.PA.ID || c.Scope != "orders:read" || !strings.HasPrefix(c.GrantID, "a2agrant_") ||
		c.Expiry.Time().Sub(c.IssuedAt.Time()) != time.Hour || !strings.Contains(string(comp.Payload), `"aud":"`+e.base+`"`) {
		t.Fatalf("claims %+v typ %s", c, comp.Typ)
	}
	if _, m, _ := e.post("/oauth/token", tokForm, e.jwt()); m["error"] != "invalid_grant" {
		t.Fatalf("second redemption: %v", m)
	}

	// Refresh rotates; reusing an old refresh token revokes the chain.
	rf := func(rt string) (int, map[string]any) {
		code, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {rt}}, e.jwt())
		return code, m
	}
	rt1 := tok["refresh_token"].(string)
	code, t2 := rf(rt1)
	if code != 200 || t2["refresh_token"] == rt1 || t2["scope"] != "orders:read" {
		t.Fatalf("refresh: %d %v", code, t2)
	}
	var c2 oauth.DelegationClaims
	_, _ = verifier.DecodeClaims(t2["access_token"].(string), &c2)
	if c2.GrantID != c.GrantID {
		t.Fatal("refresh changed the grant id")
	}
	e.advance(oauth.RefreshGrace + time.Second)
	if _, m := rf(rt1); m["error"] != "invalid_grant" {
		t.Fatalf("reuse of a rotated token: %v", m)
	}
	if _, m := rf(t2["refresh_token"].(string)); m["error"] != "invalid_grant" {
		t.Fatalf("the chain was not revoked after reuse: %v", m)
	}
}

func TestDeviceFlowDeniedAndExpired(t *testing.T) {
	e := newOAuthEnv(t)
	form := url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read"}}
	_, d1, _ := e.post("/oauth/device_authorization", form, e.jwt())
	_, d2, _ := e.post("/oauth/device_authorization", form, e.jwt())
	if err := e.deny(d1["user_code"].(string), "acct-48213"); err != nil {
		t.Fatal(err)
	}
	poll := func(d map[string]any) string {
		_, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {d["device_code"].(string)}}, e.jwt())
		return m["error"].(string)
	}
	if got := poll(d1); got != "access_denied" {
		t.Fatalf("denied: %s", got)
	}
	e.advance(11 * time.Minute)
	if got := poll(d2); got != "expired_token" {
		t.Fatalf("expired: %s", got)
	}
	if err := e.approve(d2["user_code"].(string), "acct-48213", []string{"orders:read"}); err == nil {
		t.Fatal("approved an expired request")
	}
}

// deviceToken runs the device flow for scopes and returns the token reply.
func (e *oauthEnv) deviceToken(scopes, approve []string) map[string]any {
	e.t.Helper()
	da := e.deviceAuth(scopes...)
	if err := e.approve(da["user_code"].(string), "acct-48213", approve); err != nil {
		e.t.Fatal(err)
	}
	code, tok, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {da["device_code"].(string)}}, e.jwt())
	if code != 200 {
		e.t.Fatalf("token: %d %v", code, tok)
	}
	return tok
}

func (e *oauthEnv) send(delegation, ctxID, id, text string) (int, map[string]any, http.Header) {
	e.t.Helper()
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []map[string]any{{"text": text}}}
	if ctxID != "" {
		m["contextId"] = ctxID
	}
	body, _ := json.Marshal(map[string]any{"message": m})
	req, _ := http.NewRequest("POST", e.base+"/message:send", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+e.jwt())
	if delegation != "" {
		req.Header.Set("X-A2A-User-Delegation", "Bearer "+delegation)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return res.StatusCode, out, res.Header
}

func TestSendingWithDelegationReceiptsAndStepUp(t *testing.T) {
	e := newOAuthEnv(t)
	// A context started under §3 alone continues under delegation.
	code, first, _ := e.send("", "", "m1", "hello")
	if code != 200 {
		t.Fatalf("identity turn: %d %v", code, first)
	}
	ctxID := first["message"].(map[string]any)["contextId"].(string)
	if first["message"].(map[string]any)["metadata"] != nil {
		t.Fatal("a receipt on a turn without delegation")
	}
	read := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read"})["access_token"].(string)
	code, out, _ := e.send(read, ctxID, "m2", "what is the status of A-5531?")
	if code != 200 {
		t.Fatalf("delegated turn: %d %v", code, out)
	}
	msg := out["message"].(map[string]any)
	if !strings.Contains(msg["parts"].([]any)[0].(map[string]any)["text"].(string), "processing") {
		t.Fatalf("reply %v", msg)
	}
	receipt := msg["metadata"].(map[string]any)["pact.receipt"].(map[string]any)
	claims := receipt["claims"].(map[string]any)
	if claims["user"] != "acct-48213" || claims["pa"] != e.sc.PA.ID || claims["brand"] != e.base || !strings.HasPrefix(claims["grantId"].(string), "a2agrant_") ||
		claims["scopesUsed"].([]any)[0] != "orders:read" || claims["ts"] == "" {
		t.Fatalf("receipt claims %v", claims)
	}
	jws := receipt["jws"].(string)
	comp, _ := verifier.DecodeClaims(jws, new(map[string]any))
	if comp.Kid == "" || comp.Typ == "" {
		t.Fatalf("receipt header kid %q typ %q", comp.Kid, comp.Typ)
	}
	// The receipt verifies in the ledger's verifier, with the action log's args.
	sum := sha256.Sum256([]byte(jws))
	log, err := e.st.ActionLog(hex.EncodeToString(sum[:]))
	if err != nil || len(log) != 1 || log[0].Tool != "lookup_orders" || log[0].ArgsJSON != `{"order":"A-5531"}` {
		t.Fatalf("action log %+v %v", log, err)
	}
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}),
		[]verifier.Brand{{InterfaceURL: e.base, MetadataURL: e.base + "/oauth/.well-known/oauth-authorization-server"}}, e.sc.Agents())
	v, _ := verifier.New(verifier.Config{Audience: e.sc.Audience})
	res, err := v.Verify(context.Background(), verifier.Input{ReceiptJWS: jws, RequestJWT: e.jwt(), DelegationToken: read,
		Actions: []verifier.Action{{Tool: log[0].Tool, Target: log[0].Target, ArgsJSON: log[0].ArgsJSON}}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Checks {
		if c.Result != verifier.Pass {
			t.Fatalf("ledger check %s = %v: %s", c.Name, c.Result, c.Detail)
		}
	}

	// Step-up: cancelling needs orders:cancel, which the token lacks.
	code, out, _ = e.send(read, ctxID, "m3", "please cancel A-5531")
	task, _ := out["task"].(map[string]any)
	if code != 200 || task == nil || task["status"].(map[string]any)["state"] != "TASK_STATE_AUTH_REQUIRED" || task["contextId"] != ctxID {
		t.Fatalf("step-up: %d %v", code, out)
	}
	meta := task["metadata"].(map[string]any)
	if meta["pact.missingScopes"].([]any)[0] != "orders:cancel" || !strings.Contains(meta["pact.verificationUriComplete"].(string), "user_code=") {
		t.Fatalf("step-up metadata %v", meta)
	}
	userCode := meta["pact.verificationUriComplete"].(string)[strings.Index(meta["pact.verificationUriComplete"].(string), "user_code=")+10:]
	if err := e.approve(userCode, "acct-48213", []string{"orders:cancel"}); err != nil {
		t.Fatal(err)
	}
	// The new token comes from the step-up's device code; here a fresh
	// authorization with both scopes stands in for the agent's polling.
	both := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	code, out, _ = e.send(both, ctxID, "m4", "please cancel A-5531")
	if code != 200 || !strings.Contains(out["message"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string), "cancelled") {
		t.Fatalf("after step-up: %d %v", code, out)
	}
	rc := out["message"].(map[string]any)["metadata"].(map[string]any)["pact.receipt"].(map[string]any)["claims"].(map[string]any)
	if rc["actions"].([]any)[0].(map[string]any)["tool"] != "cancel_order" || rc["actions"].([]any)[0].(map[string]any)["argsHash"] != verifier.ArgsHash(`{"order":"A-5531"}`) {
		t.Fatalf("cancel receipt %v", rc)
	}

	// A bad delegation token: 401 invalid_token, no A2A body.
	code, _, h := e.send(both+"x", ctxID, "m5", "status of A-5531")
	if code != 401 || h.Get("WWW-Authenticate") != `Bearer realm="a2a", error="invalid_token"` {
		t.Fatalf("tampered token: %d %q", code, h.Get("WWW-Authenticate"))
	}
	// A token for another Brand user in this context: INVALID_PARAMS.
	_, da, _ := e.post("/oauth/device_authorization", url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read"}}, e.jwt())
	_ = e.approve(da["user_code"].(string), "acct-10977", []string{"orders:read"})
	_, other, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {da["device_code"].(string)}}, e.jwt())
	code, out, _ = e.send(other["access_token"].(string), ctxID, "m6", "status of B-2001")
	if code != 400 || out["error"].(map[string]any)["details"].([]any)[0].(map[string]any)["reason"] != "INVALID_PARAMS" {
		t.Fatalf("sub switch: %d %v", code, out)
	}
	// Expired and revoked tokens are refused.
	e.advance(2 * time.Hour)
	if code, _, _ := e.send(both, "", "m7", "status of A-5531"); code != 401 {
		t.Fatalf("expired token: %d", code)
	}
}

// The ledger down during a burst of receipts: nothing is lost, and they
// reach it in order once it is back. This ledger is one without
// AppendReceipts: the pipeline posts the receipts one at a time.
func TestPipelineSurvivesTheLedgerBeingDown(t *testing.T) {
	e := newOAuthEnv(t)
	var mu sync.Mutex
	down := true
	var got []string
	refused := make(chan struct{}, 1) // a post answered while down
	ledger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			select {
			case refused <- struct{}{}:
			default:
			}
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/v1/receipts:batch" {
			// As the gateway of a ledger without the route answers.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"code":5,"message":"Not Found","details":[]}`))
			return
		}
		if r.Header.Get("Authorization") != "Bearer writer-key" || r.URL.Path != "/v1/receipts" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		var p pipeline.Receipt
		_ = json.NewDecoder(r.Body).Decode(&p)
		got = append(got, p.MessageID)
		// The ledger's row of the receipt, by its receiptId.
		sum := sha256.Sum256([]byte(p.ReceiptJWS))
		w.Write([]byte(`{"row":{"receiptId":"sha256:` + hex.EncodeToString(sum[:]) + `"},"outcome":"APPEND_OUTCOME_CREATED"}`))
	}))
	defer ledger.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		pipeline.Run(ctx, e.st, &pipeline.LedgerClient{URL: ledger.URL, Key: "writer-key"}, e.st.Queued(), slog.New(slog.DiscardHandler))
		close(done)
	}()
	defer func() { cancel(); <-done }()

	at := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	var sent []string
	for i := range 6 {
		_, out, _ := e.send(at, "", "m"+string(rune('a'+i)), "status of A-5531")
		sent = append(sent, out["message"].(map[string]any)["messageId"].(string))
	}
	// Wait for two more refused posts, so the pipeline has tried with all
	// six queued.
	select {
	case <-refused:
	default:
	}
	for range 2 {
		select {
		case <-refused:
		case <-time.After(40 * time.Second):
			t.Fatal("the pipeline did not try the ledger")
		}
	}
	if d := e.st.Depth(); d != 6 {
		t.Fatalf("depth while the ledger is down: %d, want 6", d)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	deadline := time.Now().Add(40 * time.Second)
	for e.st.Depth() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pipeline did not drain: %d left", e.st.Depth())
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != strings.Join(sent, ",") {
		t.Fatalf("posted %v, want %v in order", got, sent)
	}
}

// A token refreshed in its grant's last hour ends with the grant, and no
// token is taken once its grant has ended, within the tokens' skew too.
func TestDelegationEndsWithItsGrant(t *testing.T) {
	e := newOAuthEnv(t)
	tok := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
	g, err := e.st.Grant(claimsOf(t, tok["access_token"].(string)).GrantID)
	if err != nil {
		t.Fatal(err)
	}
	e.advance(g.Expires.Sub(e.clock()) - 30*time.Minute)
	code, t2, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}, e.jwt())
	if code != 200 || t2["expires_in"] != float64(30*60) || !claimsOf(t, t2["access_token"].(string)).Expiry.Time().Equal(g.Expires.Truncate(time.Second)) {
		t.Fatalf("refreshed 30 min before the grant ends: %d %v", code, t2)
	}
	if code, _, _ := e.send(t2["access_token"].(string), "", "m1", "status of A-5531"); code != 200 {
		t.Fatalf("the refreshed token before the grant ends: %d", code)
	}
	e.advance(30*time.Minute + 10*time.Second) // the token within its skew, the grant over
	if code, _, h := e.send(t2["access_token"].(string), "", "m2", "status of A-5531"); code != 401 || h.Get("WWW-Authenticate") != `Bearer realm="a2a", error="invalid_token"` {
		t.Fatalf("a token of an ended grant: %d", code)
	}
}
