package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pactledger/pactledger/pact/brand"
)

// Scripted is a deterministic agent for brands defined by data: it does
// what the brand file's records, tools and intents say. Under PACT §3
// alone it verifies the user the way a chat widget does (record id, then
// the email on the account) before it reveals anything, answers lookups
// (read_only tools), and refuses account changes, which need a signed-in
// grant. Under delegation it runs the intent's tool on the Brand user's own
// record when the token grants the tool's scope; it never asks for a scope
// the Brand does not define.
type Scripted struct{}

type scriptState struct {
	Type     string `json:"type,omitempty"`
	Record   string `json:"record,omitempty"`
	Verified bool   `json:"verified,omitempty"`
	// Order is the record of a conversation kept before brands defined
	// their record types: an order.
	Order string `json:"order,omitempty"`
}

var emailRef = regexp.MustCompile(`[^\s@]+@[^\s@]+\.[^\s@]+`)

// Respond implements Agent.
func (Scripted) Respond(ctx context.Context, t Turn) (Reply, error) {
	b := t.Brand
	var st scriptState
	if len(t.State) > 0 {
		if err := json.Unmarshal(t.State, &st); err != nil {
			return Reply{}, fmt.Errorf("agent state: %w", err)
		}
	}
	if st.Order != "" && st.Record == "" && len(b.Records) > 0 {
		st.Type, st.Record = b.Records[0].Type, st.Order
	}
	st.Order = ""
	reply := func(s string) (Reply, error) {
		j, err := json.Marshal(st)
		return Reply{Text: s, State: j}, err
	}
	lower := strings.ToLower(t.Text)
	if strings.Contains(lower, "bye") || strings.Contains(lower, "that's all") {
		r, err := reply("Thanks for contacting " + b.Name + ". Goodbye.")
		r.Close = true
		return r, err
	}
	if len(b.Records) == 0 {
		return reply("I can't help with that here.")
	}
	if rt, id := b.FindRecordID(t.Text); rt != nil {
		st.Type, st.Record, st.Verified = rt.Type, strings.ToUpper(id), false
	}
	m := b.Match(t.Text)
	rt := b.Records[0]
	if m != nil {
		rt = m.Tool.RecordType()
	} else if cur := b.RecordType(st.Type); cur != nil {
		rt = cur
	}
	if t.User != "" {
		return delegatedTurn(ctx, t, &st, m, rt, reply)
	}
	if m != nil && m.Tool.Changes() {
		target := ""
		if st.Type == rt.Type {
			target = st.Record
		}
		refused := &Refusal{Tool: m.Tool.Name, Target: target}
		var r Reply
		var err error
		switch {
		case !b.Grantable(m.Tool.Name):
			// No grant could allow it here: nothing to sign in for.
			r, err = reply(fmt.Sprintf("I can't do that here. I can look up %s for you.", article(rt.Type)))
		case b.WithoutToken == brand.StepUp:
			r, err = reply(fmt.Sprintf("I need your permission (%s) to do that: sign in with %s and approve it.", m.Tool.Scope, b.Organization))
			r.NeedScopes = []string{m.Tool.Scope}
		default:
			r, err = reply(fmt.Sprintf("I can't change %s in this chat: that needs you to sign in with %s and approve it. I can look up %s for you.",
				rt.PluralName(), b.Organization, article(rt.Type)))
		}
		r.Refused = refused
		return r, err
	}
	if st.Record == "" || st.Type != rt.Type {
		return reply(fmt.Sprintf("I can help with your %s. What is the %s number?", rt.Type, rt.Type))
	}
	rec, err := t.Records.Get(ctx, rt, st.Record)
	if err != nil {
		return Reply{}, err
	}
	if !st.Verified {
		e := emailRef.FindString(t.Text)
		if e == "" {
			return reply(fmt.Sprintf("To look up %s %s, what is the email address on the account?", rt.Type, st.Record))
		}
		var acct *brand.Account
		if rec != nil {
			acct = b.Account(rec.Account())
		}
		if acct == nil || !strings.EqualFold(acct.Email, e) {
			// Say the same whether the record exists or not.
			st.Record = ""
			return reply(fmt.Sprintf("I couldn't match that %s number and email. Please check both and try again.", rt.Type))
		}
		st.Verified = true
	}
	if m == nil {
		return reply(fmt.Sprintf("I found %s %s. What would you like to know?", rt.Type, rec.ID()))
	}
	if m.NeedsMore {
		return reply(m.Intent.Prompt)
	}
	d := b.NewData(rec, nil, m.Groups)
	args, _, err := m.Intent.RenderArgs(d)
	if err != nil {
		return Reply{}, err
	}
	text, err := m.Intent.RenderReply(b.NewData(rec, args, m.Groups))
	if err != nil {
		return Reply{}, err
	}
	return reply(text)
}

// delegatedTurn acts as the Brand user the token names, on their own
// records, running the intent's tool when the token grants the scope the
// brand file names for it; a missing scope that is on the card asks for a
// step-up, one that is not is answered in chat.
func delegatedTurn(ctx context.Context, t Turn, st *scriptState, m *brand.Match, rt *brand.RecordType, reply func(string) (Reply, error)) (Reply, error) {
	b := t.Brand
	if st.Record == "" || st.Type != rt.Type {
		return reply(fmt.Sprintf("Which %s is this about? Please give me the %s number.", rt.Type, rt.Type))
	}
	rec, err := t.Records.Get(ctx, rt, st.Record)
	if err != nil {
		return Reply{}, err
	}
	if rec == nil || rec.Account() != t.User {
		return reply(fmt.Sprintf("I can't find %s %s on your account.", rt.Type, st.Record))
	}
	if m == nil || m.Tool.Scope == "" || b.Scope(m.Tool.Scope) == nil {
		// PACT §5.2: only scope ids on the card are asked for; without
		// one for this, no grant can allow it.
		return reply("I can't do that here.")
	}
	tool, in := m.Tool, m.Intent
	if !slices.Contains(t.Scopes, tool.Scope) {
		r, err := reply(fmt.Sprintf("I need your permission (%s) to do that.", tool.Scope))
		r.NeedScopes = []string{tool.Scope}
		r.Refused = &Refusal{Tool: tool.Name, Target: rec.ID()}
		return r, err
	}
	if m.NeedsMore {
		return reply(in.Prompt)
	}
	if !tool.Allowed(rec) {
		text, err := tool.RenderUnavailable(b.NewData(rec, nil, m.Groups))
		if err != nil {
			return Reply{}, err
		}
		return reply(text)
	}
	args, argsJSON, err := in.RenderArgs(b.NewData(rec, nil, m.Groups))
	if err != nil {
		return Reply{}, err
	}
	changes, err := tool.RenderSet(b.NewData(rec, args, m.Groups))
	if err != nil {
		return Reply{}, err
	}
	if len(changes) > 0 {
		if err := t.Records.Set(ctx, rt, rec, changes); err != nil {
			return Reply{}, err
		}
		if rec, err = t.Records.Get(ctx, rt, rec.ID()); err != nil {
			return Reply{}, err
		}
	}
	text, err := in.RenderReply(b.NewData(rec, args, m.Groups))
	if err != nil {
		return Reply{}, err
	}
	r, err := reply(text)
	r.Actions, r.ScopesUsed = []Action{{Tool: tool.Name, Target: rec.ID(), ArgsJSON: argsJSON}}, []string{tool.Scope}
	return r, err
}

// article puts "a" or "an" before a word.
func article(w string) string {
	if w != "" && strings.ContainsRune("aeiou", rune(w[0])) {
		return "an " + w
	}
	return "a " + w
}
