package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/customer"
	"github.com/pactledger/pactledger/pact/oauth"
)

// A grant the ledger records revoked (ledgerctl revoke) is revoked at the
// Provider at its next use, as a User's revocation on the account page
// is: the agent's next turn under it is answered 401 invalid_token and put
// on record as a refusal under the grant, its refresh token gets
// invalid_grant, and the account page shows it revoked. A revocation as of
// a later time leaves the grant working until then; one as of a past time
// stops it from now on, dated at the ledger's time.
func TestARevocationInTheLedgerStopsTheGrant(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth(ordersReadCancel...)
	_, browser := e.signIn(da)
	if err := e.approve(da["user_code"].(string), "acct-48213", ordersReadCancel); err != nil {
		t.Fatal(err)
	}
	code, tok := e.poll(da)
	if code != 200 {
		t.Fatalf("token: %d %v", code, tok)
	}
	at := tok["access_token"].(string)
	grant := claimsOf(t, at).GrantID
	if code, out, _ := e.send(at, "", "m1", "status of A-5531"); code != 200 {
		t.Fatalf("a turn under the grant: %d %v", code, out)
	}

	// As of an hour from now: the grant works until then.
	e.revokeInLedger(grant, e.clock().Add(time.Hour))
	if code, out, _ := e.send(at, "", "m2", "status of A-5531"); code != 200 {
		t.Fatalf("a turn before the time the ledger's revocation takes effect: %d %v", code, out)
	}
	// As of ten minutes ago: stopped from now on.
	revokedAt := e.clock().Add(-10 * time.Minute).Truncate(time.Second)
	e.revokeInLedger(grant, revokedAt)
	code, authn, paJWT := e.call("POST", "message:send", at, `{"message":{"messageId":"m3","role":"ROLE_USER","parts":[{"text":"cancel order A-5531"}]}}`)
	if code != http.StatusUnauthorized || !strings.Contains(authn, `error="invalid_token"`) {
		t.Fatalf("a turn under a grant the ledger records revoked: %d %q, want 401 invalid_token", code, authn)
	}
	g, err := e.st.Grant(grant)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Revoked.Equal(revokedAt) {
		t.Fatalf("the Provider's grant: revoked %v, want at the ledger's time %v", g.Revoked, revokedAt)
	}
	rs := e.refusals()
	if len(rs) != 1 {
		t.Fatalf("refusals on record: %+v, want the turn refused under the grant", rs)
	}
	e.checkRefusal(rs[0], endedGrant{token: at, grant: g, ended: "was revoked at " + revokedAt.UTC().Format(time.RFC3339)}, paJWT, "message:send", "", e.clock())
	// The ledger holds this revocation: the Provider does not post it again.
	if rev := e.revocation(grant); rev != nil {
		t.Fatalf("a revocation of %s queued for the ledger that recorded it: %+v", grant, rev)
	}

	if code, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}, e.jwt()); code != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("refresh of a grant the ledger records revoked: %d %v", code, m)
	}
	page := e.accountPage(browser)
	if !strings.Contains(page, "revoked "+revokedAt.Format("2 Jan 2006 15:04 MST")) || strings.Contains(page, ">Revoke</button>") {
		t.Fatalf("the account page after the ledger's revocation, want the grant revoked at the ledger's time:\n%s", page)
	}
}

// A grant the ledger records revoked is shown revoked on the account
// page before the agent uses it again, and a refresh gets no token of it.
func TestTheAccountPageShowsTheLedgersRevocation(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth("orders:read")
	_, browser := e.signIn(da)
	if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	_, tok := e.poll(da)
	grant := claimsOf(t, tok["access_token"].(string)).GrantID
	if page := e.accountPage(browser); strings.Count(page, ">Revoke</button>") != 1 {
		t.Fatalf("the account page before the revocation, want the grant active:\n%s", page)
	}
	e.revokeInLedger(grant, e.clock())
	if page := e.accountPage(browser); !strings.Contains(page, "revoked ") || strings.Contains(page, ">Revoke</button>") {
		t.Fatalf("the account page after the ledger's revocation, want the grant revoked:\n%s", page)
	}
	if g, err := e.st.Grant(grant); err != nil || g.Active(e.clock()) {
		t.Fatalf("the Provider's grant %+v (%v), want it revoked", g, err)
	}
	if code, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}, e.jwt()); code != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("refresh of a grant the ledger records revoked: %d %v", code, m)
	}
}

