package provider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/customer"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/verifier"
)

const (
	janeEmail    = "jane@example.com"
	janePassword = "acme-jane-demo"
)

// deviceAuth starts a device authorization for scopes and returns its
// reply.
func (e *oauthEnv) deviceAuth(scopes ...string) map[string]any {
	e.t.Helper()
	return e.deviceAuthAs("u1", scopes...)
}

// deviceAuthAs is deviceAuth asked by the personal agent for its User sub.
func (e *oauthEnv) deviceAuthAs(sub string, scopes ...string) map[string]any {
	e.t.Helper()
	code, da, _ := e.post("/oauth/device_authorization", url.Values{"client_id": {e.sc.PA.ID}, "scope": {strings.Join(scopes, " ")}}, e.jwtAs(sub))
	if code != 200 {
		e.t.Fatalf("device authorization: %d %v", code, da)
	}
	return da
}

// poll asks the token endpoint once for a device code.
func (e *oauthEnv) poll(da map[string]any) (int, map[string]any) {
	e.advance(6 * time.Second)
	code, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {da["device_code"].(string)}}, e.jwt())
	return code, m
}

// outbox lists what waits for the ledger.
func (e *oauthEnv) outbox() []pipeline.Item {
	e.t.Helper()
	out, err := e.st.Outbox(1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func claimsOf(t *testing.T, jwt string) oauth.DelegationClaims {
	t.Helper()
	parts := strings.Split(jwt, ".")
	var c oauth.DelegationClaims
	b, _ := jose.ParseSignedCompact(jwt, []jose.SignatureAlgorithm{jose.ES256})
	if b == nil || len(parts) != 3 || json.Unmarshal(b.UnsafePayloadWithoutVerification(), &c) != nil {
		t.Fatalf("not a JWT: %s", jwt)
	}
	return c
}

func TestLoginConsentPartialApproval(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read", "orders:cancel")
	ctx := context.Background()
	jane := customer.New(janeEmail, janePassword)
	pg, err := jane.Answer(ctx, da["verification_uri_complete"].(string), customer.Decision{Keep: []string{"orders:read"}})
	if err != nil || pg.Title != "Allowed" {
		t.Fatalf("consent: %v %+v", err, pg)
	}
	code, tok := e.poll(da)
	if code != 200 || tok["scope"] != "orders:read" {
		t.Fatalf("token after partial consent: %d %v", code, tok)
	}
	c := claimsOf(t, tok["access_token"].(string))
	if c.Subject != "acct-48213" || c.Scope != "orders:read" || c.ClientID != e.sc.PA.ID {
		t.Fatalf("claims %+v", c)
	}
	// The token acts as Jane within orders:read only: cancelling asks for a step-up.
	_, out, _ := e.send(tok["access_token"].(string), "", "m1", "cancel A-5531")
	task, _ := out["task"].(map[string]any)
	if task == nil || task["status"].(map[string]any)["state"] != "TASK_STATE_AUTH_REQUIRED" {
		t.Fatalf("cancel without orders:cancel: %v", out)
	}
}

func TestConsentPageShowsAgentBrandAndDescriptions(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read", "refunds:issue")
	// Walk by hand to read the consent page itself.
	body := e.consentPage(da)
	for _, want := range []string{"See your orders and their status", "Refund an order to the original payment method", originOf(e.sc.PA.ID), "Acme Outfitters", da["user_code"].(string)} {
		if !strings.Contains(body, want) {
			t.Fatalf("consent page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Cancel an order") {
		t.Fatal("consent page shows a scope that was not requested")
	}
	if strings.Contains(body, "<script") {
		t.Fatal("consent page uses JavaScript")
	}
}

// consentPage signs Jane in by plain HTTP and returns the consent page's
// HTML.
func (e *oauthEnv) consentPage(da map[string]any) string {
	e.t.Helper()
	assertion, c := e.signIn(da)
	res, err := c.PostForm(e.base+"/oauth/consent", url.Values{"assertion": {assertion}})
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		e.t.Fatalf("consent: %d %s", res.StatusCode, b)
	}
	return string(b)
}

var (
	hiddenRe = regexp.MustCompile(`name="(csrf|assertion|ticket)" value="([^"]+)"`)
)

func hidden(body, name string) string {
	for _, m := range hiddenRe.FindAllStringSubmatch(body, -1) {
		if m[1] == name {
			return m[2]
		}
	}
	return ""
}

// signIn signs Jane in at the demo login for a device authorization and
// returns the assertion the hand-off page carries, and her browser.
func (e *oauthEnv) signIn(da map[string]any) (string, *http.Client) {
	e.t.Helper()
	c := newBrowser()
	res, err := c.Get(da["verification_uri_complete"].(string))
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	u, _ := url.Parse(da["verification_uri_complete"].(string))
	res, err = c.PostForm(e.srv.URL+"/brands/shop/login", url.Values{"csrf": {hidden(string(b), "csrf")}, "return_to": {u.Query().Get("return_to")},
		"user_code": {u.Query().Get("user_code")}, "email": {janeEmail}, "password": {janePassword}})
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	a := hidden(string(b), "assertion")
	if a == "" {
		e.t.Fatalf("no assertion after sign-in: %d %s", res.StatusCode, b)
	}
	return strings.ReplaceAll(a, "&#43;", "+"), c
}

func newBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestAssertionRules(t *testing.T) {
	e := newOAuthEnv(t)
	post := func(c *http.Client, a string) (int, string) {
		res, err := c.PostForm(e.base+"/oauth/consent", url.Values{"assertion": {a}})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	da := e.deviceAuth("orders:read")
	a, c := e.signIn(da)
	// Tampered: another user in the payload, the signature kept.
	parts := strings.Split(a, ".")
	payload, _ := jose.ParseSignedCompact(a, []jose.SignatureAlgorithm{jose.ES256})
	forged := strings.Replace(string(payload.UnsafePayloadWithoutVerification()), "acct-48213", "acct-10977", 1)
	if code, body := post(c, parts[0]+"."+b64(forged)+"."+parts[2]); code != 400 || !strings.Contains(body, "bad signature") {
		t.Fatalf("tampered assertion: %d %s", code, body)
	}
	// Accepted once; the same assertion again is refused.
	if code, body := post(c, a); code != 200 || !strings.Contains(body, "ticket") {
		t.Fatalf("first use: %d %s", code, body)
	}
	if code, body := post(c, a); code != 400 || !strings.Contains(body, "already used") {
		t.Fatalf("replayed assertion: %d %s", code, body)
	}
	// Expired: signed in, then the hand-off waited too long.
	da2 := e.deviceAuth("orders:read")
	a2, c2 := e.signIn(da2)
	e.advance(3 * time.Minute)
	if code, body := post(c2, a2); code != 400 || !strings.Contains(body, "expired") {
		t.Fatalf("expired assertion: %d %s", code, body)
	}
	// Another key (not the brand's), and alg none.
	other := signAssertion(t, newKey(t), assertion(e.srv.URL+"/brands/shop", e.base+"/oauth/consent", da2["user_code"].(string), "x1", e.clock(), time.Minute))
	if code, body := post(c2, other); code != 400 || !strings.Contains(body, "unknown key") {
		t.Fatalf("unknown key: %d %s", code, body)
	}
	if code, _ := post(c2, b64(`{"alg":"none"}`)+"."+b64(`{"sub":"acct-48213"}`)+"."); code != 400 {
		t.Fatalf("alg none: %d", code)
	}
}

func TestDecisionNeedsItsBrowserSession(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read")
	assertion, c := e.signIn(da)
	res, _ := c.PostForm(e.base+"/oauth/consent", url.Values{"assertion": {assertion}})
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	ticket := hidden(string(b), "ticket")
	// Another browser (no consent cookie) posting the same ticket: refused.
	res, _ = http.PostForm(e.base+"/oauth/decision", url.Values{"ticket": {ticket}, "decision": {"approve"}, "scope": {"orders:read"}})
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "does not belong") {
		t.Fatalf("decision from another browser: %d %s", res.StatusCode, b)
	}
	// A cross-site post: refused by Origin.
	req, _ := http.NewRequest("POST", e.base+"/oauth/decision", strings.NewReader(url.Values{"ticket": {ticket}, "decision": {"approve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	res, _ = c.Do(req)
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Fatalf("cross-site decision: %d", res.StatusCode)
	}
	// Allow with every box unchecked: refused, and the form stays usable.
	res, _ = c.PostForm(e.base+"/oauth/decision", url.Values{"ticket": {ticket}, "decision": {"approve"}})
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "Nothing was allowed") {
		t.Fatalf("allow with nothing checked: %d %s", res.StatusCode, b)
	}
	// Approving a scope that was not requested is refused.
	res, _ = c.PostForm(e.base+"/oauth/decision", url.Values{"ticket": {ticket}, "decision": {"approve"}, "scope": {"orders:cancel"}})
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "was not requested") {
		t.Fatalf("approving an unrequested scope: %d %s", res.StatusCode, b)
	}
	if code, m := e.poll(da); code != 400 || m["error"] != "authorization_pending" {
		t.Fatalf("after refused decisions: %d %v", code, m)
	}
	// The refused decisions left the form usable: allowing now works, once.
	res, _ = c.PostForm(e.base+"/oauth/decision", url.Values{"ticket": {ticket}, "decision": {"approve"}, "scope": {"orders:read"}})
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("allow after refused decisions: %d", res.StatusCode)
	}
	if code, m := e.poll(da); code != 200 || m["scope"] != "orders:read" {
		t.Fatalf("token: %d %v", code, m)
	}
	res, _ = c.PostForm(e.base+"/oauth/decision", url.Values{"ticket": {ticket}, "decision": {"deny"}})
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("a second decision with the same form: %d", res.StatusCode)
	}
}

func TestDeniedConsentIsARefusalForTheLedger(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read", "orders:cancel")
	pg, err := customer.New(janeEmail, janePassword).Answer(context.Background(), da["verification_uri_complete"].(string), customer.Decision{Deny: true})
	if err != nil || pg.Title != "Denied" {
		t.Fatalf("deny: %v %+v", err, pg)
	}
	// A denial leaves what the User allowed before: the page says so, not
	// that the agent cannot act on the account.
	if !strings.Contains(pg.Text, "was not given the permissions it asked for") || !strings.Contains(pg.Text, "Anything you allowed it before is unchanged") ||
		strings.Contains(pg.Text, "cannot act on your") {
		t.Fatalf("the denial page says: %s", pg.Text)
	}
	if code, m := e.poll(da); code != 400 || m["error"] != "access_denied" {
		t.Fatalf("token after denial: %d %v", code, m)
	}
	box := e.outbox()
	if len(box) != 1 || box[0].Refusal == nil {
		t.Fatalf("outbox %+v", box)
	}
	r := box[0].Refusal
	if r.ClaimedPrincipal != "acct-48213" || r.ClaimedAgent != e.sc.PA.ID || r.RequestJWT == "" || r.Action.Tool != "grant_delegation" || r.Action.Target != "orders:read orders:cancel" {
		t.Fatalf("refusal %+v", r)
	}
}

// A denial is on record as of the personal agent's request, not of the
// User's answer: the ledger checks the refusal's request JWT as of its
// observedAt (verifier.VerifyRefusalToken), and the JWT, of minutes at
// most (PACT §3.2), may have expired by the time the User answers the
// device code's ten minutes. The reason says when the User denied.
func TestADenialIsOnRecordAsOfTheAgentsRequest(t *testing.T) {
	e := newOAuthEnv(t)
	asked := e.clock()
	da := e.deviceAuth("orders:read")
	e.advance(4 * time.Minute) // the User signs in and reads the page
	denied := e.clock()
	pg, err := customer.New(janeEmail, janePassword).Answer(context.Background(), da["verification_uri_complete"].(string), customer.Decision{Deny: true})
	if err != nil || pg.Title != "Denied" {
		t.Fatalf("deny: %v %+v", err, pg)
	}
	rs := e.refusals()
	if len(rs) != 1 {
		t.Fatalf("%d refusals on record, want the denial", len(rs))
	}
	r := rs[0]
	if !r.ObservedAt.Equal(asked) || !strings.Contains(r.Reason, "denied consent at shop for orders:read at "+denied.Format(time.RFC3339)) {
		t.Errorf("the denial is observed at %s (%s), want the request's %s and a reason naming the denial's %s", r.ObservedAt, r.Reason, asked, denied)
	}
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, e.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: e.sc.Audience})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := v.VerifyRefusalToken(context.Background(), verifier.ParseToken(""), verifier.ParseToken(r.RequestJWT), r.ObservedAt, reg)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Request.Result != verifier.Pass {
		t.Errorf("the denial's request JWT as of its observedAt: %v: %s", tok.Request.Result, tok.Request.Detail)
	}
}

