package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/oauth"
)

var keepT0 = time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)

// turn runs messageId msg to the end in conversation id (started when
// isNew) at now, keeping reply.
func turn(t *testing.T, s *Store, id string, isNew bool, msg, reply string, now time.Time) {
	t.Helper()
	conv := Conversation{ID: id, Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: now}
	if _, stored, err := s.BeginTurn(conv, isNew, msg, now); err != nil || stored != nil {
		t.Fatalf("begin %s/%s: %s %v", id, msg, stored, err)
	}
	_, err := s.RecordTurn(TurnRecord{ContextID: id, MessageID: msg, Reply: json.RawMessage(reply), State: json.RawMessage(`{"step":1}`),
		ReceiptSHA256: "sha-" + id + "-" + msg, ActionLog: []ActionLogEntry{{Tool: "lookup_order", Target: "A-1", ArgsJSON: `{}`, At: now}}}, now)
	if err != nil {
		t.Fatal(err)
	}
}

// retry is a repeat of messageId msg in conversation id at now: the stored
// reply, or the error.
func retry(s *Store, id, msg string, now time.Time) (json.RawMessage, error) {
	_, stored, err := s.BeginTurn(Conversation{ID: id}, false, msg, now)
	if err == nil && stored == nil {
		// No reply kept: the Provider would run it; take the marker back.
		_ = s.AbandonTurn(id, msg)
	}
	return stored, err
}

// A stored reply answers a retry of its messageId while the conversation
// runs and for ReplyKept after it expired, at any time in between; then
// it is deleted by a later turn, with the conversation's state, and the
// conversation stays, closed, for ConversationKept.
func TestStoredRepliesArePrunedAfterTheirRetryWindow(t *testing.T) {
	s := openStore(t)
	turn(t, s, "c1", true, "m1", `{"message":"first"}`, keepT0)
	turn(t, s, "c1", false, "m2", `{"message":"second"}`, keepT0.Add(ConversationTTL-time.Minute))

	lastRetry := keepT0.Add(ConversationTTL + ReplyKept)
	turn(t, s, "c2", true, "m1", `{}`, lastRetry) // a later turn prunes what is due
	for _, m := range []string{"m1", "m2"} {
		if got, err := retry(s, "c1", m, lastRetry); err != nil || got == nil {
			t.Fatalf("a retry of %s at the end of its window: %s %v, want the stored reply", m, got, err)
		}
	}
	if c, err := s.Conversation("c1"); err != nil || !c.Ended(lastRetry) {
		t.Fatalf("the conversation at the end of the window: %+v %v, want it kept, ended", c, err)
	}

	late := lastRetry.Add(time.Second)
	turn(t, s, "c3", true, "m1", `{}`, late)
	for _, m := range []string{"m1", "m2"} {
		if got, err := s.StoredReply("c1", m); err != nil || got != nil {
			t.Fatalf("the reply to %s after its window: %s %v, want it pruned", m, got, err)
		}
	}
	c, err := s.Conversation("c1")
	if err != nil || !c.Closed || c.State != nil {
		t.Fatalf("the conversation after the window: %+v %v, want it kept closed, without its state", c, err)
	}
	if log, err := s.ActionLog("sha-c1-m1"); err != nil || log != nil {
		t.Fatalf("the action log of the first turn: %v %v, want it pruned with the replies", log, err)
	}
	if log, err := s.ActionLog("sha-c3-m1"); err != nil || len(log) != 1 {
		t.Fatalf("the action log of the latest turn: %v %v, want it kept", log, err)
	}
}

// An expired conversation is deleted ConversationKept after it expired:
// its contextId is then unknown.
func TestConversationsArePrunedAfterTheyExpire(t *testing.T) {
	s := openStore(t)
	turn(t, s, "c1", true, "m1", `{}`, keepT0)
	edge := keepT0.Add(ConversationTTL + ConversationKept)
	turn(t, s, "c2", true, "m1", `{}`, edge)
	if _, err := s.Conversation("c1"); err != nil {
		t.Fatalf("the conversation at the end of ConversationKept: %v, want it kept", err)
	}
	turn(t, s, "c3", true, "m1", `{}`, edge.Add(time.Second))
	if _, err := s.Conversation("c1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the conversation after ConversationKept: %v, want ErrNotFound", err)
	}
	if _, err := retry(s, "c1", "m1", edge.Add(time.Second)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a retry in the deleted conversation: %v, want ErrNotFound", err)
	}
	if n := keyCount(t, s, bReplies); n != 2 {
		t.Fatalf("%d stored replies, want the 2 of the conversations kept", n)
	}
}