// A revocation the ledger records while a turn runs keeps nothing of the
// turn, as a User's revocation does: no receipt, 401 invalid_token, and a
// refusal saying the grant ended while the turn ran.
func TestALedgerRevocationWhileTheTurnRuns(t *testing.T) {
	e := newOAuthEnv(t)
	a := &holdAgent{}
	e.p.cfg.Agent = a
	at := e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)
	grant := claimsOf(t, at).GrantID
	code, out := e.heldTurn(a, at, "", "m1", "please cancel A-5531", func() { e.revokeInLedger(grant, e.clock()) })
	if code != http.StatusUnauthorized {
		t.Fatalf("a turn whose grant the ledger revoked while it ran: %d %v, want 401", code, out)
	}
	if outbox, actionLog, _ := e.counts(); outbox != 1 || actionLog != 0 {
		t.Fatalf("after the turn: outbox %d, action log %d; want the refusal alone", outbox, actionLog)
	}
	if rs := e.refusals(); len(rs) != 1 || !strings.Contains(rs[0].Reason, grant) || !strings.Contains(rs[0].Reason, "while the turn ran") {
		t.Fatalf("refusals on record: %+v", rs)
	}
	if g, err := e.st.Grant(grant); err != nil || g.Revoked.IsZero() {
		t.Fatalf("the Provider's grant %+v (%v), want it revoked", g, err)
	}
}

// accountPage is the demo login's account page as browser sees it.
func (e *oauthEnv) accountPage(browser *http.Client) string {
	e.t.Helper()
	res, err := browser.Get(e.srv.URL + "/brands/shop/grants")
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// While the ledger's record cannot be read, a request under a delegation
// token is neither accepted nor refused: 500 INTERNAL with Retry-After,
// and nothing on record.
func TestAnUnreadableLedgerRecordDecidesNothing(t *testing.T) {
	e := newOAuthEnv(t)
	at := e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)
	e.p.cfg.Revocations = func(context.Context, string) (oauth.Recorded, error) {
		return oauth.Recorded{}, errors.New("row store unreachable")
	}
	code, out, h := e.send(at, "", "m1", "cancel order A-5531")
	if code != http.StatusInternalServerError || h.Get("Retry-After") == "" {
		t.Fatalf("a turn whose grant's revocation cannot be read: %d %v (Retry-After %q), want 500 with Retry-After", code, out, h.Get("Retry-After"))
	}
	if outbox, actionLog, _ := e.counts(); outbox != 0 || actionLog != 0 {
		t.Fatalf("after the turn: outbox %d, action log %d; want nothing", outbox, actionLog)
	}
}

// failOnce makes the ledger's record unreadable for the next read only.
func (e *oauthEnv) failOnce() {
	var failed atomic.Bool
	e.p.cfg.Revocations = func(ctx context.Context, grant string) (oauth.Recorded, error) {
		if failed.CompareAndSwap(false, true) {
			return oauth.Recorded{}, errors.New("row store unreachable")
		}
		return e.ledgerRevocation(ctx, grant)
	}
}