func TestConsentSkippedWhenAGrantCoversTheRequest(t *testing.T) {
	e := newOAuthEnv(t)
	jane := customer.New(janeEmail, janePassword)
	ctx := context.Background()
	da := e.deviceAuth("orders:read", "orders:cancel")
	if _, err := jane.Answer(ctx, da["verification_uri_complete"].(string), customer.Decision{}); err != nil {
		t.Fatal(err)
	}
	_, first := e.poll(da)
	// Jane's Brand session is live: no password, and no consent for a covered request.
	jane.Password = "wrong"
	da2 := e.deviceAuth("orders:read")
	pg, err := jane.Answer(ctx, da2["verification_uri_complete"].(string), customer.Decision{})
	if err != nil || pg.Title != "Already allowed" {
		t.Fatalf("covered request: %v %+v", err, pg)
	}
	_, second := e.poll(da2)
	if claimsOf(t, second["access_token"].(string)).GrantID != claimsOf(t, first["access_token"].(string)).GrantID {
		t.Fatal("a skipped consent made a new grant")
	}
	// The token carries the whole grant, and the page said so, naming the
	// agent as customers know it and by its address.
	if got := claimsOf(t, second["access_token"].(string)).Scope; got != "orders:read orders:cancel" || !strings.Contains(pg.Text, "Cancel an order") ||
		!strings.Contains(pg.Text, "You had already allowed "+agentName+" ("+originOf(e.sc.PA.ID)+")") {
		t.Fatalf("covered request: token scope %q, page %q", got, pg.Text)
	}
	// The same agent asking for another of its users (PACT §3.2: the User
	// is the pair of the agent and its sub) does not inherit Jane's
	// consent, though Jane's session opens the link.
	da4 := e.deviceAuthAs("u2", "orders:read")
	pg, err = jane.Answer(ctx, da4["verification_uri_complete"].(string), customer.Decision{})
	if err != nil || pg.Title != "Allowed" {
		t.Fatalf("a covered request for another of the agent's users: %v %+v, want the consent page answered", err, pg)
	}
	// A request the grant does not cover shows consent again.
	da3 := e.deviceAuth("refunds:issue")
	pg, err = jane.Answer(ctx, da3["verification_uri_complete"].(string), customer.Decision{})
	if err != nil || pg.Title != "Allowed" {
		t.Fatalf("uncovered request: %v %+v", err, pg)
	}
}