// Each turn carries out at most keepPruneBatch steps of what is due, a
// conversation's replies counted one by one: a backlog goes over a few
// turns, none of which does it all.
func TestConversationPruningIsBoundedPerWrite(t *testing.T) {
	s := openStore(t)
	const n = keepPruneBatch + 40
	turn(t, s, "big", true, "m0", `{}`, keepT0)
	for i := 1; i < n; i++ {
		turn(t, s, "big", false, fmt.Sprint("m", i), `{}`, keepT0)
	}
	for i := range 20 {
		turn(t, s, fmt.Sprint("c", i), true, "m", `{}`, keepT0)
	}
	late := keepT0.Add(ConversationTTL + ConversationKept + time.Second)
	for i := 0; keyCount(t, s, bContexts) > i; i++ {
		before := keyCount(t, s, bReplies) + keyCount(t, s, bContexts) + keyCount(t, s, bActionLog)
		if _, _, err := s.BeginTurn(Conversation{ID: fmt.Sprint("late", i), Created: late}, true, "m", late); err != nil {
			t.Fatal(err)
		}
		after := keyCount(t, s, bReplies) + keyCount(t, s, bContexts) + keyCount(t, s, bActionLog) - 2
		if done := before - after; done > keepPruneBatch {
			t.Fatalf("write %d deleted %d keys, want at most %d", i, done, keepPruneBatch)
		}
		if i > 2*(2*n+40)/keepPruneBatch+2 {
			t.Fatalf("%d conversations kept after %d writes", keyCount(t, s, bContexts), i)
		}
	}
	if got, _ := s.StoredReply("big", "m0"); got != nil {
		t.Fatal("a reply of the deleted conversation is kept")
	}
}

// grantOf stores an active grant of Brand user id to https://pa.example
// for u1 created at now.
func grantOf(t *testing.T, s *Store, id string, now time.Time) oauth.Grant {
	t.Helper()
	g := oauth.Grant{ID: id, Brand: "acme", Client: "https://pa.example", AgentSub: "u1", User: "acct-" + id, Scopes: []string{"orders:read"},
		Created: now, Expires: now.Add(oauth.GrantTTL)}
	if err := s.update(func(tx *txn) error { return putGrant(tx.Tx, &g) }); err != nil {
		t.Fatal(err)
	}
	return g
}

