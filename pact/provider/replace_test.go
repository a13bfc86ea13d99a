package provider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brandlogin"
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
