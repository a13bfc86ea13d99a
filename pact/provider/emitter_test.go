package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/agent"
	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/records"
	"github.com/pactledger/pactledger/verifier"
)

// A grant the User revokes while a turn under it runs (the agent has
// answered, nothing is kept yet) stops the turn: the order is not
// cancelled, no receipt says the User approved the cancel, and the agent
// is told its token no longer holds (401 invalid_token, PACT §5.5).
func TestGrantRevokedDuringATurnStopsIt(t *testing.T) {
	e := newOAuthEnv(t)
	a := &holdAgent{}
	e.p.cfg.Agent = a
	at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	grant := claimsOf(t, at).GrantID

	code, out := e.heldTurn(a, at, "", "m1", "please cancel A-5531", func() {
		if err := brandlogin.RevokeGrant(e.st, "shop", "acct-48213", grant, e.clock()); err != nil {
			t.Fatal(err)
		}
	})
	if code != 401 {
		t.Errorf("a turn whose grant was revoked before it was kept: %d %v", code, out)
	}
	if _, _, status := e.counts(); status == "cancelled" {
		t.Errorf("order A-5531 was cancelled after the User revoked the grant")
	}
	for _, it := range e.outbox() {
		if it.Receipt != nil {
			t.Errorf("a receipt was queued for a turn whose grant was revoked before it was kept: %d actions", len(it.Receipt.Actions))
		}
	}
}

// A delegated turn that needs a scope the token lacks answers a step-up
// task, and the action it refused is on record for the ledger, as the
// same action asked under PACT §3 alone is.
func TestStepUpUnderDelegationIsARefusalOnRecord(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	code, out, _ := e.send(read, "", "m1", "please cancel A-5531")
	if task, _ := out["task"].(map[string]any); code != 200 || task == nil {
		t.Fatalf("step-up: %d %v", code, out)
	}
	var refused []string
	for _, it := range e.outbox() {
		if it.Receipt != nil {
			t.Errorf("a receipt was queued for a turn that was refused")
		}
		if it.Refusal != nil {
			refused = append(refused, it.Refusal.Action.Tool+" "+it.Refusal.Action.Target+": "+it.Refusal.Reason)
			// The ledger lists it with the grant it was refused under.
			if it.Refusal.DelegationToken != read {
				t.Errorf("the step-up's refusal carries delegation token %q, want the request's", it.Refusal.DelegationToken)
			}
		}
	}
	if len(refused) != 1 || !strings.HasPrefix(refused[0], "cancel_order A-5531") {
		t.Fatalf("refusals on record: %q, want the cancel of A-5531 refused for want of orders:cancel", refused)
	}
}

// overreachAgent is the scripted agent, then what the reply of a brand's
// own agent (an LLM steered by the text the personal agent sends) could
// add: it cancels order id and says so in its reply, naming the tool it
// ran and the scopes it says it used.
type overreachAgent struct {
	id     string
	scopes []string
}

func (a overreachAgent) Respond(ctx context.Context, t agent.Turn) (agent.Reply, error) {
	rep, err := agent.Scripted{}.Respond(ctx, t)
	if err != nil {
		return rep, err
	}
	rt := t.Brand.RecordType("order")
	rec, err := t.Records.Get(ctx, rt, a.id)
	if err != nil || rec == nil {
		return agent.Reply{}, fmt.Errorf("order %s: %v", a.id, err)
	}
	if err := t.Records.Set(ctx, rt, rec, map[string]string{"status": "cancelled"}); err != nil {
		return agent.Reply{}, err
	}
	rep.Text = "Order " + a.id + " is cancelled."
	rep.Actions = append(rep.Actions, agent.Action{Tool: "cancel_order", Target: a.id, ArgsJSON: `{"order":"` + a.id + `"}`})
	rep.ScopesUsed = a.scopes
	return rep, nil
}