// A token request whose grant's revocation in the ledger cannot be read
// spends nothing: it is answered 500, and the agent's retry with the same
// refresh token, or the same device code, gets its tokens, the grant
// still active (not revoked as a refresh token's reuse, nor the code
// already redeemed).
func TestAnUnreadableLedgerRecordSpendsNoToken(t *testing.T) {
	t.Run("refresh token", func(t *testing.T) {
		e := newOAuthEnv(t)
		tok := e.deviceToken(ordersReadCancel, ordersReadCancel)
		grant := claimsOf(t, tok["access_token"].(string)).GrantID
		e.failOnce()
		form := url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}
		if code, m, _ := e.post("/oauth/token", form, e.jwt()); code != http.StatusInternalServerError {
			t.Fatalf("refresh while the ledger's record cannot be read: %d %v, want 500", code, m)
		}
		code, m, _ := e.post("/oauth/token", form, e.jwt())
		if code != 200 || m["refresh_token"] == nil || claimsOf(t, m["access_token"].(string)).GrantID != grant {
			t.Fatalf("the retry with the same refresh token: %d %v, want new tokens of grant %s", code, m, grant)
		}
		if g, err := e.st.Grant(grant); err != nil || !g.Active(e.clock()) {
			t.Fatalf("the grant after the retry: %+v (%v), want it active", g, err)
		}
	})
	t.Run("device code", func(t *testing.T) {
		e := newOAuthEnv(t)
		grant := claimsOf(t, e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)).GrantID
		// Consent skipped: the code redeems the User's existing grant.
		da := e.deviceAuth("orders:read")
		if _, err := e.st.DecideDevice(da["user_code"].(string), oauth.Decision{User: "acct-48213", Approve: true, Scopes: []string{"orders:read"}, GrantID: grant}, e.clock()); err != nil {
			t.Fatal(err)
		}
		e.failOnce()
		if code, m := e.poll(da); code != http.StatusInternalServerError {
			t.Fatalf("redeeming while the ledger's record cannot be read: %d %v, want 500", code, m)
		}
		code, m := e.poll(da)
		if code != 200 || claimsOf(t, m["access_token"].(string)).GrantID != grant {
			t.Fatalf("the retry with the same device code: %d %v, want tokens of grant %s", code, m, grant)
		}
		if g, err := e.st.Grant(grant); err != nil || !g.Active(e.clock()) {
			t.Fatalf("the grant after the retry: %+v (%v), want it active", g, err)
		}
	})
	t.Run("device code of a grant that carries another's scopes", func(t *testing.T) {
		// The older grant's revocation is read before its scopes are
		// carried.
		e := newOAuthEnv(t)
		first := claimsOf(t, e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)).GrantID
		da := e.deviceAuth("orders:cancel")
		if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:cancel"}); err != nil {
			t.Fatal(err)
		}
		e.failOnce()
		if code, m := e.poll(da); code != http.StatusInternalServerError {
			t.Fatalf("redeeming while the older grant's revocation cannot be read: %d %v, want 500", code, m)
		}
		if act := e.active("acct-48213"); len(act) != 1 || act[0].ID != first {
			t.Fatalf("active grants after the 500: %+v, want grant %s alone", act, first)
		}
		code, m := e.poll(da)
		if code != 200 || m["scope"] != "orders:read orders:cancel" {
			t.Fatalf("the retry with the same device code: %d %v, want a grant carrying orders:read", code, m)
		}
		if g, err := e.st.Grant(first); err != nil || g.ReplacedBy != claimsOf(t, m["access_token"].(string)).GrantID {
			t.Fatalf("the older grant after the retry: %+v (%v), want it replaced by the new", g, err)
		}
	})
	t.Run("device code of a new grant", func(t *testing.T) {
		// A grant made now has no revocation in the ledger to read.
		e := newOAuthEnv(t)
		da := e.deviceAuth("orders:read")
		if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
			t.Fatal(err)
		}
		e.failOnce()
		if code, m := e.poll(da); code != 200 {
			t.Fatalf("redeeming a code for a new grant while the ledger's record cannot be read: %d %v, want 200", code, m)
		}
	})
}

// A grant the ledger records revoked that the agent does not use again is
// not carried into the agent's next grant: the new grant holds what the
// User approved this time alone, and the revoked grant is revoked at the
// Provider as of the ledger's time rather than replaced, so the ledger's
// revocation stands for it and is not posted back.
func TestARevokedGrantsScopesAreNotCarried(t *testing.T) {
	e := newOAuthEnv(t)
	first := claimsOf(t, e.deviceToken([]string{"orders:cancel"}, []string{"orders:cancel"})["access_token"].(string)).GrantID
	revokedAt := e.clock().Truncate(time.Second)
	e.revokeInLedger(first, revokedAt)
	e.advance(time.Minute)
	tok := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
	if tok["scope"] != "orders:read" {
		t.Fatalf("the new grant's token: scope %q, want orders:read alone: grant %s, which held orders:cancel, is revoked in the ledger", tok["scope"], first)
	}
	g, err := e.st.Grant(first)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Revoked.Equal(revokedAt) || g.ReplacedBy != "" {
		t.Fatalf("the grant the ledger records revoked, at the Provider: %+v; want it revoked at the ledger's time %v, not replaced", g, revokedAt)
	}
	if rev := e.revocation(first); rev != nil {
		t.Fatalf("a revocation of %s queued for the ledger that recorded it: %+v", first, rev)
	}
	code, out, _ := e.send(tok["access_token"].(string), "", "m1", "please cancel order A-5531")
	if task, _ := out["task"].(map[string]any); code != 200 || task == nil || task["status"].(map[string]any)["state"] != "TASK_STATE_AUTH_REQUIRED" {
		t.Fatalf("cancelling under the new grant: %d %v, want a step-up for orders:cancel", code, out)
	}
}

