package provider

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
)

// A personal agent that, on a step-up, starts a new authorization of its
// own for what it holds and what it lacks (as pactagent does) rather than
// use the step-up's link makes a second grant for the same User. The
// Provider keeps one grant per Brand user, agent and agent sub (PACT §3.2:
// the User is the pair of the agent and its sub; §5.3 speaks of "an
// unexpired grant for (User, personal agent)"): revoking the agent on the
// account page stops it, whichever of its grants the User revokes.
func TestRevokingAGrantOfTheAgentStopsIt(t *testing.T) {
	for _, which := range []string{"older", "newer"} {
		t.Run(which, func(t *testing.T) {
			e := newOAuthEnv(t)
			first := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
			second := e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)
			g1, g2 := claimsOf(t, first).GrantID, claimsOf(t, second).GrantID
			if g1 == g2 {
				t.Fatalf("the second authorization, for a scope the first grant lacks, gave the first grant %s", g1)
			}
			revoke := map[string]string{"older": g1, "newer": g2}[which]
			if err := brandlogin.RevokeGrant(e.st, "shop", "acct-48213", revoke, e.clock()); err != nil {
				t.Fatal(err)
			}
			for _, tok := range []string{first, second} {
				if code, _, h := e.send(tok, "", "m-"+claimsOf(t, tok).GrantID, "status of A-5531"); code != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
					t.Fatalf("after the User revoked the %s grant %s, the agent's token of grant %s: %d, want 401 invalid_token",
						which, revoke, claimsOf(t, tok).GrantID, code)
				}
			}
			gs, err := e.st.UserGrants("shop", "acct-48213")
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gs {
				if g.Active(e.clock()) {
					t.Fatalf("grant %s %v still active after the User revoked the agent", g.ID, g.Scopes)
				}
			}
		})
	}
}

// active lists the User's active grants at the Provider's clock.
func (e *oauthEnv) active(user string) []oauth.Grant {
	e.t.Helper()
	gs, err := e.st.UserGrants("shop", user)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []oauth.Grant
	for _, g := range gs {
		if g.Active(e.clock()) {
			out = append(out, g)
		}
	}
	return out
}

// revocation is the revocation of grant id waiting for the ledger.
func (e *oauthEnv) revocation(id string) *pipeline.Revocation {
	e.t.Helper()
	for _, it := range e.outbox() {
		if it.Revocation != nil && it.Revocation.GrantID == id {
			return it.Revocation
		}
	}
	return nil
}

