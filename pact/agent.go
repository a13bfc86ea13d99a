package pact

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
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
// account changes, which need a signed-in grant.
type Scripted struct{}

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
	if tool := wantsChange(text); tool != "" {
		r, err := reply("I can't change orders in this chat: that needs you to sign in with " + t.Brand.Organization + " and approve it. I can tell you an order's status.")
		r.Refused = &RefusedAction{Tool: tool, Target: st.Order}
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

// wantsChange names the account action a message asks for, or "".
func wantsChange(text string) string {
	for _, w := range []struct{ words, tool string }{{"cancel", "cancel_order"}, {"refund", "issue_refund"}, {"change my address", "change_address"},
		{"change address", "change_address"}, {"update address", "change_address"}} {
		if strings.Contains(text, w.words) {
			return w.tool
		}
	}
	return ""
}

// delegatedTurn acts as the Brand user the token names, within its scopes:
// the user's own orders, read with orders:read, cancelled with orders:cancel.
func delegatedTurn(t Turn, st *scriptState, text string, reply func(string) (Reply, error)) (Reply, error) {
	has := func(s string) bool {
		for _, g := range t.Scopes {
			if g == s {
				return true
			}
		}
		return false
	}
	if st.Order == "" {
		return reply("Which order is this about? Please give me the order number.")
	}
	o := t.Brand.order(st.Order)
	if o == nil || o.Account != t.User {
		return reply(fmt.Sprintf("I can't find order %s on your account.", st.Order))
	}
	need := "orders:read"
	if strings.Contains(text, "cancel") {
		need = "orders:cancel"
	}
	if !has(need) {
		r, err := reply(fmt.Sprintf("I need your permission (%s) to do that.", need))
		r.NeedScopes = []string{need}
		return r, err
	}
	status, err := t.Orders.Status(o)
	if err != nil {
		return Reply{}, err
	}
	args := fmt.Sprintf(`{"order":%q}`, o.ID)
	if need == "orders:read" {
		r, err := reply(fmt.Sprintf("Order %s is %s (total %s).", o.ID, status, o.Total))
		r.Actions, r.ScopesUsed = []ActionTaken{{Tool: "lookup_orders", Target: o.ID, ArgsJSON: args}}, []string{"orders:read"}
		return r, err
	}
	if status != "processing" {
		return reply(fmt.Sprintf("Order %s is %s and can no longer be cancelled.", o.ID, status))
	}
	if err := t.Orders.SetStatus(o, "cancelled"); err != nil {
		return Reply{}, err
	}
	r, err := reply(fmt.Sprintf("Order %s is cancelled. The refund of %s posts in 3 to 5 days.", o.ID, o.Total))
	r.Actions, r.ScopesUsed = []ActionTaken{{Tool: "cancel_order", Target: o.ID, ArgsJSON: args}}, []string{"orders:cancel"}
	return r, err
}