func TestUserRevokesAGrantOnTheBrandAccountPage(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read")
	_, c := e.signIn(da)
	// Approve through the Provider's API (the consent page is tested above).
	if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	_, tok := e.poll(da)
	at := tok["access_token"].(string)
	grant := claimsOf(t, at).GrantID
	res, err := c.Get(e.srv.URL + "/brands/shop/grants")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), e.sc.PA.ID) || !strings.Contains(string(b), "See your orders and their status") || !strings.Contains(string(b), grant) {
		t.Fatalf("grants page: %s", b)
	}
	// Without the page's CSRF token: refused.
	res, _ = c.PostForm(e.srv.URL+"/brands/shop/grants/revoke", url.Values{"grant": {grant}})
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Fatalf("revoke without CSRF: %d", res.StatusCode)
	}
	// Another user cannot revoke it.
	if err := brandlogin.RevokeGrant(e.st, "shop", "acct-10977", grant, e.clock()); err == nil {
		t.Fatal("another user revoked Jane's grant")
	}
	res, _ = c.PostForm(e.srv.URL+"/brands/shop/grants/revoke", url.Values{"grant": {grant}, "csrf": {hidden(string(b), "csrf")}})
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if code, _, h := e.send(at, "", "m1", "status of A-5531"); code != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("token of a revoked grant: %d", code)
	}
	if code, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}, e.jwt()); code != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("refresh of a revoked grant: %d %v", code, m)
	}
	box := e.outbox()
	if !slices.ContainsFunc(box, func(it pipeline.Item) bool { return it.Revocation != nil && it.Revocation.GrantID == grant }) {
		t.Fatalf("no revocation for the ledger: %+v", box)
	}
}

