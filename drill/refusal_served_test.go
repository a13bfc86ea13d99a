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

// A refusal of the very action a verified receipt records, for the same
// customer and in the same minute, is no fact the reply can state: its
// customer, agent and time are the writer's claims, and beside the
// receipt the reply would say the action both ran and was refused. Its
// decision needs a person and the reply says the record is being checked;
// the receipt is decided as before.
func TestARefusalInTheMinuteOfAVerifiedReceiptNeedsAPerson(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 4, 0, time.UTC)
	for _, refusedAt := range []time.Time{at, at.Add(50 * time.Second)} {
		e := newEnv(t, time.Now)
		ctx := context.Background()
		served := e.append(t, e.sc.Mint(pacttest.Spec{At: at, User: "acct-lu", Target: "A-7701"}))
		if served.Status != ledger.Authorized {
			t.Fatalf("the receipt recorded %v", served.Status)
		}
		ref, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-lu", ClaimedAgent: e.sc.PA.ID, Tool: "cancel_order", Target: "A-7701",
			Reason: "no delegation token", ObservedAt: refusedAt})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.r.Run(ctx, drill.Request{Target: "A-7701", Principal: "acct-lu"}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		d := decisions(rep)
		if got := d[ref.ID]; got.Passed || !strings.Contains(got.Detail, "needs a person: a refusal of cancel_order on A-7701 at 7 October 2026 13:12 UTC beside row "+served.ID) ||
			!strings.Contains(got.Detail, ", a verified receipt (authorized) of the same action in the same minute") ||
			!strings.Contains(got.Detail, "the record cannot show the agent asked twice") {
			t.Fatalf("refused at %s, the refusal's decision: %+v", refusedAt.Format(time.TimeOnly), got)
		}
		if got := d[served.ID]; !got.Passed {
			t.Fatalf("the receipt's decision: %+v", got)
		}
		if rep.ChecksPassed == rep.ChecksTotal {
			t.Fatalf("scored %d of %d", rep.ChecksPassed, rep.ChecksTotal)
		}
		if strings.Contains(rep.Reply, "refused") || strings.Contains(rep.Reply, "no verifiable approval") ||
			!strings.Contains(rep.Reply, "We are checking the record of cancel_order on A-7701 at 7 October 2026 13:12 UTC.") ||
			!strings.Contains(rep.Reply, "ran cancel_order on A-7701") || strings.Count(rep.Reply, "\n\n") > 1 {
			t.Fatalf("refused at %s, reply: %s", refusedAt.Format(time.TimeOnly), rep.Reply)
		}
	}
}