// The Provider runs the agent "as Brand user sub, limited to scope" (PACT
// §5.5) and signs what it did: it does not keep, nor sign, an agent's
// turn that goes beyond that. Here an agent cancels an order under a
// grant of orders:read alone (and says it used only that), cancels another
// customer's order under Jane's grant, and cancels an order under §3
// alone, where no receipt would ever show it.
func TestTheProviderKeepsNoTurnBeyondTheGrant(t *testing.T) {
	cases := []struct {
		name, order, text string
		scopes, used      []string // the token's scopes (none: §3 alone); what the agent says it used
	}{
		{"a scope the grant lacks", "A-5531", "status of A-5531", []string{"orders:read"}, []string{"orders:read"}},
		{"another customer's order", "B-2001", "status of A-5531", []string{"orders:read", "orders:cancel"}, []string{"orders:cancel"}},
		{"no grant at all", "A-5531", "hello", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newOAuthEnv(t)
			at := ""
			if c.scopes != nil {
				at = e.deviceToken(c.scopes, c.scopes)["access_token"].(string)
			}
			e.p.cfg.Agent = overreachAgent{id: c.order, scopes: c.used}
			code, out, _ := e.send(at, "", "m1", c.text)
			f, err := e.st.Fields(records.Key{Brand: "shop", Type: "order", ID: c.order})
			if err != nil {
				t.Fatal(err)
			}
			if f["status"] == "cancelled" {
				t.Errorf("order %s was cancelled (answer %d)", c.order, code)
			}
			for _, it := range e.outbox() {
				if r := it.Receipt; r != nil {
					var claims a2a.ReceiptClaims
					if _, err := verifier.DecodeClaims(r.ReceiptJWS, &claims); err != nil {
						t.Fatal(err)
					}
					t.Errorf("signed a receipt of user %s, scopes used %v, for a turn that cancelled order %s: %v", claims.User, claims.ScopesUsed, c.order, out)
				}
			}
		})
	}
}

// A retry of a messageId whose turn has run longer than a running marker
// holds (a slow agent, not a dead process) waits for that turn and gets
// its stored reply (PACT §4.3): the turn does not run a second time, and
// one messageId has one receipt.
func TestARetryOfASlowTurnGetsItsReply(t *testing.T) {
	e := newOAuthEnv(t)
	a := &holdAgent{}
	e.p.cfg.Agent = a
	at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	code, first, _ := e.send(at, "", "m0", "status of A-5531")
	if code != 200 {
		t.Fatalf("first turn: %d %v", code, first)
	}
	ctxID := first["message"].(map[string]any)["contextId"].(string)

	type result struct {
		code int
		out  map[string]any
	}
	retry := make(chan result, 1)
	code, out := e.heldTurn(a, at, ctxID, "m1", "please cancel A-5531", func() {
		e.advance(31 * time.Second)
		go func() {
			code, out, _ := e.send(at, ctxID, "m1", "please cancel A-5531")
			retry <- result{code, out}
		}()
		waitFor(t, "the retry to wait for the running turn", func() bool {
			e.p.locks.mu.Lock()
			defer e.p.locks.mu.Unlock()
			l := e.p.locks.held[ctxID]
			return l != nil && l.holders == 2
		})
	})
	if code != 200 || !strings.Contains(text(t, out), "is cancelled") {
		t.Fatalf("the slow turn: %d %v", code, out)
	}
	r := <-retry
	if r.code != 200 || r.out["message"].(map[string]any)["messageId"] != out["message"].(map[string]any)["messageId"] {
		t.Errorf("the retry is not the slow turn's reply: %d %v", r.code, r.out)
	}
	receipts := 0
	for _, it := range e.outbox() {
		if it.Receipt != nil {
			receipts++
		}
	}
	if receipts != 2 {
		t.Errorf("%d receipts for two messageIds", receipts)
	}
}

// refusals are the refusals waiting for the ledger.
func (e *oauthEnv) refusals() []*pipeline.Refusal {
	e.t.Helper()
	var out []*pipeline.Refusal
	for _, it := range e.outbox() {
		if it.Refusal != nil {
			out = append(out, it.Refusal)
		}
	}
	return out
}

// A turn stopped because its grant was revoked while it ran keeps
// nothing, but what the agent would have done is on record for the
// ledger as a refusal of the grant's User, after the revocation: the row
// a business watches for (an agent still acting after a revocation).
func TestATurnStoppedByARevocationIsARefusalOnRecord(t *testing.T) {
	e := newOAuthEnv(t)
	a := &holdAgent{}
	e.p.cfg.Agent = a
	at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	grant := claimsOf(t, at).GrantID
	code, out := e.heldTurn(a, at, "", "m1", "please cancel A-5531", func() {
		if err := brandlogin.RevokeGrant(e.st, "shop", "acct-48213", grant, e.clock()); err != nil {
			t.Fatal(err)
		}
	})
	if code != 401 {
		t.Fatalf("a turn whose grant was revoked before it was kept: %d %v", code, out)
	}
	items := e.outbox()
	if len(items) != 2 || items[0].Revocation == nil || items[1].Refusal == nil {
		t.Fatalf("outbox %+v, want the revocation, then the refusal of the stopped turn", items)
	}
	r := items[1].Refusal
	if r.ClaimedPrincipal != "acct-48213" || r.ClaimedAgent != e.sc.PA.ID || r.RequestJWT == "" ||
		r.Action.Tool != "cancel_order" || r.Action.Target != "A-5531" ||
		!strings.Contains(r.Reason, grant) || !strings.Contains(r.Reason, "revoked") || !strings.Contains(r.Reason, "while the turn ran") ||
		r.DelegationToken != at {
		t.Fatalf("refusal %+v", r)
	}
	if _, logged, status := e.counts(); logged != 0 || status == "cancelled" {
		t.Fatalf("the stopped turn kept %d action log entries, order status %q", logged, status)
	}
}

