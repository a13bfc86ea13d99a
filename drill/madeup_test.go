package drill_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/verifier"
)

// A writer posts the real receipt first, with its real request JWT and a
// delegation token it made up (the real claims, signed with a key of its
// own): that row is UNAUTHORIZED, and the pipeline's real post its
// DUPLICATE. The receipt is the Provider's and the real post's evidence
// all verifies: the reply never tells the customer there is no verifiable
// approval, and the writer's row needs a person.
func TestTheRealReceiptPostedAfterAMadeUpTokenIsNotCalledUnauthorized(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	junk := *real
	junk.DelegationToken = pacttest.MustKey(e.sc.Brand.Key.Kid, jose.ES256).Sign(real.TokenClaims)
	j := e.append(t, &junk)
	g := e.append(t, real)
	if j.Status != ledger.Unauthorized || g.Status != ledger.Duplicate || g.Verifier.DuplicateOf != j.ID {
		t.Fatalf("rows: %s %v, %s %v duplicate of %q", j.ID[:12], j.Status, g.ID[:12], g.Status, g.Verifier.DuplicateOf)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d := decisions(rep)
	if p := d[g.ID]; !p.Passed || !strings.Contains(p.Detail, "customer-authorized") {
		t.Errorf("the real post's decision: %+v", p)
	}
	if p := d[j.ID]; p.Passed || !strings.Contains(p.Detail, "needs a person") {
		t.Errorf("the made-up token's decision: %+v; want needs a person", p)
	}
	if strings.Contains(rep.Reply, "no verifiable approval") {
		t.Errorf("reply %q: the real receipt and its evidence are in the ledger", rep.Reply)
	}
}

// A writer posts the real receipt first with an action log it made up
// (other args than the receipt signs): that row is an INCIDENT, and the
// pipeline's real post, whose logged args match the signed hash, its
// DUPLICATE. Two action logs of one signed turn disagree and only one can
// be the application's: the drill needs a person, and never tells the
// customer the business ran another action than the one signed.
func TestTheRealReceiptPostedAfterAMadeUpActionLogIsNotAnIncident(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	junk := *real
	junk.Actions = []verifier.Action{{Tool: real.Actions[0].Tool, Target: "A-5531", ArgsJSON: `{"order":"A-5531","refund":"none"}`}}
	j := e.append(t, &junk)
	g := e.append(t, real)
	if j.Status != ledger.Incident || g.Status != ledger.Duplicate || g.Verifier.DuplicateOf != j.ID {
		t.Fatalf("rows: %s %v, %s %v duplicate of %q", j.ID[:12], j.Status, g.ID[:12], g.Status, g.Verifier.DuplicateOf)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	for id, p := range decisions(rep) {
		if p.Passed || !strings.Contains(p.Detail, "needs a person") {
			t.Errorf("decision on %s: %+v; want needs a person", id[:12], p)
		}
	}
	if strings.Contains(rep.Reply, "You are right to question") || strings.Contains(rep.Reply, "our error") {
		t.Errorf("reply %q: a made-up action log is no incident of the business", rep.Reply)
	}
	// Each row drilled alone says so too.
	for _, id := range []string{j.ID, g.ID} {
		rep, err := e.r.Run(context.Background(), drill.Request{RowID: id}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if p := decisions(rep)[id]; p.Passed || !strings.Contains(p.Detail, "needs a person") {
			t.Errorf("row %s drilled alone: %+v; want needs a person", id[:12], p)
		}
	}
}

// The same, once retention has swept the writer's row (posted first, so it
// comes due first): the real post is what the record keeps of the turn,
// and it is decided on itself, not sent to a person because the row it
// duplicates is gone.
func TestTheRealReceiptIsDecidedOnItselfOnceTheRowItDuplicatesIsSwept(t *testing.T) {
	at := time.Now().UTC()
	now := func() time.Time { return at }
	e := newEnv(t, func() time.Time { return now() })
	ctx := context.Background()
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	junk := *real
	junk.DelegationToken = pacttest.MustKey(e.sc.Brand.Key.Kid, jose.ES256).Sign(real.TokenClaims)
	j := e.append(t, &junk)
	at = at.Add(48 * time.Hour)
	g := e.append(t, real)
	if j.Status != ledger.Unauthorized || g.Status != ledger.Duplicate || g.Verifier.DuplicateOf != j.ID || !g.RetainUntil.After(j.RetainUntil) {
		t.Fatalf("rows: %s %v until %v, %s %v until %v duplicate of %q", j.ID[:12], j.Status, j.RetainUntil, g.ID[:12], g.Status, g.RetainUntil, g.Verifier.DuplicateOf)
	}
	if err := storetest.DrainOutbox(ctx, e.l); err != nil {
		t.Fatal(err)
	}
	at = j.RetainUntil.Add(time.Hour)
	res, err := e.l.Sweep(ctx, false)
	if err != nil || len(res.Swept) != 1 || res.Swept[0].RowID != j.ID {
		t.Fatalf("sweep: %v, %+v; want the writer's row swept", err, res)
	}
	rep, err := e.r.Run(ctx, drill.Request{RowID: g.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if p := decisions(rep)[g.ID]; !p.Passed || !strings.Contains(p.Detail, "customer-authorized") {
		t.Errorf("the real post's decision once the row it duplicates is swept: %+v", p)
	}
}

// A writer's replay of a real receipt with a made-up token, posted months
// after the real row (so kept past it): once retention sweeps the real
// row, the replay's failed evidence says nothing about the turn. Its
// drill needs a person; it never answers that the customer did not
// approve.
func TestAReplayOutlivingTheRealRowIsNotDecidedUnauthorized(t *testing.T) {
	at := time.Now().UTC()
	e := newEnv(t, func() time.Time { return at })
	ctx := context.Background()
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	g := e.append(t, real)
	at = at.AddDate(0, 7, 0)
	junk := *real
	junk.DelegationToken = pacttest.MustKey(e.sc.Brand.Key.Kid, jose.ES256).Sign(real.TokenClaims)
	j := e.append(t, &junk)
	if g.Status != ledger.Authorized || j.Verifier.DuplicateOf != g.ID || !j.RetainUntil.After(g.RetainUntil) {
		t.Fatalf("rows: %v until %v; replay %v of %q until %v", g.Status, g.RetainUntil, j.Status, j.Verifier.DuplicateOf, j.RetainUntil)
	}
	if err := storetest.DrainOutbox(ctx, e.l); err != nil {
		t.Fatal(err)
	}
	at = g.RetainUntil.Add(time.Hour)
	if res, err := e.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 || res.Swept[0].RowID != g.ID {
		t.Fatalf("sweep: %v, %+v; want the real row swept", err, res)
	}
	rep, err := e.r.Run(ctx, drill.Request{RowID: j.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if p := decisions(rep)[j.ID]; p.Passed || !strings.Contains(p.Detail, "needs a person") || !strings.Contains(p.Detail, "authorized") {
		t.Errorf("the replay's decision once the real row is swept: %+v; want needs a person, naming what the real row was", p)
	}
	if strings.Contains(rep.Reply, "no verifiable approval") || strings.Contains(rep.Reply, "unauthorized") {
		t.Errorf("reply %q", rep.Reply)
	}
}
