package drill_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A refusal posted with a delegation token that verified is drilled as
// under its grant: the grant pull names the grant the Brand signed for
// and its revocation, the agent pull the agent's own signature, and the
// reply tells the customer their agent asked after they had revoked it,
// and was refused. One without a token says no grant was presented.
func TestARefusalAfterARevocationIsDrilledUnderItsGrant(t *testing.T) {
	observed := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	r := e.sc.Mint(pacttest.Spec{At: observed, User: "acct-48213", Target: "A-5531"})
	grant := r.TokenClaims["grant_id"].(string)
	if _, err := e.l.RevokeGrant(ctx, grant, observed.Add(-time.Minute), "the customer revoked it", "admin"); err != nil {
		t.Fatal(err)
	}
	in := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: e.sc.PA.ID, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken,
		Tool: "cancel_order", Target: "A-5531", Reason: "request under delegation grant " + grant + ", which was revoked", ObservedAt: observed}
	if _, err := e.l.AppendRefusal(ctx, in); err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	p := pulls(rep)
	if g := p[drill.PullGrant]; !g.Passed || !strings.Contains(g.Detail, "delegation token of grant "+grant) || !strings.Contains(g.Detail, "grant revoked at 2026-10-07T13:11:44Z") {
		t.Fatalf("grant pull: %+v", g)
	}
	if a := p[drill.PullAgentIdentity]; !strings.Contains(a.Detail, "signed by "+e.sc.PA.ID+" itself") {
		t.Fatalf("agent pull: %+v", a)
	}
	if d := p[drill.PullDecision]; !d.Passed || !strings.Contains(d.Detail, "the agent used grant "+grant+" after it was revoked") {
		t.Fatalf("decision: %+v", d)
	}
	if !strings.Contains(rep.Reply, "after you had revoked its permission (on 7 October 2026 13:11 UTC), and we refused it") {
		t.Fatalf("reply: %s", rep.Reply)
	}

	// Without a token, a refusal names a customer no signature vouches for.
	in.DelegationToken, in.Target, in.ObservedAt = "", "A-88213", observed.Add(time.Second)
	if _, err := e.l.AppendRefusal(ctx, in); err != nil {
		t.Fatal(err)
	}
	rep, err = e.r.Run(ctx, drill.Request{Target: "A-88213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if g := pulls(rep)[drill.PullGrant]; !strings.Contains(g.Detail, "no grant was presented") || strings.Contains(rep.Reply, "after you had revoked") {
		t.Fatalf("a refusal without a token: grant pull %+v, reply %s", g, rep.Reply)
	}
}