// rotate issues a refresh token rt of g at now and spends it.
func rotate(t *testing.T, s *Store, g oauth.Grant, rt string, now time.Time) {
	t.Helper()
	if err := s.IssueRefreshToken(rt, g, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateRefreshToken(rt, "acme", "https://pa.example", "u1", now, successor(rt+"_next")); err != nil {
		t.Fatal(err)
	}
}

// A used refresh token is kept while its grant is active: presented
// again, late in the grant's life, it revokes the grant. Once the grant
// ended, its refresh tokens, used or not, are deleted by a later write.
func TestUsedRefreshTokensArePrunedWhenTheirGrantEnds(t *testing.T) {
	s := openStore(t)
	g := grantOf(t, s, "a2agrant_1", keepT0)
	rotate(t, s, g, "rt_1", keepT0)
	rotate(t, s, g, "rt_2", keepT0.Add(time.Hour))
	if err := s.IssueRefreshToken("rt_3", g, keepT0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	other := grantOf(t, s, "a2agrant_2", keepT0)
	rotate(t, s, other, "rt_other", keepT0)

	lateInLife := g.Expires.Add(-time.Minute)
	if err := s.IssueRefreshToken("rt_x", other, lateInLife); err != nil { // a write that prunes
		t.Fatal(err)
	}
	var oe *oauth.Error
	if _, err := s.RotateRefreshToken("rt_1", "acme", "https://pa.example", "u1", lateInLife, successor("rt_1_again")); !errors.As(err, &oe) || oe.Code != oauth.InvalidGrant {
		t.Fatalf("reuse late in the grant's life: %v, want invalid_grant", err)
	}
	if got, _ := s.Grant(g.ID); got.Revoked.IsZero() {
		t.Fatal("the reuse of a used refresh token did not revoke the grant")
	}

	if err := s.IssueRefreshToken("rt_y", other, lateInLife.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{"rt_1", "rt_1_next", "rt_2", "rt_2_next", "rt_3"} {
		if _, found, _ := s.RefreshTokenGrant(rt, "acme", "https://pa.example", "u1"); found {
			t.Fatalf("%s of the revoked grant is kept", rt)
		}
	}
	if n := keyCount(t, s, bRefresh); n != 4 || keyCount(t, s, bRefreshByGrant) != 4 {
		t.Fatalf("%d refresh tokens (%d indexed), want the other grant's 4", n, keyCount(t, s, bRefreshByGrant))
	}
	if _, found, _ := s.RefreshTokenGrant("rt_other", "acme", "https://pa.example", "u1"); !found {
		t.Fatal("a used refresh token of an active grant was pruned")
	}
}

// A grant is deleted GrantKept after it ended (expired, revoked or
// replaced), by a later write; until then it is kept as it ended.
func TestEndedGrantsArePruned(t *testing.T) {
	s := openStore(t)
	expired := grantOf(t, s, "a2agrant_expired", keepT0)
	revoked := grantOf(t, s, "a2agrant_revoked", keepT0)
	active := grantOf(t, s, "a2agrant_active", keepT0.Add(oauth.GrantTTL))
	revokedAt := keepT0.Add(time.Hour)
	if err := s.RevokeGrant("acme", revoked.User, revoked.ID, "revoked by the user", revokedAt); err != nil {
		t.Fatal(err)
	}
	write := func(rt string, now time.Time) {
		t.Helper()
		if err := s.IssueRefreshToken(rt, active, now); err != nil {
			t.Fatal(err)
		}
	}
	write("rt_1", revokedAt.Add(GrantKept))
	if g, err := s.Grant(revoked.ID); err != nil || g.Revoked.IsZero() {
		t.Fatalf("the revoked grant at the end of GrantKept: %+v %v, want it kept, revoked", g, err)
	}
	write("rt_2", revokedAt.Add(GrantKept+time.Second))
	if _, err := s.Grant(revoked.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the revoked grant after GrantKept: %v, want ErrNotFound", err)
	}
	if _, err := s.Grant(expired.ID); err != nil {
		t.Fatalf("the grant that expires later: %v", err)
	}
	write("rt_3", expired.Expires.Add(GrantKept+time.Second))
	if _, err := s.Grant(expired.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the expired grant after GrantKept: %v, want ErrNotFound", err)
	}
	if g, err := s.Grant(active.ID); err != nil || !g.Active(expired.Expires.Add(GrantKept+time.Second)) {
		t.Fatalf("the active grant: %+v %v", g, err)
	}
}

// Conversations, replies, the action log, grants and refresh tokens
// stored before they were indexed are indexed when the store is opened,
// and pruned like the others.
func TestRecordsStoredBeforeTheKeepIndexArePruned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	turn(t, s, "c_old", true, "m1", `{}`, keepT0)
	g := grantOf(t, s, "a2agrant_old", keepT0)
	rotate(t, s, g, "rt_old", keepT0)
	s = reopenWithout(t, s, path, bKeepDue, bRefreshByGrant)
	defer s.Close()
	late := keepT0.Add(oauth.GrantTTL + GrantKept + time.Second)
	turn(t, s, "c_new", true, "m1", `{}`, late)
	for range 2 {
		if err := s.IssueRefreshToken("rt_new", grantOf(t, s, "a2agrant_new", late), late); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Conversation("c_old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old conversation: %v, want it pruned", err)
	}
	if got, _ := s.StoredReply("c_old", "m1"); got != nil {
		t.Fatal("the old reply is kept")
	}
	if log, _ := s.ActionLog("sha-c_old-m1"); log != nil {
		t.Fatal("the old action log is kept")
	}
	if _, err := s.Grant(g.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old grant: %v, want it pruned", err)
	}
	if _, found, _ := s.RefreshTokenGrant("rt_old", "acme", "https://pa.example", "u1"); found || keyCount(t, s, bRefresh) != 1 {
		t.Fatalf("the old refresh token: found %v, %d kept; want it pruned", found, keyCount(t, s, bRefresh))
	}
}