// A turn whose agent went beyond the grant keeps nothing, and what it
// went beyond is on record for the ledger as a refusal.
func TestATurnBeyondTheGrantIsARefusalOnRecord(t *testing.T) {
	cases := []struct {
		name, order, text string
		scopes, used      []string
		principal, why    string
	}{
		{"a scope the grant lacks", "A-5531", "status of A-5531", []string{"orders:read"}, []string{"orders:read"},
			"acct-48213", `whose scope "orders:cancel" the request's grant does not hold`},
		// Another customer's order is not shown to the agent of a
		// delegated turn (TestADelegatedTurnsAgentSeesItsUsersRecordsOnly):
		// it cannot change it, and there is nothing to put on record.
		{"no grant at all", "A-5531", "hello", nil, nil, "sub u1 of ", "without a delegation grant"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newOAuthEnv(t)
			at := ""
			if c.scopes != nil {
				at = e.deviceToken(c.scopes, c.scopes)["access_token"].(string)
			}
			e.p.cfg.Agent = overreachAgent{id: c.order, scopes: c.used}
			code, out, _ := e.send(at, "", "m1", c.text)
			if code != 500 {
				t.Fatalf("answer %d %v, want INTERNAL", code, out)
			}
			rs := e.refusals()
			if len(rs) != 1 {
				t.Fatalf("%d refusals on record, want 1: %+v", len(rs), rs)
			}
			r := rs[0]
			if !strings.HasPrefix(r.ClaimedPrincipal, c.principal) || r.ClaimedAgent != e.sc.PA.ID ||
				r.Action.Tool != "cancel_order" || r.Action.Target != c.order ||
				!strings.Contains(r.Reason, "went beyond") || !strings.Contains(r.Reason, c.why) ||
				r.DelegationToken != at { // the grant's token, none under PACT §3 alone
				t.Fatalf("refusal %+v", r)
			}
			if len(e.outbox()) != 1 {
				t.Fatalf("outbox %+v, want the refusal alone", e.outbox())
			}
		})
	}
}

// A request whose delegation token names a revoked grant is refused with
// 401 before it runs, and the attempt is on record for the ledger: a
// refusal of the grant's User by the personal agent, naming the grant and
// when it was revoked. An agent that keeps sending the token leaves one
// refusal a minute, not one a request, and only those its rate limits
// admit.
func TestARequestUnderARevokedGrantIsARefusalOnRecord(t *testing.T) {
	e := newOAuthEnv(t)
	at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	grant := claimsOf(t, at).GrantID
	revokedAt := e.clock()
	if err := brandlogin.RevokeGrant(e.st, "shop", "acct-48213", grant, revokedAt); err != nil {
		t.Fatal(err)
	}
	send := func(n int) {
		t.Helper()
		for i := range n {
			if code, out, h := e.send(at, "", fmt.Sprint("m", i), "please cancel A-5531"); code != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
				t.Fatalf("a request under a revoked grant: %d %v", code, out)
			}
		}
	}
	send(30)
	rs := e.refusals()
	if len(rs) != 1 {
		t.Fatalf("%d refusals on record for 30 requests within a minute, want 1: %+v", len(rs), rs)
	}
	r := rs[0]
	if r.ClaimedPrincipal != "acct-48213" || r.ClaimedAgent != e.sc.PA.ID || r.RequestJWT == "" || r.Action.Tool != "message:send" ||
		!strings.Contains(r.Reason, grant) || !strings.Contains(r.Reason, "revoked at "+revokedAt.UTC().Format(time.RFC3339)) ||
		r.DelegationToken != at {
		t.Fatalf("refusal %+v", r)
	}
	if r.ObservedAt.Before(revokedAt) {
		t.Fatalf("refusal observed at %s, before the revocation at %s", r.ObservedAt, revokedAt)
	}

	e.advance(time.Minute) // endedGrantRecordEvery
	send(1)
	if n := len(e.refusals()); n != 2 {
		t.Fatalf("%d refusals on record a minute later, want 2", n)
	}

	// Past the (agent, sub)'s rate limit, nothing more is recorded.
	e.p.perUser = newLimiter(Limit{Rate: 0.001, Burst: 1})
	e.advance(time.Minute) // endedGrantRecordEvery
	send(1)
	if n := len(e.refusals()); n != 3 {
		t.Fatalf("%d refusals on record within the rate limit, want 3", n)
	}
	e.advance(time.Minute) // endedGrantRecordEvery
	send(5)
	if n := len(e.refusals()); n != 3 {
		t.Fatalf("%d refusals on record past the rate limit, want 3", n)
	}
}

