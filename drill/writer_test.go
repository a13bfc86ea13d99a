package drill_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// What a writer key (not trusted: docs/design/012) can post must not bend
// the drills.

// forgedCopy returns r with its receipt's signature bytes altered: the same
// claims, request JWT and delegation token, a receipt signature that does
// not verify.
func forgedCopy(t *testing.T, r *pacttest.Receipt) *pacttest.Receipt {
	t.Helper()
	parts := strings.Split(r.ReceiptJWS, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sig[5] ^= 0xff
	parts[2] = base64.RawURLEncoding.EncodeToString(sig)
	c := *r
	c.ReceiptJWS = strings.Join(parts, ".")
	return &c
}

// decisions returns the decision pull of each drilled row, by row id.
func decisions(rep *drill.Report) map[string]drill.Pull {
	m := map[string]drill.Pull{}
	for _, p := range rep.Pulls {
		if p.Name == drill.PullDecision {
			m[p.RowID] = p
		}
	}
	return m
}

// A forged copy of the disputed receipt posted before it, with its request
// JWT, is no original the real receipt replays: the drill decides the real
// row customer-authorized, the copy as a copy of it, and the reply never
// tells the customer there is no verifiable approval.
func TestAForgedCopyPostedFirstDoesNotMakeTheRealReceiptAReplay(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	c := e.append(t, forgedCopy(t, real))
	g := e.append(t, real)
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	d := decisions(rep)
	if p := d[g.ID]; !p.Passed || !strings.Contains(p.Detail, "customer-authorized") {
		t.Errorf("decision on the real receipt %s: %+v; want customer-authorized", g.ID[:12], p)
	}
	if p := d[c.ID]; !p.Passed || !strings.Contains(p.Detail, "copy of row "+g.ID) {
		t.Errorf("decision on the forged copy %s: %+v; want a copy of row %s", c.ID[:12], p, g.ID[:12])
	}
	if strings.Contains(rep.Reply, "no verifiable approval") || !strings.Contains(rep.Reply, "allowed") {
		t.Errorf("reply %q: want the grant, never \"no verifiable approval\"", rep.Reply)
	}
	if rep.ChecksPassed != rep.ChecksTotal {
		t.Errorf("checks %d/%d; want all passed", rep.ChecksPassed, rep.ChecksTotal)
	}
}

// Twenty forged receipts for the disputed order, dated years ahead, do not
// push the verified receipt out of the drill: receipts whose signature
// verified rank first, the others by when they were recorded. The one row
// left out is said so, and the drill needs a person.
func TestForgeriesDatedLaterDoNotPushTheVerifiedRowOutOfTheDrill(t *testing.T) {
	e := newEnv(t, time.Now)
	g := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	future := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range drill.MaxRows {
		r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", At: future.Add(time.Duration(i) * time.Second)})
		if row := e.append(t, forgedCopy(t, r)); row.Status != ledger.Unauthorized {
			t.Fatalf("forgery recorded %v", row.Status)
		}
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != drill.MaxRows || rep.Rows[0] != g.ID {
		t.Fatalf("rows drilled %d, first %s; want %d, the verified row %s first", len(rep.Rows), rep.Rows[0][:12], drill.MaxRows, g.ID[:12])
	}
	if !strings.Contains(rep.Note, "21 rows about A-5531 for customer acct-48213 found") || !strings.Contains(rep.Note, "1 left out") {
		t.Errorf("note %q: want the rows found and the one left out", rep.Note)
	}
	if p := decisions(rep)[g.ID]; p.Passed || !strings.HasPrefix(p.Detail, "needs a person: 1 more row about A-5531") {
		t.Errorf("decision on the verified row: %+v; want needs a person, naming the row left out", p)
	}
}

// A customer with more rows than a drill covers: the rows left out (here
// the oldest, an incident) are named in the report, every decision needs a
// person, and the reply says records were not covered.
func TestADisputeDrillSaysHowManyRowsItLeftOut(t *testing.T) {
	e := newEnv(t, time.Now)
	base := time.Date(2026, 10, 7, 9, 0, 0, 0, time.UTC)
	bad := e.sc.Mint(pacttest.Spec{User: "acct-9", Target: "B-0", At: base})
	bad.Actions[0].ArgsJSON = `{"order":"B-0","refund":"all"}`
	if inc := e.append(t, bad); inc.Status != ledger.Incident {
		t.Fatalf("status %v", inc.Status)
	}
	for i := 1; i <= drill.MaxRows+1; i++ {
		e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-9", Target: fmt.Sprint("B-", i), At: base.Add(time.Duration(i) * time.Minute)}))
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Principal: "acct-9"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != drill.MaxRows || !strings.Contains(rep.Note, "22 rows about customer acct-9 found, 20 drilled") || !strings.Contains(rep.Note, "2 left out") {
		t.Errorf("rows drilled %d, note %q; want %d drilled and the 2 left out said", len(rep.Rows), rep.Note, drill.MaxRows)
	}
	for id, p := range decisions(rep) {
		if p.Passed || !strings.HasPrefix(p.Detail, "needs a person: 2 more rows about customer acct-9 left out of this drill") {
			t.Errorf("decision on %s: %+v; want needs a person, naming the rows left out", id[:12], p)
		}
	}
	if !strings.Contains(rep.Reply, "We hold 2 more records about customer acct-9 that this check did not cover.") {
		t.Errorf("reply %q: want the records not covered said", rep.Reply)
	}
}

// Receipts whose signature fails are what a writer sent, like refusals:
// the monthly drill never samples them, so a writer chooses neither the
// rows the drill scores nor that it fails.
func TestReceiptsWhoseSignatureFailedAreNeverSampled(t *testing.T) {
	e := newEnv(t, time.Now)
	g := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-5", Target: "M-0"}))
	for i := range 3 {
		r := forgedCopy(t, e.sc.Mint(pacttest.Spec{User: "acct-x", Target: fmt.Sprint("J-", i)}))
		if i%2 == 0 {
			r.RequestJWT = ""
		}
		if row := e.append(t, r); row.Status != ledger.Unauthorized || ledger.Drillable(row) {
			t.Fatalf("forgery recorded %v, drillable %v; want unauthorized, not drillable", row.Status, ledger.Drillable(row))
		}
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Monthly: true, Sample: 5}, "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0] != g.ID || rep.ChecksPassed != rep.ChecksTotal {
		t.Errorf("monthly drilled %v, checks %d/%d; want only the verified row %s, every check passed", rep.Rows, rep.ChecksPassed, rep.ChecksTotal, g.ID[:12])
	}
}

// An UNAUTHORIZED receipt posted without a request JWT is decided by
// rule 1 (no verifiable receipt: unauthorized), not "needs a person" for
// the evidence the writer did not send.
func TestAnUnauthorizedRowWithoutARequestJWTIsDecidedByRuleOne(t *testing.T) {
	e := newEnv(t, time.Now)
	r := forgedCopy(t, e.sc.Mint(pacttest.Spec{User: "acct-x", Target: "J-1"}))
	r.RequestJWT = ""
	row := e.append(t, r)
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "J-1"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if p := decisions(rep)[row.ID]; !p.Passed || !strings.HasPrefix(p.Detail, "no verifiable receipt") {
		t.Errorf("decision: %+v; want rule 1, unauthorized", p)
	}
}

// A writer posts the real receipt first with a delegation token it made
// up and no request JWT: that row is UNAUTHORIZED, and the pipeline's
// real post of the receipt, with its real evidence, its DUPLICATE. The
// real post is decided on its own evidence (the customer allowed it), and
// the writer's row needs a person: its receipt is the Provider's, so rule
// 1's "no verifiable receipt" is not the answer.
func TestTheRealReceiptPostedAfterMadeUpEvidenceIsDecidedOnItsOwn(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	junk := *real
	junk.RequestJWT = ""
	junk.DelegationToken = "eyJhbGciOiJFUzI1NiJ9.e30.AAAA"
	j := e.append(t, &junk)
	g := e.append(t, real)
	if j.Status != ledger.Unauthorized || g.Status != ledger.Duplicate || g.Verifier.DuplicateOf != j.ID {
		t.Fatalf("rows: %s %v, %s %v duplicate of %q", j.ID, j.Status, g.ID, g.Status, g.Verifier.DuplicateOf)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	decisions := map[string]drill.Pull{}
	for _, p := range rep.Pulls {
		if p.Name == drill.PullDecision {
			decisions[p.RowID] = p
		}
	}
	if d := decisions[g.ID]; !d.Passed || !strings.Contains(d.Detail, "customer-authorized") {
		t.Errorf("the real post's decision: %+v", d)
	}
	if d := decisions[j.ID]; d.Passed || !strings.Contains(d.Detail, "needs a person") {
		t.Errorf("the made-up evidence's decision: %+v", d)
	}
	if strings.Contains(rep.Reply, "no verifiable approval") {
		t.Errorf("reply %q: the real receipt and its evidence are in the ledger", rep.Reply)
	}
}

// withTarget returns r with its action log filing its action under
// target: the receipt, request JWT and token are the real ones, and the
// args (which the receipt signs) still name the real order.
func withTarget(r *pacttest.Receipt, target string) *pacttest.Receipt {
	c := *r
	c.Actions = append([]verifier.Action(nil), r.Actions...)
	c.Actions[0].Target = target
	return &c
}

// A writer key posts the action log, and with it the order id a row is
// filed under; the receipt signs only the args. A real receipt posted
// first under another customer's order id, and then by the pipeline as
// it was, is decided customer-authorized on neither order: the signed
// args name A-5531, not B-8888, and the two posts disagree.
func TestAWriterCannotFileARealActionUnderAnotherOrder(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	moved := e.append(t, withTarget(real, "B-8888"))
	genuine := e.append(t, real)
	if moved.Status != ledger.Authorized || genuine.Verifier.DuplicateOf != moved.ID {
		t.Fatalf("the moved post is %s, the genuine post duplicates %q; want the moved post first and authorized", moved.Status, genuine.Verifier.DuplicateOf)
	}
	for _, req := range []drill.Request{{Target: "B-8888"}, {Target: "A-5531"}, {Target: "A-5531", Principal: "acct-48213"}} {
		rep, err := e.r.Run(context.Background(), req, "lead")
		if err != nil {
			t.Fatal(err)
		}
		for id, p := range decisions(rep) {
			if p.Passed || !strings.Contains(p.Detail, "needs a person") {
				t.Errorf("drill %+v, decision on row %s: %+v; want it to need a person", req, id[:12], p)
			}
		}
		if strings.Contains(rep.Reply, "under that permission, ran") || strings.Contains(rep.Reply, "counts once") {
			t.Errorf("drill %+v: reply %q tells the customer what the record cannot show", req, rep.Reply)
		}
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "B-8888"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if p := pulls(rep)[drill.PullActionLog]; p.Passed || !strings.Contains(p.Detail, "do not name B-8888") {
		t.Errorf("action log pull of the moved row: %+v; want it to say the signed args do not name B-8888", p)
	}
}

// Args that name the target deeper in the JSON vouch for it as well as
// a top-level string.
func TestTheSignedArgsNameTheTargetAtAnyDepth(t *testing.T) {
	e := newEnv(t, time.Now)
	for _, args := range []string{`{"order":{"id":"A-77","lines":[1,2]}}`, `{"ids":["x","A-77"]}`, `{"order":"77"}`} {
		target := "A-77"
		if args == `{"order":"77"}` {
			target = "77"
		}
		r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: target, ArgsJSON: args})
		row := e.append(t, r)
		rep, err := e.r.Run(context.Background(), drill.Request{RowID: row.ID}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if p := pulls(rep)[drill.PullActionLog]; !p.Passed {
			t.Errorf("args %s, target %s: action log pull %+v; want passed", args, target, p)
		}
	}
}

// Signed args that a Provider's decoder may read otherwise than the
// ledger do not vouch for the target: an order key given twice (one
// decoder acts on the first, another on the last) or bytes after the
// JSON. A drill of the row needs a person.
func TestAmbiguousSignedArgsDoNotNameTheTarget(t *testing.T) {
	e := newEnv(t, time.Now)
	for _, args := range []string{`{"order":"B-8888","order":"A-5531"}`, `{"order":"A-5531","order":"B-8888"}`, `{"order":"A-5531"} {"order":"B-8888"}`} {
		row := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", ArgsJSON: args}))
		rep, err := e.r.Run(context.Background(), drill.Request{RowID: row.ID}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if p := pulls(rep)[drill.PullActionLog]; p.Passed || !strings.Contains(p.Detail, "do not name A-5531") {
			t.Errorf("args %s: action log pull %+v; want it to say the signed args do not name A-5531", args, p)
		}
		if d := decisions(rep)[row.ID]; d.Passed || !strings.Contains(d.Detail, "needs a person") {
			t.Errorf("args %s: decision %+v; want it to need a person", args, d)
		}
	}
}

// A number in the signed args is no order id: a receipt for order
// B-8888 whose amount or quantity equals a numeric order id, filed under
// that id, is the writer's word alone, and its drill needs a person.
func TestANumberInTheSignedArgsDoesNotNameAnOrder(t *testing.T) {
	e := newEnv(t, time.Now)
	for _, c := range []struct{ args, target string }{{`{"order":"B-8888","amount":5531}`, "5531"}, {`{"order":"B-8888","qty":1}`, "1"}} {
		row := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: c.target, ArgsJSON: c.args}))
		if s := row.Actions[0].TargetSource; s != verifier.TargetFromWriter {
			t.Errorf("args %s filed under %s: target source %d; want the writer's", c.args, c.target, s)
		}
		rep, err := e.r.Run(context.Background(), drill.Request{RowID: row.ID}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if p := pulls(rep)[drill.PullActionLog]; p.Passed || !strings.Contains(p.Detail, "do not name "+c.target) {
			t.Errorf("args %s: action log pull %+v; want it to say the signed args do not name %s", c.args, p, c.target)
		}
		if d := decisions(rep)[row.ID]; d.Passed || !strings.Contains(d.Detail, "needs a person") {
			t.Errorf("args %s: decision %+v; want it to need a person", c.args, d)
		}
	}
}

// The pipeline's retry of a receipt without its action log is a replay
// of the row it repeats, not another filing of it.
func TestARepostWithoutAnActionLogIsAReplay(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	first := e.append(t, real)
	bare := *real
	bare.Actions = nil
	again := e.append(t, &bare)
	if again.Verifier.DuplicateOf != first.ID {
		t.Fatalf("the bare re-post duplicates %q; want %s", again.Verifier.DuplicateOf, first.ID[:12])
	}
	rep, err := e.r.Run(context.Background(), drill.Request{RowID: again.ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := decisions(rep)[again.ID]; strings.Contains(d.Detail, "another action log") {
		t.Errorf("decision on the bare re-post: %+v; want a replay, not another filing", d)
	}
}

// Drilled on the first post, found by its own order id, a receipt whose
// later post files its action under another order needs a person too,
// even where the signed args name both (so neither target is unsigned).
func TestTheFirstPostOfAReceiptFiledTwiceNeedsAPerson(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", ArgsJSON: `{"order":"A-5531","merge_into":"B-8888"}`})
	moved := e.append(t, withTarget(real, "B-8888"))
	genuine := e.append(t, real)
	if genuine.Verifier.DuplicateOf != moved.ID {
		t.Fatalf("the genuine post duplicates %q; want %s", genuine.Verifier.DuplicateOf, moved.ID[:12])
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "B-8888"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if d := decisions(rep)[moved.ID]; d.Passed || !strings.Contains(d.Detail, "posted this same signed receipt again with another action log") {
		t.Errorf("decision on the first post: %+v; want it to need a person", d)
	}
	if strings.Contains(rep.Reply, "under that permission, ran") {
		t.Errorf("reply %q tells the customer what the record cannot show", rep.Reply)
	}
}

// A real receipt that fails on its own (an incident: a scope not granted;
// unauthorized: its token expired), posted first under another
// customer's order and then by the pipeline as it was, does not flip or
// refuse the other customer's dispute: the drill of either order needs a
// person.
func TestAFailingRealReceiptFiledUnderAnotherOrderNeedsAPerson(t *testing.T) {
	for name, mint := range map[string]func(e *env) *pacttest.Receipt{
		"an incident": func(e *env) *pacttest.Receipt {
			return e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Granted: "orders:read"})
		},
		"unauthorized": func(e *env) *pacttest.Receipt {
			r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
			r.TokenClaims["exp"] = time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC).Unix()
			e.sc.Resign(r)
			return r
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, time.Now)
			real := mint(e)
			moved := e.append(t, withTarget(real, "B-8888"))
			e.append(t, real)
			if moved.Status == ledger.Authorized {
				t.Fatalf("the moved post is %s; want it to fail on its own", moved.Status)
			}
			for _, target := range []string{"B-8888", "A-5531"} {
				rep, err := e.r.Run(context.Background(), drill.Request{Target: target}, "lead")
				if err != nil {
					t.Fatal(err)
				}
				for id, d := range decisions(rep) {
					if d.Passed || !strings.Contains(d.Detail, "needs a person") {
						t.Errorf("drill of %s, decision on row %s: %+v; want it to need a person", target, id[:12], d)
					}
				}
				if strings.Contains(rep.Reply, "put it right") {
					t.Errorf("drill of %s: reply %q promises a remedy on an order the record does not show", target, rep.Reply)
				}
			}
		})
	}
}