// A PACT step-up: the agent's request is refused for a missing scope, the
// customer grants it, and the agent's request sent again minutes later is
// served. The refusal is decided by rule 1 as ever, beside the receipt.
func TestARefusalMinutesBeforeAStepUpIsRuleOne(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 4, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	first := e.sc.Mint(pacttest.Spec{At: at.Add(-3 * time.Minute), User: "acct-lu", Target: "A-7701", GrantID: "a2agrant_READ", Granted: "orders:read"})
	ref, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-lu", ClaimedAgent: e.sc.PA.ID, RequestJWT: first.RequestJWT, DelegationToken: first.DelegationToken,
		Tool: "cancel_order", Target: "A-7701", Reason: "insufficient scope: orders:cancel is not granted", ObservedAt: at.Add(-3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	served := e.append(t, e.sc.Mint(pacttest.Spec{At: at, User: "acct-lu", Target: "A-7701"}))
	if served.Status != ledger.Authorized {
		t.Fatalf("the receipt recorded %v", served.Status)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-7701", Principal: "acct-lu"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d := decisions(rep)
	if got := d[ref.ID]; !got.Passed || !strings.Contains(got.Detail, "rule 1") || strings.Contains(got.Detail, "needs a person") {
		t.Fatalf("the refusal's decision: %+v", got)
	}
	if rep.ChecksPassed != rep.ChecksTotal {
		t.Fatalf("scored %d of %d: %+v", rep.ChecksPassed, rep.ChecksTotal, rep.Pulls)
	}
	if !strings.Contains(rep.Reply, "We have no verifiable approval from you on file for cancel_order on A-7701 at 7 October 2026 13:09 UTC: the request was refused") ||
		!strings.Contains(rep.Reply, "ran cancel_order on A-7701") || strings.Contains(rep.Reply, "checking the record") {
		t.Fatalf("reply: %s", rep.Reply)
	}
}

// A drill of the order alone answers whoever the rows name: a refusal of
// the action in the receipt's minute under another name (a claim, with no
// token to vouch for it) needs a person too.
func TestARefusalUnderAnotherNameInTheMinuteOfAVerifiedReceiptNeedsAPerson(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 4, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	served := e.append(t, e.sc.Mint(pacttest.Spec{At: at, User: "acct-lu", Target: "A-7701"}))
	ref, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "sub S of agent A", ClaimedAgent: e.sc.PA.ID, Tool: "cancel_order", Target: "A-7701",
		Reason: "no delegation token", ObservedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-7701"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if got := decisions(rep)[ref.ID]; got.Passed || !strings.Contains(got.Detail, "beside row "+served.ID) {
		t.Fatalf("the refusal's decision: %+v", got)
	}
	if strings.Contains(rep.Reply, "no verifiable approval") {
		t.Fatalf("reply: %s", rep.Reply)
	}
}

// A step-up within the minute: the agent's own signed request, under a
// token without the scope, refused, then sent again and served. The
// refusal's request is the agent's, bound to the token, and not the
// receipt's: the agent asked twice, and rule 1 decides as ever.
func TestAStepUpWithinTheMinuteIsRuleOne(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 4, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	first := e.sc.Mint(pacttest.Spec{At: at, User: "acct-lu", Target: "A-7701", GrantID: "a2agrant_READ", Granted: "orders:read"})
	ref, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-lu", ClaimedAgent: e.sc.PA.ID, RequestJWT: first.RequestJWT, DelegationToken: first.DelegationToken,
		Tool: "cancel_order", Target: "A-7701", Reason: "insufficient scope: orders:cancel is not granted", ObservedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	e.append(t, e.sc.Mint(pacttest.Spec{At: at.Add(20 * time.Second), User: "acct-lu", Target: "A-7701"}))
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-7701", Principal: "acct-lu"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := decisions(rep)[ref.ID]; !d.Passed || !strings.Contains(d.Detail, "rule 1") {
		t.Fatalf("the step-up's refusal: %+v", d)
	}
	if rep.ChecksPassed != rep.ChecksTotal {
		t.Fatalf("scored %d of %d", rep.ChecksPassed, rep.ChecksTotal)
	}
}

// The receipt's own request JWT and token, posted again as a refusal in
// its minute, are no step-up: the agent signed one request, which was
// served; the refusal needs a person.
func TestTheReceiptsOwnRequestPostedAsARefusalNeedsAPerson(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 4, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	real := e.sc.Mint(pacttest.Spec{At: at, User: "acct-lu", Target: "A-7701"})
	e.append(t, real)
	ref, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-lu", ClaimedAgent: e.sc.PA.ID, RequestJWT: real.RequestJWT, DelegationToken: real.DelegationToken,
		Tool: "cancel_order", Target: "A-7701", Reason: "refused", ObservedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-7701", Principal: "acct-lu"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := decisions(rep)[ref.ID]; d.Passed || !strings.Contains(d.Detail, "needs a person") {
		t.Fatalf("a refusal of the receipt's own request: %+v", d)
	}
}

// A refusal dated across the turn of a minute from the receipt, less
// than a minute apart (13:12:59 beside 13:13:01), needs a person too.
func TestARefusalSecondsApartAcrossAMinuteNeedsAPerson(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 13, 1, 0, time.UTC)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	e.append(t, e.sc.Mint(pacttest.Spec{At: at, User: "acct-lu", Target: "A-7701"}))
	ref, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-lu", ClaimedAgent: e.sc.PA.ID, Tool: "cancel_order", Target: "A-7701",
		Reason: "no delegation token", ObservedAt: at.Add(-2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-7701", Principal: "acct-lu"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := decisions(rep)[ref.ID]; d.Passed || !strings.Contains(d.Detail, "needs a person") {
		t.Fatalf("a refusal two seconds before the receipt, across a minute: %+v", d)
	}
}
