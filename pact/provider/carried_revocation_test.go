package provider

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/oauth"
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
			if stored, err := e.st.Grant(g2); err != nil || !slices.Equal(stored.CarriedFrom["orders:cancel"], []string{g1}) || len(stored.CarriedFrom) != 1 || !strings.Contains(tok2["scope"].(string), "orders:cancel") {
				t.Fatalf("the second grant: %+v, %v, scope %q; want it to carry orders:cancel from %s", stored, err, tok2["scope"], g1)
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

// A grant the User approved afresh for every scope its agent asked
// carries nothing of the grant it replaced: an admin's revocation of that
// one leaves it working, and a use of it reads the ledger's record of its
// own grant alone, however many grants came before it.
func TestAGrantThatCarriesNothingRestsOnNothingRevoked(t *testing.T) {
	e := newOAuthEnv(t)
	first := claimsOf(t, e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)).GrantID
	var tok map[string]any
	for range 40 {
		e.advance(time.Minute)
		tok = e.deviceToken([]string{"orders:read"}, []string{"orders:read"})
	}
	e.revokeInLedger(first, e.clock())
	e.advance(time.Second)
	reads := e.countReads()
	if code, out, _ := e.send(tok["access_token"].(string), "", "m1", "status of A-5531"); code != 200 {
		t.Fatalf("a turn under the 41st grant, approved afresh, after an admin revoked the first: %d %v, want 200", code, out)
	}
	if n := reads(); n != 2 {
		t.Errorf("one turn read the ledger's record %d times, want 2: its grant's, before and after", n)
	}
}

// Each grant that carries scopes of the one before names it and those it
// carried theirs from, oauth.MaxCarriedFrom at most, the newest: a turn
// reads the ledger's record of each, before and after, and no more, and
// an admin's revocation of any of them ends the grant.
func TestACarryingGrantNamesTheNewestItCarriesFrom(t *testing.T) {
	e := newOAuthEnv(t)
	ids := []string{claimsOf(t, e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)).GrantID}
	var tok map[string]any
	for range oauth.MaxCarriedFrom + 4 {
		e.advance(time.Minute)
		tok = e.deviceToken([]string{"orders:read"}, []string{"orders:read"}) // orders:cancel carried
		ids = append(ids, claimsOf(t, tok["access_token"].(string)).GrantID)
	}
	last, err := e.st.Grant(ids[len(ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ids[len(ids)-1-oauth.MaxCarriedFrom : len(ids)-1])
	slices.Reverse(want)
	if !slices.Equal(last.CarriedFrom["orders:cancel"], want) || !slices.Equal(last.Carried(), want) {
		t.Fatalf("the last grant carries orders:cancel through %v (reads %v), want the newest %d, newest first: %v", last.CarriedFrom, last.Carried(), oauth.MaxCarriedFrom, want)
	}
	reads := e.countReads()
	if code, out, _ := e.send(tok["access_token"].(string), "", "m1", "status of A-5531"); code != 200 {
		t.Fatalf("a turn: %d %v", code, out)
	}
	if n, want := reads(), 2*(1+oauth.MaxCarriedFrom); n != want {
		t.Errorf("one turn read the ledger's record %d times, want %d: its grant's and the %d it carries from, before and after", n, want, oauth.MaxCarriedFrom)
	}
	e.revokeInLedger(want[len(want)-1], e.clock()) // the oldest it names
	e.advance(time.Second)
	if code, out, _ := e.send(tok["access_token"].(string), "", "m2", "please cancel order A-5531"); code != 401 {
		t.Errorf("after an admin revoked %s, which the grant carries from: %d %v, want 401", want[len(want)-1], code, out)
	}
}

// countReads counts the Provider's reads of the ledger's record from now
// on: the returned func says how many.
func (e *oauthEnv) countReads() func() int {
	var mu sync.Mutex
	n := 0
	e.p.cfg.Revocations = func(ctx context.Context, grant string) (oauth.Recorded, error) {
		mu.Lock()
		n++
		mu.Unlock()
		return e.ledgerRevocation(ctx, grant)
	}
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// A scope the User allows again is renewed, not carried: a grant that
// carries one scope of the grant before it and renewed the other rests on
// the grant the first came from, not on the one the renewed scope was
// carried from before.
func TestARenewedScopeIsCarriedFromNothing(t *testing.T) {
	e := newOAuthEnv(t)
	g0 := claimsOf(t, e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)).GrantID
	e.advance(time.Minute)
	g1 := claimsOf(t, e.deviceToken([]string{"orders:cancel"}, []string{"orders:cancel"})["access_token"].(string)).GrantID // carries orders:read from g0
	e.advance(time.Minute)
	tok2 := e.deviceToken([]string{"orders:read"}, []string{"orders:read"}) // renews orders:read, carries orders:cancel from g1
	g2, err := e.st.Grant(claimsOf(t, tok2["access_token"].(string)).GrantID)
	if err != nil || !slices.Equal(g2.Carried(), []string{g1}) {
		t.Fatalf("the third grant: %+v, %v; want it to carry from %s alone", g2, err, g1)
	}
	e.revokeInLedger(g0, e.clock())
	e.advance(time.Second)
	if code, out, _ := e.send(tok2["access_token"].(string), "", "m1", "status of A-5531"); code != 200 {
		t.Fatalf("after an admin revoked %s, whose scope the grant renewed: %d %v, want 200", g0, code, out)
	}
	e.revokeInLedger(g1, e.clock())
	e.advance(time.Second)
	if code, out, _ := e.send(tok2["access_token"].(string), "", "m2", "status of A-5531"); code != 401 {
		t.Fatalf("after an admin revoked %s, whose scope the grant carries: %d %v, want 401", g1, code, out)
	}
}
