package pact

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Turn is one user message to a brand agent, with who is asking.
type Turn struct {
	Brand *Brand
	// PA and Sub identify the User (PACT §3.3: not a Brand account).
	PA, Sub string
	Text    string
	// State is the agent's state for the context from the previous turn.
	State json.RawMessage
	// User is the Brand user a delegation token lets the agent act as, and
	// Scopes what it allows (PACT §5.5); empty under §3 alone.
	User   string
	Scopes []string
	// Orders reads and changes the Brand's order records.
	Orders OrderBook
}

// OrderBook is the Brand's order records as the agent sees them.
type OrderBook interface {
	Status(order *Order) (string, error)
	SetStatus(order *Order, status string) error
}

// ActionTaken is one tool the agent ran, with its exact args JSON, for the
// receipt (argsHash) and the application action log.
type ActionTaken struct {
	Tool     string
	Target   string
	ArgsJSON string
}

// Reply is an agent's answer and its new state for the context.
type Reply struct {
	Text  string
	State json.RawMessage
	// Close ends the conversation (later messages get UNSUPPORTED_OPERATION).
	Close bool
	// Actions the turn ran and the scopes they used (delegated turns).
	Actions    []ActionTaken
	ScopesUsed []string
	// NeedScopes asks for a step-up: the turn needs these scopes, which the
	// token lacks (PACT §5.5).
	NeedScopes []string
	// Refused is an account action the agent refused because the request
	// carried no delegation (PACT §3 alone); the Provider reports it to the
	// ledger as a refusal.
	Refused *RefusedAction
}

// Agent is a brand's support agent. The scripted agent below is the
// default; a real (LLM) agent implements the same interface.
type Agent interface {
	Respond(ctx context.Context, t Turn) (Reply, error)
}

// Scripted is a deterministic agent for brands defined by data. Under PACT
// §3 alone it verifies the user the way a chat widget does (order number,
// then the email on the account) before it reveals anything, and refuses
// account changes, which need a signed-in grant. Under delegation it runs
// the Brand's intents (Brand.Intents), each needing the scope the brand
// file names for it; it never asks for a scope the Brand does not define.
type Scripted struct{}

// scriptedTools are the tools the scripted agent knows: whether each
// changes the account (refused under §3 alone) and whether it can run it
// under delegation.
var scriptedTools = map[string]struct{ change, runs bool }{
	"lookup_orders":  {change: false, runs: true},
	"cancel_order":   {change: true, runs: true},
	"issue_refund":   {change: true, runs: false},
	"change_address": {change: true, runs: false},
}

type scriptState struct {
	Order    string `json:"order,omitempty"`
	Verified bool   `json:"verified,omitempty"`
}

var (
	orderRef = regexp.MustCompile(`\b([A-Za-z]-\d{3,})\b`)
	emailRef = regexp.MustCompile(`[^\s@]+@[^\s@]+\.[^\s@]+`)
)

// Respond implements Agent.
func (Scripted) Respond(_ context.Context, t Turn) (Reply, error) {
	var st scriptState
	if len(t.State) > 0 {
		if err := json.Unmarshal(t.State, &st); err != nil {
			return Reply{}, fmt.Errorf("agent state: %w", err)
		}
	}
	text := strings.ToLower(t.Text)
	reply := func(s string) (Reply, error) {
		b, err := json.Marshal(st)
		return Reply{Text: s, State: b}, err
	}
	if strings.Contains(text, "bye") || strings.Contains(text, "that's all") {
		b, _ := json.Marshal(st)
		return Reply{Text: "Thanks for contacting " + t.Brand.Name + ". Goodbye.", State: b, Close: true}, nil
	}
	if m := orderRef.FindStringSubmatch(t.Text); m != nil {
		st.Order, st.Verified = strings.ToUpper(m[1]), false
	}
	if t.User != "" {
		return delegatedTurn(t, &st, text, reply)
	}
	if in := t.Brand.intent(text); in != nil && scriptedTools[in.Tool].change {
		msg := "I can't change orders in this chat: that needs you to sign in with " + t.Brand.Organization + " and approve it. I can tell you an order's status."
		if !t.Brand.grantable(in.Tool) {
			// No grant could allow it here: nothing to sign in for.
			msg = "I can't do that here. I can tell you an order's status."
		}
		r, err := reply(msg)
		r.Refused = &RefusedAction{Tool: in.Tool, Target: st.Order}
		return r, err
	}
	if st.Order == "" {
		return reply("I can help with your order. What is the order number?")
	}
	o := t.Brand.order(st.Order)
	if !st.Verified {
		e := emailRef.FindString(t.Text)
		if e == "" {
			return reply(fmt.Sprintf("To look up order %s, what is the email address on the account?", st.Order))
		}
		var acct *Account
		if o != nil {
			acct = t.Brand.account(o.Account)
		}
		if acct == nil || !strings.EqualFold(acct.Email, e) {
			// Say the same whether the order exists or not.
			st.Order = ""
			return reply("I couldn't match that order number and email. Please check both and try again.")
		}
		st.Verified = true
	}
	return reply(fmt.Sprintf("Order %s is %s (total %s).", o.ID, o.Status, o.Total))
}

// delegatedTurn acts as the Brand user the token names, on their own
// orders, running the intent the message asks for when the token grants
// the scope the Brand's file names for it; a missing scope that is on the
// card asks for a step-up, one that is not is answered in chat.
func delegatedTurn(t Turn, st *scriptState, text string, reply func(string) (Reply, error)) (Reply, error) {
	if st.Order == "" {
		return reply("Which order is this about? Please give me the order number.")
	}
	o := t.Brand.order(st.Order)
	if o == nil || o.Account != t.User {
		return reply(fmt.Sprintf("I can't find order %s on your account.", st.Order))
	}
	in := t.Brand.intent(text)
	if in == nil || !scriptedTools[in.Tool].runs || in.Scope == "" || t.Brand.scope(in.Scope) == nil {
		// PACT §5.2: only scope ids on the card are asked for; without
		// one for this, no grant can allow it.
		return reply("I can't do that here.")
	}
	if !slices.Contains(t.Scopes, in.Scope) {
		r, err := reply(fmt.Sprintf("I need your permission (%s) to do that.", in.Scope))
		r.NeedScopes = []string{in.Scope}
		return r, err
	}
	status, err := t.Orders.Status(o)
	if err != nil {
		return Reply{}, err
	}
	args := fmt.Sprintf(`{"order":%q}`, o.ID)
	act := func(r Reply, err error) (Reply, error) {
		r.Actions, r.ScopesUsed = []ActionTaken{{Tool: in.Tool, Target: o.ID, ArgsJSON: args}}, []string{in.Scope}
		return r, err
	}
	if in.Tool == "lookup_orders" {
		return act(reply(fmt.Sprintf("Order %s is %s (total %s).", o.ID, status, o.Total)))
	}
	if status != "processing" {
		return reply(fmt.Sprintf("Order %s is %s and can no longer be cancelled.", o.ID, status))
	}
	if err := t.Orders.SetStatus(o, "cancelled"); err != nil {
		return Reply{}, err
	}
	return act(reply(fmt.Sprintf("Order %s is cancelled. The refund of %s posts in 3 to 5 days.", o.ID, o.Total)))
}