// The consent page does not tell the User that the agent keeps the scopes
// of a grant the ledger records revoked.
func TestTheConsentPageDoesNotShowARevokedGrantAsCarried(t *testing.T) {
	e := newOAuthEnv(t)
	first := claimsOf(t, e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)).GrantID
	e.revokeInLedger(first, e.clock())
	if body := e.consentPage(e.deviceAuth("orders:cancel")); strings.Contains(body, `id="carried"`) {
		t.Fatalf("the consent page says the agent keeps the scopes of grant %s, which the ledger records revoked:\n%s", first, body)
	}
	if g, err := e.st.Grant(first); err != nil || g.Active(e.clock()) {
		t.Fatalf("the Provider's grant %+v (%v), want it revoked", g, err)
	}
}

// While the ledger's record cannot be read, the consent page cannot tell
// what the agent keeps of what the User allowed it before, and says so.
func TestTheConsentPageSaysWhenItCannotTellWhatIsCarried(t *testing.T) {
	e := newOAuthEnv(t)
	e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
	e.setLedgerDown(true)
	body := e.consentPage(e.deviceAuth("orders:cancel"))
	if strings.Contains(body, `id="carried"`) || !strings.Contains(body, `id="carried-unknown"`) {
		t.Fatalf("the consent page while the ledger's record cannot be read, want it to say it cannot tell what the agent keeps:\n%s", body)
	}
}

// A step-up approved after the ledger recorded the revocation of the grant
// its turn ran under does not carry that grant's scopes: the step-up's
// grant holds the missing scopes alone, and the agent's own request for
// all it needs is shown consent.
func TestAStepUpDoesNotCarryARevokedGrant(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	first := claimsOf(t, read).GrantID
	ticket, browser := e.consentForm(e.stepUpLink(read))
	// The ledger records the revocation while the User reads the page.
	e.revokeInLedger(first, e.clock())
	if code, body := e.decide(browser, ticket, "orders:cancel"); code != 200 {
		t.Fatalf("approving the step-up: %d %s", code, body)
	}
	act := e.active("acct-48213")
	if len(act) != 1 || !slices.Equal(act[0].Scopes, []string{"orders:cancel"}) || act[0].Extends != "" {
		t.Fatalf("active grants after the step-up: %+v; want the step-up's alone, with orders:cancel and nothing of grant %s, which the ledger records revoked", act, first)
	}
	da := e.deviceAuth("orders:read", "orders:cancel")
	pg, err := customer.New(janeEmail, janePassword).Answer(context.Background(), da["verification_uri_complete"].(string), customer.Decision{})
	if err != nil || pg.Title != "Allowed" {
		t.Fatalf("the agent's own request for orders:read and orders:cancel: %v %+v, want consent shown and allowed", err, pg)
	}
}

