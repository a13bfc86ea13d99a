package drill_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A drill by principal scores the rows whose actions changed something,
// lists the read-only turns, and answers the customer in at most two short
// paragraphs in the brand's own words.
func TestDisputeByPrincipalScoresWhatChangedInTheBrandsWords(t *testing.T) {
	e := newEnv(t, time.Now)
	row := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	for _, target := range []string{"A-5531", "A-6000"} {
		e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: target, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
	}
	e.r = drill.New(e.l, drill.Config{Names: drill.Names{
		Brands: map[string]drill.BrandNames{row.Brand: {
			Name:   "Acme Outfitters",
			Scopes: map[string]string{"orders:read": "See your orders", "orders:cancel": "Cancel an order"},
			Tools:  map[string]string{"cancel_order": "Cancel an order"},
		}},
		Agents: map[string]string{e.sc.PA.ID: "MyHelper"},
	}})
	rep, err := e.r.Run(context.Background(), drill.Request{Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChecksTotal != 6 || rep.ChecksPassed != 6 || len(rep.Rows) != 1 || rep.Rows[0] != row.ID || len(rep.Listed) != 2 {
		t.Fatalf("%d/%d checks, rows %v, listed %+v", rep.ChecksPassed, rep.ChecksTotal, rep.Rows, rep.Listed)
	}
	if !strings.Contains(rep.Note, "2 read-only turns listed, not scored") {
		t.Errorf("note: %q", rep.Note)
	}
	if n := strings.Count(rep.Reply, "\n\n") + 1; n > 2 {
		t.Errorf("reply has %d paragraphs:\n%s", n, rep.Reply)
	}
	for _, want := range []string{"Acme Outfitters", "MyHelper", "see your orders and cancel an order", `"cancel an order" on A-5531`, "7 October 2026 13:07 UTC", "2 other requests that ran no action"} {
		if !strings.Contains(rep.Reply, want) {
			t.Errorf("reply lacks %q:\n%s", want, rep.Reply)
		}
	}
	for _, id := range []string{"cancel_order", e.sc.PA.ID} {
		if strings.Contains(rep.Reply, id) {
			t.Errorf("reply speaks in the id %q:\n%s", id, rep.Reply)
		}
	}
}

// A drill by order finds the action behind more newer look-ups than it
// lists (the disputed cancel was followed by 25 look-ups of the order):
// it drills the cancel, lists the newest look-ups and counts them all.
func TestDisputeFindsTheActionBehindManyLookups(t *testing.T) {
	e := newEnv(t, time.Now)
	row := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	for i := range 25 {
		e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"},
			At: row.IssuedAt.Add(time.Duration(i+1) * time.Minute)}))
	}
	for _, req := range []drill.Request{{Target: "A-5531"}, {Target: "A-5531", Principal: "acct-48213"}, {Principal: "acct-48213"}} {
		rep, err := e.r.Run(context.Background(), req, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if rep.ChecksTotal != 6 || rep.ChecksPassed != 6 || len(rep.Rows) != 1 || rep.Rows[0] != row.ID || len(rep.Listed) != drill.MaxRows {
			t.Fatalf("%+v: %d/%d checks, rows %v, %d listed", req, rep.ChecksPassed, rep.ChecksTotal, rep.Rows, len(rep.Listed))
		}
		if !strings.Contains(rep.Note, "25 read-only turns listed, not scored (the newest 20 shown)") || !strings.Contains(rep.Reply, "25 other requests that ran no action") {
			t.Errorf("%+v: note %q, reply %q", req, rep.Note, rep.Reply)
		}
	}
}