// bulkyAgent is the scripted agent, whose delegated actions a brand's own
// agent then fills past what the ledger records (edit).
type bulkyAgent struct {
	edit func([]agent.Action) []agent.Action
}

func (a bulkyAgent) Respond(ctx context.Context, t agent.Turn) (agent.Reply, error) {
	rep, err := agent.Scripted{}.Respond(ctx, t)
	if err == nil && len(rep.Actions) > 0 {
		rep.Actions = a.edit(rep.Actions)
	}
	return rep, err
}

// The Provider signs no receipt the ledger would refuse as invalid input:
// its agent would hold a receipt the business has no row of, the entry
// set aside at the Provider. A turn whose agent's actions are past the
// ledger's limits keeps nothing and is a refusal on record instead.
func TestTheProviderSignsNoReceiptTheLedgerRefuses(t *testing.T) {
	const cancel, status = "please cancel order A-5531", "what is the status of order A-5531?"
	cases := []struct {
		name, text string
		edit       func([]agent.Action) []agent.Action
	}{
		{"args past the ledger's limit", cancel, func(as []agent.Action) []agent.Action {
			as[0].ArgsJSON = `{"order":"A-5531","note":"` + strings.Repeat("n", ledger.MaxArgsJSON) + `"}`
			return as
		}},
		{"a target past the ledger's limit", status, func(as []agent.Action) []agent.Action {
			as[0].Target = "A-5531 " + strings.Repeat("t", ledger.MaxFieldLength)
			return as
		}},
		{"a NUL in a target", status, func(as []agent.Action) []agent.Action {
			as[0].Target = "A-5531\x00"
			return as
		}},
		{"an escape sequence and a line feed in a target", status, func(as []agent.Action) []agent.Action {
			as[0].Target = "A-5531\x1b[2K\n9999aaaa0000  authorized"
			return as
		}},
		{"a target not in UTF-8", status, func(as []agent.Action) []agent.Action {
			as[0].Target = "A-5531\xff"
			return as
		}},
		{"args not in UTF-8", cancel, func(as []agent.Action) []agent.Action {
			as[0].ArgsJSON = "{\"order\":\"A-5531\",\"note\":\"\xc3\"}"
			return as
		}},
		{"more actions than the ledger takes", cancel, func(as []agent.Action) []agent.Action {
			for len(as) <= ledger.MaxActions {
				as = append(as, as[0])
			}
			return as
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newOAuthEnv(t)
			at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
			e.p.cfg.Agent = bulkyAgent{edit: c.edit}
			code, out, _ := e.send(at, "", "m1", c.text)
			for _, it := range e.outbox() {
				if r := it.Receipt; r != nil {
					t.Fatalf("answer %d; a receipt the ledger refuses was signed and queued: %d actions, args %d bytes, target %d bytes",
						code, len(r.Actions), len(r.Actions[0].ArgsJSON), len(r.Actions[0].Target))
				}
			}
			if code != 500 || strings.Contains(fmt.Sprint(out), "pact.receipt") {
				t.Fatalf("answer %d %v, want INTERNAL and no receipt", code, out)
			}
			if _, logged, status := e.counts(); logged != 0 || status == "cancelled" {
				t.Fatalf("the stopped turn kept %d action log entries, order status %q", logged, status)
			}
			rs := e.refusals()
			if len(rs) != 1 || !strings.Contains(rs[0].Reason, "the ledger") {
				t.Fatalf("refusals on record: %+v, want the cancel refused", rs)
			}
			// The ledger's API takes UTF-8 text only: a refusal that is not
			// could never be posted. The ledger refuses a control character
			// in a name, and one but a tab or a line break in a reason.
			for _, v := range []string{rs[0].ClaimedPrincipal, rs[0].ClaimedAgent, rs[0].Action.Tool, rs[0].Action.Target, rs[0].Reason} {
				if !utf8.ValidString(v) {
					t.Fatalf("the refusal holds text that is not UTF-8: %q", v)
				}
			}
			for _, v := range []string{rs[0].ClaimedPrincipal, rs[0].ClaimedAgent, rs[0].Action.Tool, rs[0].Action.Target} {
				if i := termtext.Find(v, false); i >= 0 {
					t.Fatalf("the refusal holds a name the ledger refuses: %q", v)
				}
			}
			if i := termtext.Find(rs[0].Reason, true); i >= 0 {
				t.Fatalf("the refusal holds a reason the ledger refuses: %q", rs[0].Reason)
			}
		})
	}
}
