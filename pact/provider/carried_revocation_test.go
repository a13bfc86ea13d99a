package provider

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// An admin revokes in the ledger the grant a disputed receipt names; the
// agent may have been given a newer grant since, which replaced that one
// and carries its scopes. The admin's revocation of the replaced grant
// ends the newer one at its next use, as a User's revocation of it does:
// the agent's turn gets 401 and its refresh invalid_grant, and the newer
// grant's revocation is queued for the ledger, which holds none of it.
// The Provider's own signed statement of the replacement does not end
// the newer grant, an admin's revocation as of a later time leaves it
// working until then, and a grant the User approves afresh after the
// revocation rests on nothing revoked and works.
func TestALedgerRevocationOfAReplacedGrantEndsTheGrantThatReplacedIt(t *testing.T) {
	for _, how := range []string{"ledger", "user"} {
		t.Run(how, func(t *testing.T) {
			e := newOAuthEnv(t)
			g1 := claimsOf(t, e.deviceToken([]string{"orders:cancel"}, []string{"orders:cancel"})["access_token"].(string)).GrantID
			e.advance(time.Minute)
			tok2 := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
			g2 := claimsOf(t, tok2["access_token"].(string)).GrantID
			if stored, err := e.st.Grant(g2); err != nil || len(stored.Replaces) != 1 || stored.Replaces[0] != g1 || !strings.Contains(tok2["scope"].(string), "orders:cancel") {
				t.Fatalf("the second grant: %+v, %v, scope %q; want it to replace %s and carry orders:cancel", stored, err, tok2["scope"], g1)
			}
			// The Provider's pipeline posts the replaced grant's
			// revocation with its own signed statement: that stops the
			// replaced grant, not the grant that replaced it.
			replaced, err := e.st.Grant(g1)
			if err != nil || replaced.ReplacedBy != g2 {
				t.Fatalf("the first grant: %+v, %v; want it replaced by %s", replaced, err, g2)
			}
			e.statedInLedger(g1, replaced.Revoked)
			e.advance(time.Minute)
			if code, out, _ := e.send(tok2["access_token"].(string), "", "m0", "status of A-5531"); code != 200 {
				t.Fatalf("after the Provider's own statement of the replacement of %s: %d %v, want 200", g1, code, out)
			}
			switch how {
			case "ledger":
				// As of an hour from now: nothing changes yet.
				e.revokeInLedger(g1, e.clock().Add(time.Hour))
				if code, out, _ := e.send(tok2["access_token"].(string), "", "m0b", "status of A-5531"); code != 200 {
					t.Fatalf("before the admin's revocation of %s takes effect: %d %v", g1, code, out)
				}
				e.revokeInLedger(g1, e.clock()) // ledgerctl revoke g1, by an admin
			case "user":
				if err := e.st.RevokeGrant("shop", "acct-48213", g1, "user", e.clock()); err != nil {
					t.Fatal(err)
				}
			}
			e.advance(time.Second)
			if code, out, _ := e.send(tok2["access_token"].(string), "", "m1", "please cancel order A-5531"); code != 401 {
				t.Errorf("a turn under %s, which replaced %s and carries its scopes, after %s's revocation of %s: %d %v, want 401", g2, g1, how, g1, code, out)
			}
			code, out, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {tok2["refresh_token"].(string)}}, e.jwt())
			if code != 400 || out["error"] != "invalid_grant" {
				t.Errorf("a refresh of %s: %d %v, want 400 invalid_grant", g2, code, out)
			}
			if g, err := e.st.Grant(g2); err != nil || g.Active(e.clock()) {
				t.Errorf("%s at the Provider: %+v, %v; want it revoked", g2, g, err)
			}
			queued := false
			for _, it := range e.outbox() {
				queued = queued || it.Revocation != nil && it.Revocation.GrantID == g2
			}
			if !queued {
				t.Errorf("no revocation of %s waits for the ledger: %+v", g2, e.outbox())
			}
			// Approved afresh: a grant that replaced nothing active.
			e.advance(time.Minute)
			tok3 := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
			if code, out, _ := e.send(tok3["access_token"].(string), "", "m2", "status of A-5531"); code != 200 {
				t.Errorf("a turn under a grant approved after the revocation: %d %v, want 200", code, out)
			}
		})
	}
}

// A step-up's grant carries the scopes of the grant it extends and is
// revoked with it: a revocation the ledger records of the extended grant
// ends the step-up's grant too.
func TestALedgerRevocationOfAnExtendedGrantEndsTheStepUpsGrant(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	_, tok := e.stepUpThroughLink(read)
	first, stepped := claimsOf(t, read).GrantID, claimsOf(t, tok["access_token"].(string)).GrantID
	if code, out, _ := e.send(tok["access_token"].(string), "", "m2", "please cancel order A-5531"); code != 200 {
		t.Fatalf("a turn under the step-up's grant %s: %d %v", stepped, code, out)
	}
	e.advance(time.Minute)
	e.revokeInLedger(first, e.clock())
	e.advance(time.Second)
	if code, out, _ := e.send(tok["access_token"].(string), "", "m3", "please cancel order A-5531"); code != 401 {
		t.Errorf("a turn under the step-up's grant %s after the ledger revoked %s, which it extends: %d %v, want 401", stepped, first, code, out)
	}
}
