package drill_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
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
	if _, err := e.l.RevokeGrant(ctx, grant, observed.Add(-time.Minute), "the customer revoked it", "admin", true); err != nil {
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
	if !strings.Contains(rep.Reply, "after its permission had been revoked (on 7 October 2026 13:11 UTC), and we refused it") || strings.Contains(rep.Reply, "you had revoked") {
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

// A refusal under a revoked grant's token that carries no request JWT the
// agent signed (none posted, or one whose signature fails) is not the
// agent's act: any writer that has seen the token can post one. The drill
// says a request under the revoked permission was refused, never that the
// customer's agent asked.
func TestARefusalWithoutTheAgentsSignatureDoesNotBlameTheAgent(t *testing.T) {
	observed := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	r := e.sc.Mint(pacttest.Spec{At: observed, User: "acct-48213", Target: "A-5531"})
	grant := r.TokenClaims["grant_id"].(string)
	if _, err := e.l.RevokeGrant(ctx, grant, observed.Add(-time.Minute), "the customer revoked it", "admin", true); err != nil {
		t.Fatal(err)
	}
	for i, request := range []string{"", pacttest.TamperSignature(r.RequestJWT)} {
		target := []string{"A-7001", "A-7002"}[i]
		in := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: e.sc.PA.ID, RequestJWT: request, DelegationToken: r.DelegationToken,
			Tool: "issue_refund", Target: target, Reason: "request under delegation grant " + grant + ", which was revoked", ObservedAt: observed.Add(time.Duration(i+1) * time.Second)}
		row, err := e.l.AppendRefusal(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if row.GrantID != grant {
			t.Fatalf("%s: the refusal is not under the grant its token names: %+v", target, row)
		}
		for _, c := range row.Verifier.Checks {
			if c.Name == verifier.CheckBindings && c.Result == verifier.Pass {
				t.Fatalf("%s: bindings passed on a request JWT that did not verify: %s", target, c.Detail)
			}
		}
		rep, err := e.r.Run(ctx, drill.Request{Target: target, Principal: "acct-48213"}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		p := pulls(rep)
		if d := p[drill.PullDecision]; !d.Passed || strings.Contains(d.Detail, "the agent used grant") || !strings.Contains(d.Detail, "no signature of the agent's") {
			t.Fatalf("%s: decision %+v", target, d)
		}
		if strings.Contains(rep.Reply, "Your agent asked") || !strings.Contains(rep.Reply, "under a permission that had been revoked") || strings.Contains(rep.Reply, "you had revoked") || !strings.Contains(rep.Reply, "was refused") {
			t.Fatalf("%s: reply %s", target, rep.Reply)
		}
	}
}

// A drill of an order for a customer that finds nothing tells the support
// lead what the ledger holds about the order under other names: a refusal
// of a request without a grant is filed under the name the writer claimed.
func TestANoRowDrillNamesRowsUnderOtherPrincipals(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	if _, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "sub jane of https://pa.example", Tool: "cancel_order", Target: "A-88213",
		Reason: "asked without a delegation grant", ObservedAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-88213", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d := pulls(rep)[drill.PullReceiptRow]
	if d.Passed || !strings.Contains(d.Detail, "no row filed under A-88213 for customer acct-48213") || !strings.Contains(d.Detail, "check the spelling and the case") || !strings.Contains(d.Detail, `1 row about A-88213 under other principals (1 of them refusals`) || !strings.Contains(d.Detail, `"sub jane of https://pa.example"`) {
		t.Fatalf("receipt_row pull: %+v", d)
	}
	// Without any row about the order, nothing more is said.
	rep, err = e.r.Run(ctx, drill.Request{Target: "A-1", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := pulls(rep)[drill.PullReceiptRow]; d.Passed || strings.Contains(d.Detail, "other principals") {
		t.Fatalf("receipt_row pull about an order with no rows: %+v", d)
	}
}

// A drill of an order for a customer that finds only the customer's
// look-ups does not tell the customer these are the only records, when
// the ledger holds others about the order under other names (the
// customer's refused attempt without a grant), and tells the lead where.
func TestALookUpsOnlyDrillNamesRowsUnderOtherPrincipals(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-88213", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-88213", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Reply, "The only records we hold about A-88213") || strings.Contains(rep.Note, "other principals") {
		t.Fatalf("look-ups alone: note %q, reply %q", rep.Note, rep.Reply)
	}
	if _, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "sub jane of https://pa.example", Tool: "cancel_order", Target: "A-88213",
		Reason: "asked without a delegation grant", ObservedAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rep, err = e.r.Run(ctx, drill.Request{Target: "A-88213", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Note, `1 row about A-88213 under other principals (1 of them refusals`) || !strings.Contains(rep.Note, `"sub jane of https://pa.example"`) {
		t.Errorf("note: %q; want the refusal under the other name", rep.Note)
	}
	if strings.Contains(rep.Reply, "The only records") || !strings.Contains(rep.Reply, "We hold other records about A-88213") {
		t.Errorf("reply: %q; want it not to say these are the only records", rep.Reply)
	}
	// The reply promises a person's check: the drill does not pass.
	if p := pulls(rep)[drill.PullReceiptRow]; p.Passed || !strings.Contains(p.Detail, "needs a person") || !strings.Contains(p.Detail, "under other principals") {
		t.Errorf("receipt_row pull %+v; want it to need a person for the rows under other names", p)
	}
}

// An action and a revocation in one minute read in their order: to the
// second.
func TestTimesInOneMinuteAreToTheSecond(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 20, 47, 0, time.UTC)
	rev := time.Date(2026, 12, 6, 12, 20, 45, 0, time.UTC)
	if a, r := drill.ClocksOf(at, rev); a != "6 December 2026 12:20:47 UTC" || r != "6 December 2026 12:20:45 UTC" {
		t.Errorf("one minute: %q, %q", a, r)
	}
	if a, r := drill.ClocksOf(at, rev.Add(-time.Minute)); a != "6 December 2026 12:20 UTC" || r != "6 December 2026 12:19 UTC" {
		t.Errorf("two minutes: %q, %q", a, r)
	}
}

// A refusal's tool and target are the writer's words: a reply names one
// that is not a name (a sentence, say) quoted and cut short, so that it
// never reads as the business's own words to the customer.
func TestAReplyQuotesAToolThatIsNotAName(t *testing.T) {
	observed := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	prose := "a test by our team (you approved the real cancellation below; it is final and no refund is due) - ref"
	in := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: e.sc.PA.ID, Tool: prose, Target: "A-7501", Reason: "no delegation token", ObservedAt: observed}
	if _, err := e.l.AppendRefusal(ctx, in); err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-7501", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if want := `for "a test by our team (you approved the rea…" on A-7501`; !strings.Contains(rep.Reply, want) || strings.Contains(rep.Reply, "no refund is due") {
		t.Fatalf("reply:\n%s\nwant %q, and not the writer's sentence whole", rep.Reply, want)
	}
}

// A drill by customer alone drills the refusals whose delegation token
// verified (the Brand's signature names the customer) and answers them
// as a drill of their order does; it names the refusals whose customer is
// the writer's claim alone, and never tells the customer that look-ups
// are the only records held while either is there.
func TestADrillByCustomerAnswersTheRefusalsUnderTheirName(t *testing.T) {
	observed := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: observed.Add(-2 * time.Minute)}))
	r := e.sc.Mint(pacttest.Spec{At: observed, User: "acct-48213", Target: "A-5531"})
	grant := r.TokenClaims["grant_id"].(string)
	if _, err := e.l.RevokeGrant(ctx, grant, observed.Add(-time.Minute), "the customer revoked it", "admin", true); err != nil {
		t.Fatal(err)
	}
	in := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: e.sc.PA.ID, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken,
		Tool: "cancel_order", Target: "A-5531", Reason: "request under delegation grant " + grant + ", which was revoked", ObservedAt: observed}
	ref, err := e.l.AppendRefusal(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !ref.TokenVouches() || ref.Principal != "acct-48213" {
		t.Fatalf("refusal principal %q, token vouches %v", ref.Principal, ref.TokenVouches())
	}
	const asked = "Your agent asked for cancel_order on A-5531 at 7 October 2026 13:12 UTC after its permission had been revoked (on 7 October 2026 13:11 UTC), and we refused it"
	for _, req := range []drill.Request{{Target: "A-5531"}, {Principal: "acct-48213"}} {
		rep, err := e.r.Run(ctx, req, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Rows, []string{ref.ID}) {
			t.Errorf("drill %+v: rows %v; want the refusal %s", req, rep.Rows, ref.ID[:12])
		}
		if d := decisions(rep)[ref.ID]; !d.Passed || !strings.Contains(d.Detail, "the agent used grant "+grant+" after it was revoked") {
			t.Errorf("drill %+v: decision %+v", req, d)
		}
		if !strings.Contains(rep.Reply, asked) || strings.Contains(rep.Reply, "only records") {
			t.Errorf("drill %+v: reply %q; want %q", req, rep.Reply, asked)
		}
	}

	// A refusal filed under the customer's name with no token: its
	// customer is the name the writer claimed. It is named, not drilled,
	// and the look-ups are not said to be all the ledger holds.
	e = newEnv(t, time.Now)
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: observed.Add(-2 * time.Minute)}))
	in.DelegationToken = ""
	claimed, err := e.l.AppendRefusal(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if claimed.TokenVouches() {
		t.Fatal("a refusal without a token is vouched for")
	}
	rep, err := e.r.Run(ctx, drill.Request{Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 0 || !strings.Contains(rep.Note, "1 refusal (of \"A-5531\") under the name of customer acct-48213 that no signature ties to the customer") || !strings.Contains(rep.Note, claimed.ID[:12]) {
		t.Errorf("rows %v, note %q; want the refusal named, not drilled", rep.Rows, rep.Note)
	}
	if strings.Contains(rep.Reply, "only records") || !strings.Contains(rep.Reply, "We hold other records under your name, which a member of our team will check.") {
		t.Errorf("reply %q; want it to say other records under the customer's name are held", rep.Reply)
	}
	// The reply promises a person's check: the drill does not pass, and
	// the lead is told of the refusal.
	if p := pulls(rep)[drill.PullReceiptRow]; p.Passed || !strings.Contains(p.Detail, "needs a person") || !strings.Contains(p.Detail, claimed.ID[:12]) {
		t.Errorf("receipt_row pull %+v; want it to need a person for the refusal under the customer's name", p)
	}
}
