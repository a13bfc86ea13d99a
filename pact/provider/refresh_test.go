package provider

import (
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
