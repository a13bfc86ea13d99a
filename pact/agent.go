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
}

// Reply is an agent's answer and its new state for the context.
type Reply struct {
	Text  string
	State json.RawMessage
	// Close ends the conversation (later messages get UNSUPPORTED_OPERATION).
	Close bool
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
	if wantsChange(text) {
		return reply("I can't change orders in this chat: that needs you to sign in with " + t.Brand.Organization + " and approve it. I can tell you an order's status.")
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

func wantsChange(text string) bool {
	for _, w := range []string{"cancel", "refund", "change my address", "change address", "update address"} {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}
