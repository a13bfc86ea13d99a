package provider

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
)

// reasonOf is the A2A error reason of an answer, "" for none.
func reasonOf(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	d, _ := e["details"].([]any)
	if len(d) == 0 {
		return ""
	}
	r, _ := d[0].(map[string]any)["reason"].(string)
	return r
}

// A conversation runs for store.ConversationTTL; a new message in it then
// is answered UNSUPPORTED_OPERATION, while a retry of one of its
// messageIds gets the stored reply, receipt and all, for store.ReplyKept
// more. After that the retry is answered UNSUPPORTED_OPERATION (the turn
// is never run again), and once the conversation is deleted, INVALID_PARAMS.
func TestALateRetryGetsTheStoredReplyWithinItsWindow(t *testing.T) {
	e := newOAuthEnv(t)
	tokens := e.deviceToken(ordersReadCancel, ordersReadCancel)
	tok := tokens["access_token"].(string)
	// A grant outlives a conversation; its delegation token an hour.
	fresh := func() {
		t.Helper()
		code, out, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"},
			"refresh_token": {tokens["refresh_token"].(string)}}, e.jwt())
		if code != 200 {
			t.Fatalf("refresh: %d %v", code, out)
		}
		tokens, tok = out, out["access_token"].(string)
	}
	start := e.clock()
	code, first, _ := e.send(tok, "", "m1", "what is the status of order A-5531?")
	if code != 200 {
		t.Fatalf("first turn: %d %v", code, first)
	}
	ctxID := first["message"].(map[string]any)["contextId"].(string)
	if _, ok := first["message"].(map[string]any)["metadata"].(map[string]any)["pact.receipt"]; !ok {
		t.Fatalf("the first reply carries no receipt: %v", first)
	}
	queued := len(e.outbox())
	retryIs := func(what string, wantCode int, wantReason string, want map[string]any) {
		t.Helper()
		code, out, _ := e.send(tok, ctxID, "m1", "what is the status of order A-5531?")
		if code != wantCode || reasonOf(out) != wantReason || want != nil && !reflect.DeepEqual(out, want) {
			t.Fatalf("%s: %d %v, want %d %s", what, code, out, wantCode, wantReason)
		}
		if n := len(e.outbox()); n != queued {
			t.Fatalf("%s queued %d entries for the ledger, want none: the turn ran again", what, n-queued)
		}
	}
	prune := func() {
		t.Helper()
		fresh()
		if code, out, _ := e.send(tok, "", "other", "hello"); code != 200 { // a turn prunes what is due
			t.Fatalf("another conversation's turn: %d %v", code, out)
		}
		queued = len(e.outbox())
	}

	e.advance(start.Add(store.ConversationTTL).Sub(e.clock()) + time.Second)
	fresh()
	if code, out, _ := e.send(tok, ctxID, "m2", "hello again"); code != 400 || reasonOf(out) != "UNSUPPORTED_OPERATION" {
		t.Fatalf("a new message in the expired conversation: %d %v, want UNSUPPORTED_OPERATION", code, out)
	}
	e.advance(start.Add(store.ConversationTTL + store.ReplyKept).Sub(e.clock()))
	prune()
	retryIs("a retry at the end of its window", 200, "", first)

	e.advance(time.Second)
	prune()
	retryIs("a retry after its window", 400, "UNSUPPORTED_OPERATION", nil)

	e.advance(store.ConversationKept)
	prune()
	retryIs("a retry once the conversation is deleted", 400, "INVALID_PARAMS", nil)
}

// A used refresh token presented again while its grant is active revokes
// the grant, however late in the grant's life; once the grant ended its
// refresh tokens are deleted, and one presented is answered invalid_grant
// as any token of an ended grant is.
func TestARefreshTokenReusedLateInItsGrantsLifeRevokesIt(t *testing.T) {
	e := newOAuthEnv(t)
	tok := e.deviceToken(ordersReadCancel, ordersReadCancel)
	g, err := e.st.Grant(claimsOf(t, tok["access_token"].(string)).GrantID)
	if err != nil {
		t.Fatal(err)
	}
	refresh := func(rt string) (int, map[string]any) {
		t.Helper()
		code, out, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {rt}}, e.jwt())
		return code, out
	}
	used := tok["refresh_token"].(string)
	code, next := refresh(used)
	if code != 200 {
		t.Fatalf("refresh: %d %v", code, next)
	}
	e.advance(g.Expires.Sub(e.clock()) - time.Hour)
	if code, out := refresh(next["refresh_token"].(string)); code != 200 { // prunes what is due
		t.Fatalf("refresh late in the grant's life: %d %v", code, out)
	}
	if code, out := refresh(used); code != 400 || out["error"] != oauth.InvalidGrant {
		t.Fatalf("reuse: %d %v, want invalid_grant", code, out)
	}
	if g, _ := e.st.Grant(g.ID); g.Revoked.IsZero() {
		t.Fatal("the reuse of a used refresh token late in the grant's life did not revoke it")
	}
	e.advance(time.Second)
	other := e.deviceToken(ordersReadCancel, ordersReadCancel) // a later write prunes the ended grant's tokens
	if _, err := e.st.Grant(claimsOf(t, other["access_token"].(string)).GrantID); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := e.st.RefreshTokenGrant(used, "shop", e.sc.PA.ID, g.AgentSub); found {
		t.Fatal("a refresh token of the revoked grant is kept")
	}
	if code, out := refresh(used); code != 400 || out["error"] != oauth.InvalidGrant {
		t.Fatalf("the pruned token: %d %v, want invalid_grant", code, out)
	}
}