// A refusal of a request made without a grant names no brand: its tool
// is said in the words every brand that has it gives it, and never by
// its id where they agree.
func TestAToolIsNamedInWordsWithoutTheRowsBrand(t *testing.T) {
	n := drill.Names{Brands: map[string]drill.BrandNames{
		"https://acme.example":  {Tools: map[string]string{"cancel_order": "Cancel an order", "refund": "Refund an order"}},
		"https://shoes.example": {Tools: map[string]string{"cancel_order": "Cancel an order", "refund": "Give money back"}},
	}}
	for _, c := range []struct{ brand, tool, want string }{
		{"", "cancel_order", `"cancel an order" on A-1`},
		{"https://unknown.example", "cancel_order", `"cancel an order" on A-1`},
		{"https://shoes.example", "refund", `"give money back" on A-1`},
		{"", "refund", `refund on A-1`}, // the brands differ: the id
		{"https://acme.example", "message:send", `"a reply to its message" on A-1`},
	} {
		if got := n.Action(c.brand, []string{c.tool}, "A-1"); got != c.want {
			t.Errorf("%s of %q: %s; want %s", c.tool, c.brand, got, c.want)
		}
	}
}

// A writer posts a customer's real receipt again and again, each time with
// other limits beside it: every post is a row repeating the first, signed
// at the same time (the first repeat an INCIDENT, the next DUPLICATE rows:
// a receipt opens one incident). The drill of the customer's order still
// drills the receipt's first row, whatever the number of repeats, and
// needs a person for the repeats it leaves out.
func TestRepeatsOfAReceiptDoNotPushItsFirstRowOutOfTheDrill(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "refund_order", ArgsJSON: `{"order":"A-5531","amount":10}`, ScopesUsed: []string{"orders:refund"}, Granted: "orders:refund"})
	first := e.append(t, real)
	for i := range drill.MaxRows + 10 {
		row := e.appendWith(t, real, &ledger.Limits{AmountMax: fmt.Sprintf("0.%02d", i+1)})
		want := ledger.Duplicate
		if i == 0 {
			want = ledger.Incident
		}
		if row.Verifier.DuplicateOf != first.ID || row.Status != want {
			t.Fatalf("repeat %d: %v, duplicate of %q", i, row.Status, row.Verifier.DuplicateOf)
		}
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Rows, first.ID) {
		t.Fatalf("the receipt's first row %s is not among the %d rows drilled: %s", first.ID[:12], len(rep.Rows), rep.Note)
	}
	if p := decisions(rep)[first.ID]; p.Passed || !strings.Contains(p.Detail, "needs a person") {
		t.Errorf("the first row's decision: %+v; want needs a person (rows left out)", p)
	}
}

// Two receipts of one action on one order in one minute are two actions
// (a customer charged twice has two records): the reply names both, each
// at its time to the second, where the minute alone would read as one.
func TestTwoActionsInOneMinuteAreBothInTheReply(t *testing.T) {
	e := newEnv(t, time.Now)
	at := time.Date(2026, 10, 7, 13, 12, 14, 0, time.UTC)
	a := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "cancel_order", At: at}))
	b := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "cancel_order", At: at.Add(20 * time.Second)}))
	if a.Verifier.DuplicateOf != "" || b.Verifier.DuplicateOf != "" {
		t.Fatalf("duplicates: %q %q", a.Verifier.DuplicateOf, b.Verifier.DuplicateOf)
	}
	for _, req := range []drill.Request{{Target: "A-5531"}, {Target: "A-5531", Principal: "acct-48213"}, {Principal: "acct-48213"}} {
		rep, err := e.r.Run(context.Background(), req, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != 2 || rep.ChecksPassed != rep.ChecksTotal {
			t.Fatalf("drill %+v: rows %v, %d of %d checks passed", req, rep.Rows, rep.ChecksPassed, rep.ChecksTotal)
		}
		for _, want := range []string{
			"At 7 October 2026 13:12:14 UTC your agent, under that permission, ran cancel_order on A-5531",
			"At 7 October 2026 13:12:34 UTC your agent, under that permission, ran cancel_order on A-5531",
		} {
			if !strings.Contains(rep.Reply, want) {
				t.Errorf("drill %+v: reply %q; want %q", req, rep.Reply, want)
			}
		}
		if n := strings.Count(rep.Reply, "you signed in with"); n != 1 {
			t.Errorf("drill %+v: the grant is said %d times; want once: %q", req, n, rep.Reply)
		}
	}
}
