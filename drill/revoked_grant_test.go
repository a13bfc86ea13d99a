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

// A receipt is drilled against the revocation the ledger holds now. One
// recorded after its grant's revocation is the business's incident, and
// the grant pull says so. One recorded before a revocation that was
// reported later, as of a time before the action, keeps its write-time
// result (a writer key cannot flip old rows: docs/design/012), but the
// record now contradicts itself: the drill does not tell the customer
// their grant covered the action, and a person decides.
func TestAReceiptUnderARevokedGrantIsNotAnsweredAsCovered(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	at := time.Date(2026, 10, 7, 13, 12, 0, 0, time.UTC)

	// Recorded first, its grant revoked afterwards as of a minute before.
	r := e.sc.Mint(pacttest.Spec{At: at, User: "acct-48213", Target: "A-5531"})
	grant := r.TokenClaims["grant_id"].(string)
	if row := e.append(t, r); row.Status != ledger.Authorized {
		t.Fatalf("row before the revocation: %s", row.Status)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := pulls(rep)[drill.PullDecision]; !d.Passed || !strings.Contains(d.Detail, "customer-authorized") {
		t.Fatalf("before any revocation: %+v", d)
	}
	if _, err := e.l.RevokeGrant(ctx, grant, at.Add(-time.Minute), "the customer called", "admin-key"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.r.Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	p := pulls(rep)
	if g := p[drill.PullGrant]; g.Passed || !strings.Contains(g.Detail, "revoked at 2026-10-07T13:11:00Z") || !strings.Contains(g.Detail, "admin-key") || !strings.Contains(g.Detail, "after this row was recorded") {
		t.Fatalf("grant pull after a later revocation: %+v", g)
	}
	if d := p[drill.PullDecision]; d.Passed || !strings.Contains(d.Detail, "needs a person") || !strings.Contains(d.Detail, "revocation as of 2026-10-07T13:11:00Z") {
		t.Fatalf("decision after a later revocation: %+v", d)
	}
	if strings.Contains(rep.Reply, "under that permission") || strings.Contains(rep.Reply, "allowed") {
		t.Fatalf("the reply tells the customer their grant covered the action: %s", rep.Reply)
	}

	// Recorded after the revocation: an incident, and the grant pull
	// names the revocation it came after.
	r2 := e.sc.Mint(pacttest.Spec{At: at.Add(time.Minute), User: "acct-48213", Target: "A-5532"})
	if row := e.append(t, r2); row.Status != ledger.Incident {
		t.Fatalf("row after the revocation: %s", row.Status)
	}
	rep, err = e.r.Run(ctx, drill.Request{Target: "A-5532", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	p = pulls(rep)
	if g := p[drill.PullGrant]; g.Passed || !strings.Contains(g.Detail, "revoked at 2026-10-07T13:11:00Z") {
		t.Fatalf("grant pull after the revocation: %+v", g)
	}
	if d := p[drill.PullDecision]; !d.Passed || !strings.Contains(d.Detail, "the dispute flips") {
		t.Fatalf("decision after the revocation: %+v", d)
	}
	if !strings.Contains(rep.Reply, "after the permission you gave had been revoked") {
		t.Fatalf("reply after the revocation: %s", rep.Reply)
	}
}