// While the ledger's record cannot be read, a step-up's approval, which
// would carry the scopes of the grant its turn ran under, is not recorded:
// the page says so, no grant is made, and the same form allows once the
// record can be read.
func TestAnUnreadableLedgerRecordApprovesNoStepUp(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	first := claimsOf(t, read).GrantID
	ticket, browser := e.consentForm(e.stepUpLink(read))
	e.setLedgerDown(true)
	if code, body := e.decide(browser, ticket, "orders:cancel"); code != http.StatusInternalServerError {
		t.Fatalf("approving the step-up while the ledger's record cannot be read: %d %s, want 500", code, body)
	}
	if act := e.active("acct-48213"); len(act) != 1 || act[0].ID != first {
		t.Fatalf("active grants after the approval failed: %+v, want grant %s alone", act, first)
	}
	e.setLedgerDown(false)
	if code, body := e.decide(browser, ticket, "orders:cancel"); code != 200 {
		t.Fatalf("the same form once the ledger's record can be read: %d %s", code, body)
	}
	var stepUp []oauth.Grant
	for _, g := range e.active("acct-48213") {
		if g.Extends == first {
			stepUp = append(stepUp, g)
		}
	}
	if len(stepUp) != 1 || !slices.Equal(stepUp[0].Scopes, []string{"orders:read", "orders:cancel"}) {
		t.Fatalf("the step-up's grants: %+v, want one carrying grant %s's orders:read", stepUp, first)
	}
}

// A step-up approved for the User without the consent page
// (pact.Provider.Approve) reads the ledger's record as the page does:
// while it cannot be read nothing is recorded, and a grant it records
// revoked is not carried.
func TestAStepUpApprovedWithoutThePageReadsTheLedger(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	first := claimsOf(t, read).GrantID
	u, err := url.Parse(e.stepUpLink(read))
	if err != nil {
		t.Fatal(err)
	}
	userCode := u.Query().Get("user_code")
	e.setLedgerDown(true)
	if err := e.pages.Approve(context.Background(), userCode, "acct-48213", []string{"orders:cancel"}); err == nil {
		t.Fatal("a step-up approved while the ledger's record cannot be read")
	}
	if act := e.active("acct-48213"); len(act) != 1 || act[0].ID != first {
		t.Fatalf("active grants after the approval failed: %+v, want grant %s alone", act, first)
	}
	e.setLedgerDown(false)
	e.revokeInLedger(first, e.clock())
	if err := e.pages.Approve(context.Background(), userCode, "acct-48213", []string{"orders:cancel"}); err != nil {
		t.Fatal(err)
	}
	if act := e.active("acct-48213"); len(act) != 1 || !slices.Equal(act[0].Scopes, []string{"orders:cancel"}) || act[0].Extends != "" {
		t.Fatalf("active grants after the step-up: %+v; want the step-up's alone, with orders:cancel and nothing of grant %s, which the ledger records revoked", act, first)
	}
}

// stepUpLink sends a turn that needs orders:cancel under a token that
// lacks it and returns the step-up's link.
func (e *oauthEnv) stepUpLink(token string) string {
	e.t.Helper()
	code, out, _ := e.send(token, "", "m-step-up", "please cancel A-5531")
	task, _ := out["task"].(map[string]any)
	if code != 200 || task == nil {
		e.t.Fatalf("step-up: %d %v", code, out)
	}
	return task["metadata"].(map[string]any)["pact.verificationUriComplete"].(string)
}

// consentForm signs Jane in through link and returns the consent form's
// ticket and her browser.
func (e *oauthEnv) consentForm(link string) (string, *http.Client) {
	e.t.Helper()
	assertion, c := e.signIn(map[string]any{"verification_uri_complete": link})
	res, err := c.PostForm(e.base+"/oauth/consent", url.Values{"assertion": {assertion}})
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	ticket := hidden(string(b), "ticket")
	if res.StatusCode != 200 || ticket == "" {
		e.t.Fatalf("consent: %d %s", res.StatusCode, b)
	}
	return ticket, c
}

