package provider

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/oauth"
)

// revocationsQueued counts the revocations waiting for the ledger.
func (e *oauthEnv) revocationsQueued() int {
	e.t.Helper()
	n := 0
	for _, it := range e.outbox() {
		if it.Revocation != nil {
			n++
		}
	}
	return n
}

// A refresh whose answer the personal agent never got (lost on its way)
// is retried with the same refresh token: within oauth.RefreshGrace its
// holder is answered with new tokens, the grant is not revoked and the
// ledger is told of no leak. The refresh token the lost answer carried is
// retired: presented, it is a leak. A spent token presented after the
// grace revokes the grant, as ever.
func TestARefreshRetriedAfterALostAnswerIsAnsweredAgain(t *testing.T) {
	e := newOAuthEnv(t)
	tok := e.deviceToken(ordersReadCancel, ordersReadCancel)
	grant := claimsOf(t, tok["access_token"].(string)).GrantID
	rt := tok["refresh_token"].(string)
	code, lost := e.refreshAs("u1", rt)
	if code != 200 {
		t.Fatalf("refresh: %d %v", code, lost)
	}
	e.advance(2 * time.Second)
	code, again := e.refreshAs("u1", rt)
	if code != 200 || again["refresh_token"] == lost["refresh_token"] || claimsOf(t, again["access_token"].(string)).GrantID != grant {
		t.Fatalf("the retry: %d %v, want new tokens of grant %s", code, again, grant)
	}
	if g, _ := e.st.Grant(grant); !g.Revoked.IsZero() || e.revocationsQueued() != 0 {
		t.Fatalf("the retry revoked the grant (%v) or queued %d revocations", g.Revoked, e.revocationsQueued())
	}
	e.advance(time.Second)
	if code, next := e.refreshAs("u1", again["refresh_token"].(string)); code != 200 {
		t.Fatalf("refresh with the retry's token: %d %v", code, next)
	}

	e.advance(oauth.RefreshGrace)
	if code, out := e.refreshAs("u1", rt); code != 400 || out["error"] != oauth.InvalidGrant {
		t.Fatalf("a spent token past the grace: %d %v, want invalid_grant", code, out)
	}
	if g, _ := e.st.Grant(grant); g.Revoked.IsZero() || e.revocationsQueued() != 1 {
		t.Fatalf("a spent token past the grace: grant revoked at %v, %d revocations queued; want it revoked and the ledger told", g.Revoked, e.revocationsQueued())
	}
}

// The refresh token a lost answer carried, retired by the retry, revokes
// the grant when presented: only the retry's chain is live.
func TestARefreshTokenRetiredByARetryIsALeak(t *testing.T) {
	e := newOAuthEnv(t)
	tok := e.deviceToken(ordersReadCancel, ordersReadCancel)
	grant := claimsOf(t, tok["access_token"].(string)).GrantID
	rt := tok["refresh_token"].(string)
	_, lost := e.refreshAs("u1", rt)
	e.advance(time.Second)
	if code, again := e.refreshAs("u1", rt); code != 200 {
		t.Fatalf("the retry: %d %v", code, again)
	}
	e.advance(time.Second)
	if code, out := e.refreshAs("u1", lost["refresh_token"].(string)); code != 400 || out["error"] != oauth.InvalidGrant {
		t.Fatalf("the retired token: %d %v, want invalid_grant", code, out)
	}
	if g, _ := e.st.Grant(grant); g.Revoked.IsZero() || e.revocationsQueued() != 1 {
		t.Fatalf("the retired token: grant revoked at %v, %d revocations queued; want it revoked and the ledger told", g.Revoked, e.revocationsQueued())
	}
}

// A device code whose tokens could not be issued (the delegation token
// not signed, the refresh token not stored) is not spent: the agent's
// older grant still works and is not replaced, the ledger is told of no
// revocation, and the agent's next poll redeems the code.
func TestADeviceCodeWhoseTokensWereNotIssuedIsRedeemedByTheRetry(t *testing.T) {
	e := newOAuthEnv(t)
	old := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
	da := e.deviceAuth("orders:read", "orders:cancel")
	if err := e.approve(da["user_code"].(string), "acct-48213", ordersReadCancel); err != nil {
		t.Fatal(err)
	}
	dc := da["device_code"].(string)
	held, err := e.st.DeviceCodeGrants(dc, "shop", e.sc.PA.ID, "u1", e.clock())
	if err != nil || len(held) != 1 {
		t.Fatalf("the grants the code rests on: %v %v", held, err)
	}
	e.advance(6 * time.Second)
	unsigned := errors.New("the signing key is unreadable")
	failing := func(oauth.Grant) (string, error) { return "", unsigned }
	if _, err := e.st.RedeemDeviceCode(dc, "shop", e.sc.PA.ID, "u1", []string{held[0].ID}, e.clock(), failing); !errors.Is(err, unsigned) {
		t.Fatalf("a redemption whose tokens were not issued: %v", err)
	}
	if code, out, _ := e.send(old["access_token"].(string), "", "m1", "status of A-5531"); code != 200 {
		t.Fatalf("the older grant's token after a redemption that failed: %d %v", code, out)
	}
	if n := e.revocationsQueued(); n != 0 {
		t.Fatalf("%d revocations queued, want none", n)
	}
	code, tok := e.poll(da)
	if code != 200 || claimsOf(t, tok["access_token"].(string)).Scope != "orders:read orders:cancel" {
		t.Fatalf("the retry: %d %v, want the new grant's tokens", code, tok)
	}
	if code, _, _ := e.send(old["access_token"].(string), "", "m2", "status of A-5531"); code != 401 {
		t.Fatalf("the older grant's token once replaced: %d, want 401", code)
	}
}

