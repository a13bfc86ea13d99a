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
	if _, err := e.l.RevokeGrant(ctx, grant, at.Add(-time.Minute), "the customer called", "admin-key", true); err != nil {
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

// A row the customer's grant covered, whose grant they revoked later, is
// answered as covered, and the reply says they withdrew the permission,
// and when, instead of telling them they can.
func TestACoveredActionUnderAGrantRevokedLaterSaysItWasWithdrawn(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	at := time.Date(2026, 10, 7, 13, 12, 0, 0, time.UTC)
	r := e.sc.Mint(pacttest.Spec{At: at, User: "acct-48213", Target: "A-5531"})
	e.append(t, r)
	if _, err := e.l.RevokeGrant(ctx, r.TokenClaims["grant_id"].(string), at.Add(19*time.Minute), "", "admin-key", true); err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	p := pulls(rep)
	if d := p[drill.PullDecision]; !d.Passed || !strings.Contains(d.Detail, "customer-authorized") {
		t.Fatalf("decision: %+v", d)
	}
	if g := p[drill.PullGrant]; !g.Passed || !strings.Contains(g.Detail, "revoked later, at 2026-10-07T13:31:00Z") {
		t.Fatalf("grant pull: %+v", g)
	}
	if strings.Contains(rep.Reply, "You can withdraw") || strings.Contains(rep.Reply, "You withdrew") || !strings.Contains(rep.Reply, "this permission ended on 7 October 2026 13:31 UTC") {
		t.Fatalf("reply: %s", rep.Reply)
	}
}

// A grant a newer grant of the same agent replaced is not said to have
// been withdrawn: the agent acts on under the newer one.
func TestACoveredActionUnderAReplacedGrantSaysItWasReplaced(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	at := time.Date(2026, 10, 7, 13, 12, 0, 0, time.UTC)
	r := e.sc.Mint(pacttest.Spec{At: at, User: "acct-48213", Target: "A-5531"})
	e.append(t, r)
	note := "replaced by grant a2agrant_NEW, a newer grant of the same personal agent for the same user"
	if _, err := e.l.RevokeGrant(ctx, r.TokenClaims["grant_id"].(string), at.Add(19*time.Minute), note, "writer-key", false); err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Reply, "On 7 October 2026 13:31 UTC this permission was replaced by a newer one you gave the same agent") || strings.Contains(rep.Reply, "ended") {
		t.Fatalf("reply: %s", rep.Reply)
	}
}

// The reply on a refusal tells the customer the request was refused, not
// the Provider's internal reason, which names grants and scopes.
func TestARefusalsReplyKeepsTheInternalReasonOut(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	reason := "asked beyond delegation grant a2agrant_eyn (scopes orders:read): answered with a step-up task for refunds:issue"
	if _, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-48213", Tool: "issue_refund", Target: "A-5531", Reason: reason, ObservedAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rep.Reply, "a2agrant_eyn") || strings.Contains(rep.Reply, "step-up") || !strings.Contains(rep.Reply, "was refused") || strings.Contains(rep.Reply, "It does not count") {
		t.Fatalf("reply: %s", rep.Reply)
	}
	if !strings.Contains(pulls(rep)[drill.PullReceiptRow].Detail, reason) {
		t.Fatalf("the support lead's pull lost the reason: %+v", pulls(rep)[drill.PullReceiptRow])
	}
}

// A writer's revocation and a later admin's give two times: the drill's
// grant pull says which is which, so a lead does not read two answers.
func TestTheGrantPullTellsAWritersRevocationFromAnAdmins(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 0, 0, time.UTC)
	e := newEnv(t, func() time.Time { return at.Add(time.Hour) })
	ctx := context.Background()
	r := e.sc.Mint(pacttest.Spec{At: at, User: "acct-48213", Target: "A-5531"})
	grant := r.TokenClaims["grant_id"].(string)
	if _, err := e.l.RevokeGrant(ctx, grant, at.Add(-2*time.Minute), "", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.RevokeGrant(ctx, grant, at.Add(-time.Minute), "the customer called", "admin-key", true); err != nil {
		t.Fatal(err)
	}
	if row := e.append(t, r); row.Status != ledger.Incident {
		t.Fatalf("row after the revocations: %s", row.Status)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	g := pulls(rep)[drill.PullGrant]
	if !strings.Contains(g.Detail, "revoked at 2026-10-07T13:10:00Z (reported by writer-key), the time in force for the record") ||
		!strings.Contains(g.Detail, "an admin revoked it at 2026-10-07T13:11:00Z, from when the embedded Provider refuses the grant") {
		t.Fatalf("grant pull: %s", g.Detail)
	}
}