// Where only one of two posts of a receipt files it under a target the
// signed args name, the decision still needs a person, and says which:
// the signed args name the genuine post's order, not the one the writer
// moved it to. Where the signed args name both, it says the record
// cannot tell.
func TestAReceiptFiledTwiceSaysWhichTargetTheSignedArgsName(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	moved := e.append(t, withTarget(real, "B-8888"))
	genuine := e.append(t, real)
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	want := "the signed args name this post's targets, where row " + moved.ID[:12] + "'s are the action log's alone"
	if d := decisions(rep)[genuine.ID]; d.Passed || !strings.Contains(d.Detail, want) {
		t.Errorf("decision on the genuine post: %+v; want it to need a person and say %q", d, want)
	}
	rep, err = e.r.Run(context.Background(), drill.Request{Target: "B-8888"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	want = "the signed args name row " + genuine.ID[:12] + "'s targets, where this row's are the action log's alone"
	if d := decisions(rep)[moved.ID]; d.Passed || !strings.Contains(d.Detail, want) {
		t.Errorf("decision on the moved post: %+v; want it to need a person and say %q", d, want)
	}
}

// A real receipt that signs its tool and no args hash (or args the agent
// did not sign, whose hash the ledger computes) names no object: the
// order id it is filed under is the action log's word alone. Filed under
// another customer's order, it is not answered as covered: the dispute
// drill needs a person, the reply does not say the agent ran it on that
// order, and the monthly drill does not pass it. A receipt whose signed
// args name its order still passes beside it.
func TestAReceiptThatSignsNoArgsDoesNotVouchForItsTarget(t *testing.T) {
	for _, args := range []string{"", `{"order":"C-1234"}`} {
		e := newEnv(t, time.Now)
		honest := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
		r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
		r.Claims["actions"] = []map[string]any{{"tool": "cancel_order"}}
		e.sc.Resign(r)
		r.Actions = []verifier.Action{{Tool: "cancel_order", Target: "C-1234", ArgsJSON: args}}
		row := e.append(t, r)
		if row.Status != ledger.Authorized || row.Actions[0].TargetSource != verifier.TargetFromWriter {
			t.Fatalf("args %q: status %v, target source %d; want authorized, the writer's", args, row.Status, row.Actions[0].TargetSource)
		}
		rep, err := e.r.Run(context.Background(), drill.Request{Target: "C-1234"}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if p := pulls(rep)[drill.PullActionLog]; p.Passed || !strings.Contains(p.Detail, "the target is the action log's alone") {
			t.Errorf("args %q: action log pull %+v; want it to say the target is the action log's alone", args, p)
		}
		if d := decisions(rep)[row.ID]; d.Passed || !strings.Contains(d.Detail, "needs a person: nothing signed names the target of cancel_order C-1234") {
			t.Errorf("args %q: decision %+v; want it to need a person", args, d)
		}
		if strings.Contains(rep.Reply, "under that permission, ran") || strings.Contains(rep.Reply, "on C-1234") ||
			!strings.Contains(rep.Reply, "We are checking a record of cancel_order at 7 October 2026 13:12 UTC that was filed under C-1234, which the signed request does not name.") {
			t.Errorf("args %q: reply %q; want it to say a record filed under C-1234 is being checked, not that the agent ran it there", args, rep.Reply)
		}
		m := monthly(t, e.l)
		if m.ChecksPassed == m.ChecksTotal {
			t.Errorf("args %q: the monthly drill passed %d of %d checks; want the row filed by the writer alone to fail", args, m.ChecksPassed, m.ChecksTotal)
		}
		got := decisions(m)
		if d, ok := got[row.ID]; !ok || d.Passed {
			t.Errorf("args %q: monthly decision on the row %+v (drilled %v); want it drilled and not passed", args, d, ok)
		}
		if d := got[honest.ID]; !d.Passed {
			t.Errorf("args %q: monthly decision on the row whose signed args name its order: %+v; want it passed", args, d)
		}
	}
}

// A drill by order matches the id exactly. A real action filed only
// under the id in another case (a pipeline that lower-cases ids, or a
// writer's choice) is not found by it, so the reply says what was
// searched, never that the ledger holds no record; the lead is pointed
// to the other spelling and to a drill of the customer. Only the
// customer's own rows there are mentioned in the reply: by order alone,
// they may be another order's, of another customer.
func TestADrillThatFindsNothingUnderTheOrderSaysWhatItSearched(t *testing.T) {
	e := newEnv(t, time.Now)
	real := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	row := e.append(t, withTarget(real, "a-5531"))
	if row.Status != ledger.Authorized {
		t.Fatalf("status %v", row.Status)
	}
	for _, c := range []struct {
		req         drill.Request
		reply, want string
	}{
		{drill.Request{Target: "A-5531"},
			"We found no record filed under order A-5531 in our ledger; a member of our team will also look for it under your account and get back to you.",
			`1 row filed under "a-5531", such as ` + row.ID[:12]},
		{drill.Request{Target: "A-5531", Principal: "acct-48213"},
			"We found no record filed under order A-5531 exactly as written; we hold records under your account filed under a similar id, which a member of our team will check and get back to you.",
			`1 row filed under "a-5531" for customer acct-48213, such as ` + row.ID[:12]},
	} {
		rep, err := e.r.Run(context.Background(), c.req, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Reply != c.reply {
			t.Errorf("drill %+v: reply %q, want %q", c.req, rep.Reply, c.reply)
		}
		if p := pulls(rep)[drill.PullReceiptRow]; p.Passed || !strings.Contains(p.Detail, "needs a person") || !strings.Contains(p.Detail, c.want) || !strings.Contains(p.Detail, "drill the customer alone") {
			t.Errorf("drill %+v: receipt_row pull %+v; want it to name %q and the drill of the customer", c.req, p, c.want)
		}
		if !strings.Contains(rep.Note, c.want) || !strings.Contains(rep.Note, "drill the customer alone") {
			t.Errorf("drill %+v: note %q; want it to name %q and the drill of the customer", c.req, rep.Note, c.want)
		}
	}
	// Nothing under any spelling: the reply still says only what was
	// searched, and that the customer's account will be looked at.
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "B-0001"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reply != "We found no record filed under order B-0001 in our ledger; a member of our team will also look for it under your account and get back to you." ||
		!strings.Contains(rep.Note, "drill the customer alone") || strings.Contains(rep.Note, "another case") {
		t.Errorf("drill of an order with no rows: note %q, reply %q", rep.Note, rep.Reply)
	}
}

// Look-ups filed under the order id are not said to be all that is held
// about it while rows are filed under the id in another case. Drilled
// with the customer, whose own row is filed there, the drill needs a
// person and names it; by order alone, the row may be another order's,
// so the lead's note names it and the drill does not fail for it.
func TestLookUpsAreNotTheOnlyRecordsWhileTheIdIsFiledInAnotherCase(t *testing.T) {
	e := newEnv(t, time.Now)
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
	row := e.append(t, withTarget(e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}), "a-5531"))

	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	want := `1 row filed under "a-5531" for customer acct-48213, such as ` + row.ID[:12]
	if p := pulls(rep)[drill.PullReceiptRow]; p.Passed || !strings.Contains(p.Detail, "needs a person") || !strings.Contains(p.Detail, want) || !strings.Contains(rep.Note, want) {
		t.Errorf("with the customer: receipt_row pull %+v, note %q; want it to need a person and name %q", p, rep.Note, want)
	}
	if strings.Contains(rep.Reply, "The only records") || !strings.Contains(rep.Reply, "We hold other records under your account, filed under a similar id") {
		t.Errorf("with the customer: reply %q; want it not to say the look-ups are the only records", rep.Reply)
	}

	rep, err = e.r.Run(context.Background(), drill.Request{Target: "A-5531"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	want = `1 row filed under "a-5531", such as ` + row.ID[:12]
	if len(rep.Pulls) != 0 || !strings.Contains(rep.Note, want) {
		t.Errorf("by order alone: pulls %+v, note %q; want nothing scored and the note to name %q", rep.Pulls, rep.Note, want)
	}
	if r := "The records we hold filed under A-5531 are look-ups your agent made: they showed information and changed nothing."; rep.Reply != r {
		t.Errorf("by order alone: reply %q, want %q", rep.Reply, r)
	}
}

// A-5531 and a-5531 may be two orders of two customers, and any writer
// key can file a row under either: a drill of one customer's order is
// never decided, noted or answered by another customer's row under the
// id in another case.
func TestAnotherCustomersRowUnderTheIdInAnotherCaseDoesNotAnswerTheCustomer(t *testing.T) {
	e := newEnv(t, time.Now)
	other := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-99999", GrantID: "a2agrant_OTHER", Target: "a-5531"}))
	req := drill.Request{Target: "A-5531", Principal: "acct-48213"}

	// No row of the customer's under the order.
	rep, err := e.r.Run(context.Background(), req, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rep.Note, other.ID[:12]) || strings.Contains(rep.Reply, "similar id") {
		t.Errorf("no row: note %q, reply %q; want neither to speak of acct-99999's row %s", rep.Note, rep.Reply, other.ID[:12])
	}

	// The customer's look-ups alone.
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
	rep, err = e.r.Run(context.Background(), req, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pulls) != 0 || strings.Contains(rep.Note, other.ID[:12]) || strings.Contains(rep.Reply, "similar id") {
		t.Errorf("look-ups: pulls %+v, note %q, reply %q; want nothing scored and no word of acct-99999's row %s", rep.Pulls, rep.Note, rep.Reply, other.ID[:12])
	}
}

// A real receipt filed under an order its signed args do not name, and
// a re-post of it (its own row, with other limits): the re-post is a
// replay of the first, and neither row's part of the reply says the
// action was on that order, only that its record was filed under it.
func TestAReplayOfARowWhoseTargetNothingSignedNamesDoesNotSayTheActionWasOnIt(t *testing.T) {
	e := newEnv(t, time.Now)
	r := withTarget(e.sc.Mint(pacttest.Spec{Target: "A-5531"}), "C-1234")
	first := e.append(t, r)
	dup := e.appendWith(t, r, &ledger.Limits{CountMax: 5})
	if dup.ID == first.ID || dup.Verifier.DuplicateOf == "" {
		t.Fatalf("re-post: row %s, duplicate of %q; want a row of its own that repeats %s", dup.ID, dup.Verifier.DuplicateOf, first.ID)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "C-1234"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rep.Reply, "on C-1234") || !strings.Contains(rep.Reply, "The record of cancel_order at ") || !strings.Contains(rep.Reply, "that was filed under C-1234 repeats") {
		t.Errorf("reply %q; want the replay said of a record filed under C-1234, never an action on it", rep.Reply)
	}
}

// A Provider that signs no args hash (PACT lets it leave argsHash out)
// fails the monthly drill on every row that changed something: nothing
// signed names what the action changed. The report gives those failures
// one cause, naming the rows, and leaves a row whose signed args name
// its order out of it; the decisions do not change.
func TestTheMonthlyDrillGivesRowsWhoseReceiptSignsNoArgsOneCause(t *testing.T) {
	e := newEnv(t, time.Now)
	honest := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	var noArgs []*ledger.Row
	for i, target := range []string{"C-1234", "C-1235"} {
		r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: target, GrantID: fmt.Sprint("a2agrant_NOARGS", i)})
		r.Claims["actions"] = []map[string]any{{"tool": "cancel_order"}}
		e.sc.Resign(r)
		r.Actions = []verifier.Action{{Tool: "cancel_order", Target: target}}
		noArgs = append(noArgs, e.append(t, r))
	}
	m := monthly(t, e.l)
	if len(m.Rows) != 3 {
		t.Fatalf("monthly drilled %v; want the 3 rows", m.Rows)
	}
	for _, row := range noArgs {
		if d := decisions(m)[row.ID]; d.Passed || !strings.Contains(d.Detail, "needs a person: nothing signed names the target of") {
			t.Errorf("decision on %s: %+v; want it to need a person", row.ID[:12], d)
		}
	}
	want := "2 rows need a person: the Provider signs no args, so nothing signed names what the action changed (rows "
	if !strings.Contains(m.Note, want) || !strings.Contains(m.Note, noArgs[0].ID[:12]) || !strings.Contains(m.Note, noArgs[1].ID[:12]) || strings.Contains(m.Note, honest.ID[:12]) {
		t.Errorf("note %q; want it to say %q and name the two rows, not %s", m.Note, want, honest.ID[:12])
	}
}