func TestLoginLocksOutAfterRepeatedFailures(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read")
	link := da["verification_uri_complete"].(string)
	for range brandlogin.MaxLoginFailures {
		if _, err := customer.New(janeEmail, "guess").Answer(context.Background(), link, customer.Decision{}); err == nil || !strings.Contains(err.Error(), "do not match") {
			t.Fatalf("wrong password: %v", err)
		}
	}
	if _, err := customer.New(janeEmail, janePassword).Answer(context.Background(), link, customer.Decision{}); err == nil || !strings.Contains(err.Error(), "Too many") {
		t.Fatalf("after %d failures: %v", brandlogin.MaxLoginFailures, err)
	}
	e.advance(brandlogin.LoginLockout + time.Minute)
	if _, err := customer.New(janeEmail, janePassword).Answer(context.Background(), e.deviceAuth("orders:read")["verification_uri_complete"].(string), customer.Decision{}); err != nil {
		t.Fatalf("after the lock-out: %v", err)
	}
	// An unknown email gets the same answer as a wrong password.
	if _, err := customer.New("nobody@example.com", "x").Answer(context.Background(), link, customer.Decision{}); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Fatalf("unknown email: %v", err)
	}
}

// A real Brand plugs in its own login by configuration: its URL, issuer and
// assertion keys. The Provider verifies its assertions the same way.
func TestBrandOwnLoginByConfiguration(t *testing.T) {
	key := newKey(t)
	pub, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	dir := t.TempDir()
	y := strings.Replace(builtinBrand(t, "acme.yaml"), "id: acme", "id: shop", 1)
	y = strings.Replace(y, "delegation: true", "delegation: true\nlogin:\n  url: https://login.shop.example/pact\n  issuer: https://login.shop.example\n  keys: '"+string(pub)+"'", 1)
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	brands, err := brand.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := newOAuthEnvWith(t, brands)
	da := e.deviceAuth("orders:read")
	u, _ := url.Parse(da["verification_uri_complete"].(string))
	if u.Host != "login.shop.example" || u.Query().Get("return_to") != e.base+"/oauth/consent" {
		t.Fatalf("verification link %s", u)
	}
	// The demo login is not served for a brand with its own.
	if res, _ := http.Get(e.srv.URL + "/brands/shop/login"); res.StatusCode != 404 {
		t.Fatalf("demo login for a brand with its own: %d", res.StatusCode)
	}
	const iss = "https://login.shop.example"
	consent, code := e.base+"/oauth/consent", da["user_code"].(string)
	a := signAssertion(t, key, assertion(iss, consent, code, "j1", e.clock(), time.Minute))
	res, err := newBrowser().PostForm(e.base+"/oauth/consent", url.Values{"assertion": {a}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || hidden(string(b), "ticket") == "" {
		t.Fatalf("consent after the brand's own login: %d %s", res.StatusCode, b)
	}
	// What the brand's login signs is checked: issuer, audience, a short
	// life, times, the required claims, and a kid.
	noKid := key
	noKid.KeyID = ""
	now := e.clock()
	tests := []struct {
		name string
		key  jose.JSONWebKey
		a    brandlogin.Assertion
		want string
	}{
		{"wrong issuer", key, assertion("https://elsewhere.example", consent, code, "j2", now, time.Minute), "issuer"},
		{"another consent page", key, assertion(iss, e.srv.URL+"/a2a/acme/oauth/consent", code, "j3", now, time.Minute), "audience"},
		{"too long a life", key, assertion(iss, consent, code, "j4", now, 10*time.Minute), "lifetime"},
		{"issued in the future", key, assertion(iss, consent, code, "j5", now.Add(2*time.Minute), time.Minute), "issued in the future"},
		{"expired", key, assertion(iss, consent, code, "j6", now.Add(-3*time.Minute), 2*time.Minute), "expired"},
		{"no jti", key, assertion(iss, consent, code, "", now, time.Minute), "required"},
		{"no kid", noKid, assertion(iss, consent, code, "j7", now, time.Minute), "unknown key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := http.PostForm(consent, url.Values{"assertion": {signAssertion(t, tc.key, tc.a)}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 400 || !strings.Contains(string(b), tc.want) {
				t.Fatalf("%d %s, want 400 saying %q", res.StatusCode, b, tc.want)
			}
		})
	}
}