// A refresh may ask for some of the grant's scopes (RFC 6749 §6): the
// delegation token then carries those alone, the grant keeps them all,
// and a turn under the token acts within the token's scopes (an action
// needing another is answered with a step-up, and no receipt names it).
// Asking for a scope the grant does not hold, on the card or not, is
// invalid_scope and spends nothing.
func TestARefreshMayNarrowTheScopeButNotWidenIt(t *testing.T) {
	e := newOAuthEnv(t)
	tok := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
	grant := claimsOf(t, tok["access_token"].(string)).GrantID
	rt := tok["refresh_token"].(string)
	refresh := func(rt, scope string) (int, map[string]any) {
		t.Helper()
		code, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {rt}, "scope": {scope}}, e.jwt())
		return code, m
	}
	for _, scope := range []string{"orders:read orders:cancel", "orders:read admin:all"} {
		if code, m := refresh(rt, scope); code != 400 || m["error"] != oauth.InvalidScope {
			t.Fatalf("a refresh asking for %q of a grant of orders:read: %d %v, want invalid_scope", scope, code, m)
		}
	}
	code, both := refresh(rt, "")
	if code != 200 || both["scope"] != "orders:read" {
		t.Fatalf("the refresh token after invalid_scope answers: %d %v, want it unspent", code, both)
	}
	if g, _ := e.st.Grant(grant); !g.Revoked.IsZero() {
		t.Fatal("a refresh answered invalid_scope revoked the grant")
	}

	e.advance(time.Minute)
	wide := e.deviceToken(ordersReadCancel, ordersReadCancel) // replaces the grant above
	grant = claimsOf(t, wide["access_token"].(string)).GrantID
	code, narrow := refresh(wide["refresh_token"].(string), "orders:read")
	if c := claimsOf(t, narrow["access_token"].(string)); code != 200 || narrow["scope"] != "orders:read" || c.Scope != "orders:read" || c.GrantID != grant {
		t.Fatalf("a refresh asking for orders:read of a grant of %v: %d %v", ordersReadCancel, code, narrow)
	}
	if g, _ := e.st.Grant(grant); !slices.Equal(g.Scopes, ordersReadCancel) {
		t.Fatalf("the grant after a narrower refresh holds %v, want %v", g.Scopes, ordersReadCancel)
	}
	at := narrow["access_token"].(string)
	code, out, _ := e.send(at, "", "m1", "please cancel A-5531")
	task, _ := out["task"].(map[string]any)
	if code != 200 || task == nil || task["status"].(map[string]any)["state"] != "TASK_STATE_AUTH_REQUIRED" {
		t.Fatalf("cancelling under a token of orders:read: %d %v, want a step-up", code, out)
	}
	code, out, _ = e.send(at, "", "m2", "what is the status of A-5531?")
	msg, _ := out["message"].(map[string]any)
	if code != 200 || msg == nil {
		t.Fatalf("a lookup under a token of orders:read: %d %v", code, out)
	}
	claims := msg["metadata"].(map[string]any)["pact.receipt"].(map[string]any)["claims"].(map[string]any)
	if used := claims["scopesUsed"].([]any); len(used) != 1 || used[0] != "orders:read" {
		t.Fatalf("the receipt's scopesUsed %v, want orders:read", used)
	}
	code, full := refresh(narrow["refresh_token"].(string), "")
	if code != 200 || !slices.Equal(strings.Fields(full["scope"].(string)), ordersReadCancel) {
		t.Fatalf("a refresh asking for no scope after a narrower one: %d %v, want the grant's", code, full)
	}
}

// The RFC 8414 metadata names the one client authentication the token
// endpoint accepts, the personal agent's JWT as Authorization: Bearer
// (PACT §5), and no other: a client authenticating with private_key_jwt
// (RFC 7523, a client_assertion in the body) is refused.
func TestTheMetadataNamesTheClientAuthenticationAccepted(t *testing.T) {
	e := newOAuthEnv(t)
	_, md := e.get(e.base + "/oauth/.well-known/oauth-authorization-server")
	if got, _ := md["token_endpoint_auth_methods_supported"].([]any); len(got) != 1 || got[0] != clientAuthPAJWT {
		t.Fatalf("token_endpoint_auth_methods_supported %v, want [%s]", md["token_endpoint_auth_methods_supported"], clientAuthPAJWT)
	}
	da := e.deviceAuth("orders:read")
	if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	e.advance(6 * time.Second)
	form := url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {da["device_code"].(string)},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {e.jwt()}}
	if code, m, _ := e.post("/oauth/token", form, ""); code != 401 {
		t.Fatalf("private_key_jwt: %d %v, want 401", code, m)
	}
	if code, m := e.poll(da); code != 200 {
		t.Fatalf("the personal agent's JWT as Bearer: %d %v", code, m)
	}
}