// A new grant for the same Brand user, personal agent and agent sub
// replaces the active one once the agent has its token: the older is
// revoked, on record for the ledger naming the grant that replaced it, and
// its token stops. The account page then lists one active grant for the
// agent.
func TestANewGrantOfTheSameAgentReplacesTheOld(t *testing.T) {
	e := newOAuthEnv(t)
	first := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	e.advance(time.Hour)
	second := e.deviceToken(ordersReadCancel, ordersReadCancel)
	g1, g2 := claimsOf(t, first).GrantID, claimsOf(t, second["access_token"].(string)).GrantID
	act := e.active("acct-48213")
	if len(act) != 1 || act[0].ID != g2 {
		var ids []string
		for _, g := range act {
			ids = append(ids, g.ID+" "+strings.Join(g.Scopes, ","))
		}
		t.Fatalf("active grants of the agent for the User: %v, want %s alone", ids, g2)
	}
	// Asked again for every scope it held, the new grant is the User's
	// new consent: a grant's whole lifetime from now.
	if !act[0].Expires.Equal(e.clock().Add(oauth.GrantTTL)) || !slices.Equal(act[0].Scopes, ordersReadCancel) {
		t.Fatalf("the new grant %+v: want %v for %s from now", act[0], ordersReadCancel, oauth.GrantTTL)
	}
	rev := e.revocation(g1)
	if rev == nil || !strings.Contains(rev.Note, "replaced by grant "+g2) || !rev.RevokedAt.Equal(e.clock()) {
		t.Fatalf("the older grant's revocation for the ledger: %+v, want one now naming %s", rev, g2)
	}
	if code, _, _ := e.send(first, "", "m1", "status of A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("the replaced grant's token: %d, want 401", code)
	}
	// An agent still sending the replaced grant's token is on record,
	// under that grant, saying which grant replaced it.
	if rs := e.refusals(); len(rs) != 1 || !strings.Contains(rs[0].Reason, g1+" (scopes orders:read), which was revoked at") ||
		!strings.Contains(rs[0].Reason, "replaced by grant "+g2) || rs[0].DelegationToken != first {
		t.Fatalf("refusals on record %+v, want the request under the replaced grant", rs)
	}
	// The account page says so.
	_, browser := e.signIn(e.deviceAuth("orders:read"))
	res, err := browser.Get(e.srv.URL + "/brands/shop/grants")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(page), "replaced by a newer grant") || strings.Count(string(page), ">Revoke</button>") != 1 {
		t.Fatalf("the account page lists %d Revoke buttons, want the new grant's alone, and the old replaced:\n%s", strings.Count(string(page), ">Revoke</button>"), page)
	}
	if code, out, _ := e.send(second["access_token"].(string), "", "m2", "status of A-5531"); code != 200 {
		t.Fatalf("the new grant's token: %d %v", code, out)
	}
	// Another of the agent's users (another sub) keeps its own grant.
	da := e.deviceAuthAs("u2", "orders:read")
	if err := e.approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	if code, tok := e.pollAs("u2", da); code != 200 {
		t.Fatalf("token for u2: %d %v", code, tok)
	}
	if n := len(e.active("acct-48213")); n != 2 {
		t.Fatalf("%d active grants once the agent's other user has one, want 2 (one per agent sub)", n)
	}
}

// An agent that repeats PACT §5.3 for the missing scopes alone, as §5.5
// says, gets a grant that carries the scopes it held: carried, not
// renewed, so the new grant ends when the old would have, and replaces it.
func TestANewGrantCarriesTheScopesItWasNotAskedFor(t *testing.T) {
	e := newOAuthEnv(t)
	first := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	g1, err := e.st.Grant(claimsOf(t, first).GrantID)
	if err != nil {
		t.Fatal(err)
	}
	e.advance(time.Hour)
	tok := e.deviceToken([]string{"orders:cancel"}, []string{"orders:cancel"})
	if tok["scope"] != "orders:read orders:cancel" {
		t.Fatalf("the new grant's token: scope %q, want the held scope carried", tok["scope"])
	}
	g2, err := e.st.Grant(claimsOf(t, tok["access_token"].(string)).GrantID)
	if err != nil {
		t.Fatal(err)
	}
	if !g2.Expires.Equal(g1.Expires) {
		t.Fatalf("the new grant ends %s, want %s, when the grant whose scope it carries would have", g2.Expires, g1.Expires)
	}
	if act := e.active("acct-48213"); len(act) != 1 || act[0].ID != g2.ID {
		t.Fatalf("active grants %+v, want %s alone", act, g2.ID)
	}
	// A scope the User unchecks when asked again is not carried.
	e.advance(time.Hour)
	da := e.deviceAuth("orders:read", "refunds:issue")
	if err := e.approve(da["user_code"].(string), "acct-48213", []string{"refunds:issue"}); err != nil {
		t.Fatal(err)
	}
	code, third := e.poll(da)
	if code != 200 || third["scope"] != "orders:cancel refunds:issue" {
		t.Fatalf("after unchecking orders:read: %d %v, want orders:cancel carried and refunds:issue", code, third)
	}
}

// pollAs polls the token endpoint once for a device code asked under sub.
func (e *oauthEnv) pollAs(sub string, da map[string]any) (int, map[string]any) {
	e.advance(6 * time.Second)
	code, m, _ := e.post("/oauth/token", map[string][]string{"client_id": {e.sc.PA.ID}, "grant_type": {oauth.DeviceGrantType}, "device_code": {da["device_code"].(string)}}, e.jwtAs(sub))
	return code, m
}