// assertion is what a Brand's login signs for Jane: issued at iat, living
// for life.
func assertion(iss, aud, userCode, jti string, iat time.Time, life time.Duration) brandlogin.Assertion {
	return brandlogin.Assertion{UserCode: userCode, Claims: verifier.Claims{Issuer: iss, Audience: []string{aud}, Subject: "acct-48213", ID: jti,
		IssuedAt: verifier.NumericDateOf(iat), Expiry: verifier.NumericDateOf(iat.Add(life))}}
}

func newKey(t *testing.T) jose.JSONWebKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: priv, KeyID: "brand-login-1", Algorithm: string(jose.ES256), Use: "sig"}
}

func signAssertion(t *testing.T, k jose.JSONWebKey, a brandlogin.Assertion) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jws.CompactSerialize()
	return out
}

// originOf is a URL's scheme and host, as the pages name a personal agent.
func originOf(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	return u.Scheme + "://" + u.Host
}

// A signed-in Brand User cannot try user codes until one is another
// User's request (RFC 8628 §5.1): after five unknown codes in fifteen
// minutes the consent page refuses the account, even its right code,
// until the window has passed; other accounts are not held up.
func TestGuessingUserCodesIsLimited(t *testing.T) {
	e := newOAuthEnv(t)
	ctx := context.Background()
	victim := e.deviceAuth("orders:read")
	guesser := customer.New(janeEmail, janePassword)
	link := victim["verification_uri"].(string) // the page where a code is typed
	for i := range 5 {
		code := oauth.NewUserCode()
		pg, err := guesser.Answer(ctx, link, customer.Decision{UserCode: code})
		if err == nil || pg == nil || pg.Status != http.StatusBadRequest || !strings.Contains(pg.Error, "not known") {
			t.Fatalf("unknown code %d: %v %+v", i+1, err, pg)
		}
	}
	pg, err := guesser.Answer(ctx, link, customer.Decision{UserCode: victim["user_code"].(string)})
	if err == nil || pg == nil || pg.Status != http.StatusTooManyRequests || pg.Title != "Too many codes tried" {
		t.Fatalf("a sixth code within the window: %v %+v", err, pg)
	}
	if code, m := e.poll(victim); code != 400 || m["error"] != "authorization_pending" {
		t.Fatalf("the request guessed at: %d %v, want still pending", code, m)
	}
	// Another account answers its own request.
	sam := customer.New("sam@example.com", "acme-sam-demo")
	if pg, err := sam.Answer(ctx, e.deviceAuthAs("u2", "orders:read")["verification_uri_complete"].(string), customer.Decision{}); err != nil || pg.Title != "Allowed" {
		t.Fatalf("another account: %v %+v", err, pg)
	}
	e.advance(15 * time.Minute)
	if pg, err := guesser.Answer(ctx, e.deviceAuth("orders:read")["verification_uri_complete"].(string), customer.Decision{}); err != nil || pg.Title != "Allowed" {
		t.Fatalf("after the window: %v %+v", err, pg)
	}
}