// decide allows scopes with the consent form of ticket from browser.
func (e *oauthEnv) decide(browser *http.Client, ticket string, scopes ...string) (int, string) {
	e.t.Helper()
	res, err := browser.PostForm(e.base+"/oauth/decision", url.Values{"ticket": {ticket}, "decision": {"approve"}, "scope": scopes})
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Consent is not skipped for a grant the ledger records revoked, though
// it covers the request at the Provider until then: the consent page
// reads the ledger's record of the covering grant first, revokes the
// grant, and asks the User again. The grant the User then allows holds
// what they allowed this time alone, nothing of the revoked one.
func TestConsentIsAskedAgainForAGrantTheLedgerRevoked(t *testing.T) {
	e := newOAuthEnv(t)
	first := claimsOf(t, e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)).GrantID
	e.revokeInLedger(first, e.clock().Add(-time.Minute))
	da := e.deviceAuth("orders:read")
	ticket, browser := e.consentForm(da["verification_uri_complete"].(string))
	if code, body := e.decide(browser, ticket, "orders:read"); code != 200 {
		t.Fatalf("allowing orders:read: %d %s", code, body)
	}
	code, tok := e.poll(da)
	if code != 200 {
		t.Fatalf("token: %d %v", code, tok)
	}
	c := claimsOf(t, tok["access_token"].(string))
	if c.GrantID == first || c.Scope != "orders:read" {
		t.Fatalf("the token: grant %s, scope %q; want a new grant of orders:read alone: grant %s is revoked in the ledger", c.GrantID, c.Scope, first)
	}
	if g, err := e.st.Grant(first); err != nil || g.Active(e.clock()) || g.ReplacedBy != "" {
		t.Fatalf("the grant the ledger records revoked, at the Provider: %+v (%v); want it revoked, not replaced", g, err)
	}
}

// While the ledger's record cannot be read, the consent page cannot tell
// that the covering grant still stands: it asks the User rather than say
// "Already allowed".
func TestConsentIsAskedWhileTheLedgersRecordCannotBeRead(t *testing.T) {
	e := newOAuthEnv(t)
	e.deviceToken(ordersReadCancel, ordersReadCancel)
	e.setLedgerDown(true)
	if body := e.consentPage(e.deviceAuth("orders:read")); hidden(body, "ticket") == "" || !strings.Contains(body, `id="carried-unknown"`) {
		t.Fatalf("the consent page of a covered request while the ledger's record cannot be read, want the form:\n%s", body)
	}
}

// A code the consent page answered "Already allowed" is never left
// approved under a grant that ended before the agent redeemed it: the
// ledger recorded the grant's revocation in between. The agent's poll
// finds the revocation and answers authorization_pending, the code is
// pending again, and the User who opens its link again is asked; the
// grant they allow carries nothing of the revoked one. A denial then is
// on record with the agent's request JWT, as any denial is.
func TestACodeAllowedUnderAGrantRevokedSinceIsAskedAgain(t *testing.T) {
	for _, deny := range []bool{false, true} {
		t.Run(map[bool]string{false: "allowed", true: "denied"}[deny], func(t *testing.T) {
			e := newOAuthEnv(t)
			ctx := t.Context()
			jane := customer.New(janeEmail, janePassword)
			first := claimsOf(t, e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)).GrantID
			da := e.deviceAuth("orders:read")
			link := da["verification_uri_complete"].(string)
			if pg, err := jane.Answer(ctx, link, customer.Decision{}); err != nil || pg.Title != "Already allowed" {
				t.Fatalf("the covered request: %v %+v", err, pg)
			}
			e.revokeInLedger(first, e.clock())
			if code, m := e.poll(da); code != 400 || m["error"] != "authorization_pending" {
				t.Fatalf("the poll after grant %s was revoked in the ledger: %d %v, want 400 authorization_pending", first, code, m)
			}
			pg, err := jane.Answer(ctx, link, customer.Decision{Deny: deny})
			if want := map[bool]string{false: "Allowed", true: "Denied"}[deny]; err != nil || pg.Title != want {
				t.Fatalf("the same link again: %v %+v, want the consent form answered %q", err, pg, want)
			}
			code, m := e.poll(da)
			if deny {
				if code != 400 || m["error"] != "access_denied" {
					t.Fatalf("the poll after the User denied: %d %v, want access_denied", code, m)
				}
				var jwt string
				for _, r := range e.refusals() {
					if r.Action.Tool == "grant_delegation" {
						jwt = r.RequestJWT
					}
				}
				if jwt == "" {
					t.Fatal("the denial is not on record with the agent's request JWT")
				}
				return
			}
			if code != 200 {
				t.Fatalf("the poll after the User allowed: %d %v", code, m)
			}
			if c := claimsOf(t, m["access_token"].(string)); c.GrantID == first || c.Scope != "orders:read" {
				t.Fatalf("the token: grant %s, scope %q; want a new grant of orders:read alone", c.GrantID, c.Scope)
			}
		})
	}
}
