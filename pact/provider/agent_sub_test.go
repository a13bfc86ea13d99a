package provider

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/oauth"
)

// sendAs sends a message under the delegation token with the personal
// agent's JWT for its User sub, and returns the status and the
// WWW-Authenticate header.
func (e *oauthEnv) sendAs(sub, delegation, msgID string) (int, string) {
	e.t.Helper()
	body := `{"message":{"messageId":"` + msgID + `","role":"ROLE_USER","parts":[{"text":"what is the status of A-5531?"}]}}`
	req, _ := http.NewRequest("POST", e.base+"/message:send", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.jwtAs(sub))
	req.Header.Set("X-A2A-User-Delegation", "Bearer "+delegation)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header.Get("WWW-Authenticate")
}

// refreshAs presents a refresh token with the personal agent's JWT for its
// User sub.
func (e *oauthEnv) refreshAs(sub, refreshToken string) (int, map[string]any) {
	e.t.Helper()
	code, m, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}, e.jwtAs(sub))
	return code, m
}

// A grant is the Brand user's for one of the personal agent's users (PACT
// §3.2: the agent's User is the pair of the agent and its sub). The
// device code asked under sub u1, the delegation token of the grant it
// makes and its refresh token are refused with the agent's JWT for u2, as
// a code or token of another client is (invalid_grant; 401
// invalid_token), and are left as they were: u1 still redeems the code,
// sends with the token and refreshes with the refresh token.
func TestAGrantIsRefusedUnderAnotherAgentSub(t *testing.T) {
	e := newOAuthEnv(t)
	da := e.deviceAuth(ordersReadCancel...)
	if err := e.approve(da["user_code"].(string), "acct-48213", ordersReadCancel); err != nil {
		t.Fatal(err)
	}
	if code, m := e.pollAs("u2", da); code != http.StatusBadRequest || m["error"] != oauth.InvalidGrant {
		t.Fatalf("device code asked under u1, redeemed under u2: %d %v, want 400 invalid_grant", code, m)
	}
	code, tok := e.pollAs("u1", da)
	if code != http.StatusOK {
		t.Fatalf("device code redeemed under u1 after u2 tried: %d %v", code, tok)
	}
	at, rt := tok["access_token"].(string), tok["refresh_token"].(string)

	if code, auth := e.sendAs("u2", at, "m1"); code != http.StatusUnauthorized || auth != invalidToken {
		t.Fatalf("delegation token of u1's grant sent under u2: %d %q, want 401 %s", code, auth, invalidToken)
	}
	if code, _ := e.sendAs("u1", at, "m2"); code != http.StatusOK {
		t.Fatalf("delegation token sent under u1: %d", code)
	}

	if code, m := e.refreshAs("u2", rt); code != http.StatusBadRequest || m["error"] != oauth.InvalidGrant {
		t.Fatalf("refresh token of u1's grant presented under u2: %d %v, want 400 invalid_grant", code, m)
	}
	if code, m := e.refreshAs("u1", rt); code != http.StatusOK {
		t.Fatalf("refresh under u1 after u2 presented the token: %d %v, want it unspent and the grant active", code, m)
	}
}