// stepUpThroughLink asks, under the delegation token read (orders:read),
// for a cancellation: the answer is a step-up, which Jane approves through
// its link; the agent then asks for what it holds and what it lacks, as
// pactagent does, Jane is not asked again, and the agent's token is
// returned with the step-up's context.
func (e *oauthEnv) stepUpThroughLink(read string) (ctxID string, tok map[string]any) {
	t := e.t
	t.Helper()
	ctx := context.Background()
	code, out, _ := e.send(read, "", "m1", "please cancel A-5531")
	task, _ := out["task"].(map[string]any)
	if code != 200 || task == nil {
		t.Fatalf("step-up: %d %v", code, out)
	}
	jane := customer.New(janeEmail, janePassword)
	if pg, err := jane.Answer(ctx, task["metadata"].(map[string]any)["pact.verificationUriComplete"].(string), customer.Decision{}); err != nil || pg.Title != "Allowed" {
		t.Fatalf("the step-up's link: %v %+v", err, pg)
	}
	da := e.deviceAuth("orders:read", "orders:cancel")
	if pg, err := jane.Answer(ctx, da["verification_uri_complete"].(string), customer.Decision{}); err != nil || pg.Title != "Already allowed" {
		t.Fatalf("the agent's own request for the missing scope: %v %+v, want it allowed already", err, pg)
	}
	code, tok = e.poll(da)
	if code != 200 {
		t.Fatalf("token: %d %v", code, tok)
	}
	return task["contextId"].(string), tok
}

