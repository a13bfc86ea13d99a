package drill_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
)

// A writer posts the real receipt first, with its request JWT, token and
// exact args, but its action log's targets left out; the Provider's post
// (target A-5531) is then a DUPLICATE of it. A drill by the order finds
// the duplicate alone, and decides it as a replay of a row it never
// drilled: it needs a person, naming the earlier row and its status,
// whether that row was authorized or an incident.
func TestAFirstPostFiledUnderNoTargetNeedsAPerson(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec pacttest.Spec
		want string
	}{
		{"authorized", pacttest.Spec{User: "acct-48213", Target: "A-5531"}, "(authorized)"},
		{"incident", pacttest.Spec{User: "acct-48213", Target: "A-5531", Granted: "orders:read", ScopesUsed: []string{"orders:cancel"}}, "(incident)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, time.Now)
			real := e.sc.Mint(tc.spec)
			unfiled := *real
			unfiled.Actions = append(unfiled.Actions[:0:0], real.Actions...)
			for i := range unfiled.Actions {
				unfiled.Actions[i].Target = "" // the same tool and args: their hash passes
			}
			x := e.append(t, &unfiled)
			g := e.append(t, real)
			if g.Verifier.DuplicateOf != x.ID {
				t.Fatalf("the Provider's post: %s duplicate of %q, want of %s", g.Status, g.Verifier.DuplicateOf, x.ID)
			}
			for _, req := range []drill.Request{{Target: "A-5531", Principal: "acct-48213"}, {Target: "A-5531"}} {
				rep, err := e.r.Run(context.Background(), req, "lead")
				if err != nil {
					t.Fatal(err)
				}
				d := decisions(rep)[g.ID]
				if d.Passed || !strings.Contains(d.Detail, "needs a person: row "+x.ID+" recorded this same signed receipt first without filing it under A-5531") || !strings.Contains(d.Detail, tc.want) {
					t.Errorf("drill %+v: decision %v %q; want it to need a person, naming row %s %s", req, d.Passed, d.Detail, x.ID[:12], tc.want)
				}
				if strings.Contains(rep.Reply, "counts once") {
					t.Errorf("drill %+v: the customer is told %q", req, rep.Reply)
				}
			}
		})
	}
}

// A drill by row reads that row alone: a target beside the row id is
// refused, and so is the answer for another customer than the row's.
func TestADrillByRowIsOfThatRowAndItsCustomer(t *testing.T) {
	e := newEnv(t, time.Now)
	other := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-99999", Target: "B-1"}))
	if _, err := e.r.Run(context.Background(), drill.Request{RowID: other.ID, Target: "A-5531"}, "lead"); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("a drill by row with a target: %v, want it refused", err)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{RowID: other.ID, Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := decisions(rep)[other.ID]; d.Passed || !strings.Contains(d.Detail, "belongs to acct-99999, not the customer the drill was asked for") {
		t.Errorf("a drill of acct-99999's row for acct-48213: decision %v %q, want it to need a person", d.Passed, d.Detail)
	}
	if strings.Contains(rep.Reply, "you signed in") || strings.Contains(rep.Reply, "allowed") {
		t.Errorf("acct-48213 is told of acct-99999's grant: %q", rep.Reply)
	}
}