// A step-up's link leads somewhere (PACT §5.5): the User who approves
// through it is not asked again when the agent, repeating §5.3 for the
// missing scopes, shows its own link; the agent's token then carries
// them, and the turn goes through.
func TestAStepUpApprovedThroughItsLinkIsNotAskedAgain(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	ctxID, tok := e.stepUpThroughLink(read)
	if tok["scope"] != "orders:read orders:cancel" {
		t.Fatalf("token: %v", tok)
	}
	code, out, _ := e.send(tok["access_token"].(string), ctxID, "m2", "please cancel A-5531")
	if msg, _ := out["message"].(map[string]any); code != 200 || msg == nil || !strings.Contains(msg["parts"].([]any)[0].(map[string]any)["text"].(string), "cancelled") {
		t.Fatalf("after the step-up: %d %v", code, out)
	}
	// The step-up's grant carries the first grant's scope, not renews it:
	// it ends no later, and goes when the User revokes the first.
	first := claimsOf(t, read).GrantID
	gs, err := e.st.UserGrants("shop", "acct-48213")
	if err != nil {
		t.Fatal(err)
	}
	var carried, firstGrant oauth.Grant
	for _, g := range gs {
		switch {
		case g.ID == first:
			firstGrant = g
		case g.Extends == first:
			carried = g
		}
	}
	if carried.ID != claimsOf(t, tok["access_token"].(string)).GrantID || carried.Expires.After(firstGrant.Expires) {
		t.Fatalf("the step-up's grant %+v, the first %+v: want the token's, ending no later", carried, firstGrant)
	}
	if err := e.st.RevokeGrant("shop", "acct-48213", first, "revoked by the user", e.clock()); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := e.send(tok["access_token"].(string), ctxID, "m3", "status of A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("the step-up's token once the grant it carries was revoked: %d", code)
	}
	revoked := 0
	for _, it := range e.outbox() {
		if it.Revocation != nil && (it.Revocation.GrantID == first || it.Revocation.GrantID == carried.ID) {
			revoked++
		}
	}
	if revoked != 2 {
		t.Fatalf("%d revocations for the ledger, want both grants'", revoked)
	}
}

// The consent page of an agent that holds a grant of the User says what
// the new grant would carry of it, and until when, before the User
// decides: the new grant replaces the older and ends when it does.
func TestConsentPageSaysWhatANewGrantCarries(t *testing.T) {
	e := newOAuthEnv(t)
	jane := customer.New(janeEmail, janePassword)
	da := e.deviceAuth("orders:read")
	if _, err := jane.Answer(context.Background(), da["verification_uri_complete"].(string), customer.Decision{}); err != nil {
		t.Fatal(err)
	}
	if code, m := e.poll(da); code != 200 {
		t.Fatalf("first grant: %d %v", code, m)
	}
	body := e.consentPage(e.deviceAuth("orders:cancel"))
	if !strings.Contains(body, `id="carried"`) || !strings.Contains(body, "Your agent keeps what you allowed it before: See your orders and their status.") ||
		!strings.Contains(body, "That stays until") {
		t.Fatalf("the consent page does not say what the new grant carries:\n%s", body)
	}
	// Another of the agent's users (another sub) carries nothing of Jane's.
	if body := e.consentPage(e.deviceAuthAs("u2", "orders:cancel")); strings.Contains(body, `id="carried"`) {
		t.Fatalf("the consent page for another of the agent's users says a grant is carried:\n%s", body)
	}
}
