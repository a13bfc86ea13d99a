package provider

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pactledger/pactledger/internal/termtext"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/agent"
	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/records"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// turn runs one message in its context: a new context when none is given;
// a stored reply for a repeated messageId (PACT §4.3).
func (s *Server) turn(ctx context.Context, rq *request, m *a2a.Message, text string) (json.RawMessage, *a2aError) {
	b, who, del := rq.brand, rq.who, rq.del
	now := s.cfg.Now().UTC()
	conv := store.Conversation{ID: m.ContextID, Brand: b.ID, PA: who.Iss, Sub: who.Sub, Created: now}
	isNew := m.ContextID == ""
	if isNew {
		conv.ID = newID()
	} else if c, err := s.cfg.Store.Conversation(m.ContextID); err != nil || c.Brand != b.ID || c.PA != who.Iss || c.Sub != who.Sub {
		// PACT §4.2: another Brand's or (PA, sub)'s context is unknown, said
		// the same way as one that does not exist.
		return nil, newErr(a2a.ReasonInvalidParams, "Unknown contextId")
	}
	// Mark the turn as running first, so that a retry of this messageId
	// while it runs gets INVALID_PARAMS (PACT §4.3) instead of waiting.
	begun, stored, err := s.cfg.Store.BeginTurn(conv, isNew, m.MessageID, now)
	switch {
	case errors.Is(err, store.ErrTurnRunning):
		return nil, newErr(a2a.ReasonInvalidParams, "messageId is being processed; retry later")
	case errors.Is(err, store.ErrNotFound):
		return nil, newErr(a2a.ReasonInvalidParams, "Unknown contextId")
	case err != nil:
		s.cfg.Logger.ErrorContext(ctx, "provider store", slog.String("error", err.Error()))
		return nil, internalErr("internal error")
	case stored != nil:
		return stored, nil
	}
	// One turn at a time per context; read its state after the previous one.
	id := begun.ID
	unlock := s.locks.lock(id)
	defer unlock()
	// A retry that found the first run's marker stale (it ran longer than
	// the marker holds) waited here for that run: its reply, once kept,
	// is the answer, and the turn does not run twice (PACT §4.3).
	if stored, err := s.cfg.Store.StoredReply(id, m.MessageID); err != nil || stored != nil {
		if err != nil {
			s.abandon(ctx, id, m.MessageID)
			s.cfg.Logger.ErrorContext(ctx, "provider store", slog.String("error", err.Error()))
			return nil, internalErr("internal error")
		}
		return stored, nil
	}
	c, err := s.cfg.Store.Conversation(id)
	if err != nil {
		s.abandon(ctx, id, m.MessageID)
		s.cfg.Logger.ErrorContext(ctx, "provider store", slog.String("error", err.Error()))
		return nil, internalErr("internal error")
	}
	if c.Ended(now) {
		// Closed by its agent, or expired (store.ConversationTTL).
		s.abandon(ctx, id, m.MessageID)
		return nil, newErr(a2a.ReasonUnsupported, "this conversation is closed; start a new one without contextId")
	}
	book := records.NewBook(b.ID, s.cfg.Store)
	t := agent.Turn{Brand: b, PA: who.Iss, Sub: who.Sub, Text: text, State: c.State, Records: book}
	if del != nil {
		// PACT §5.5: once a context ran as one Brand user, another user's
		// token is INVALID_PARAMS.
		if c.User != "" && c.User != del.Subject {
			s.abandon(ctx, id, m.MessageID)
			return nil, newErr(a2a.ReasonInvalidParams, "this context acts for another user")
		}
		t.User, t.Scopes = del.Subject, strings.Fields(del.Scope)
		book.HoldTo(del.Subject)
	}
	rep, err := s.cfg.Agent.Respond(ctx, t)
	if w := book.Withheld(); len(w) > 0 {
		// A customer may name another's order by mistake; an agent
		// steered by what it is sent may ask on purpose. Either way it
		// was told there is no such record.
		s.cfg.Logger.InfoContext(ctx, "the brand's agent asked, in a delegated turn, for records of another account than the grant's; they were not shown to it",
			slog.String("brand", b.ID), slog.String("grant", del.GrantID), slog.Any("records", w))
	}
	if err == nil {
		var used []string
		if used, err = withinGrant(b, del, rep, book); err != nil {
			// Nothing of the turn is kept, and the ledger gets what the
			// agent went beyond: a refusal of the action it reported.
			s.abandon(ctx, id, m.MessageID)
			s.cfg.Logger.ErrorContext(ctx, "brand agent went beyond the grant", slog.String("brand", b.ID), slog.String("error", err.Error()))
			s.putOnRecord(ctx, s.stopped(rq, id, rep, err, beyondReason(rq, err), now))
			return nil, internalErr("the agent could not answer")
		}
		rep.ScopesUsed = used
		if lerr := recordable(del, rep); lerr != nil {
			// The receipt would be one the ledger refuses as invalid: the
			// personal agent would hold it and the ledger have no row of
			// it. Nothing of the turn is kept, and it is on record as a
			// refusal, as a turn beyond the grant is.
			s.abandon(ctx, id, m.MessageID)
			s.cfg.Logger.ErrorContext(ctx, "brand agent's actions are past what the ledger records", slog.String("brand", b.ID), slog.String("error", lerr.Error()))
			s.putOnRecord(ctx, s.stopped(rq, id, rep, nil, "the Brand's agent ran actions under delegation grant "+del.GrantID+
				" that the ledger cannot record ("+lerr.Error()+"): nothing of the turn was kept, no receipt signed; answered INTERNAL", now))
			return nil, internalErr("the agent could not answer")
		}
	}
	if err != nil {
		s.abandon(ctx, id, m.MessageID)
		s.cfg.Logger.ErrorContext(ctx, "brand agent failed", slog.String("brand", b.ID), slog.String("error", err.Error()))
		return nil, internalErr("the agent could not answer")
	}
	// The reply, the record changes, the action log and what goes to the
	// ledger commit together (store.RecordTurn).
	rec, err := s.respond(ctx, rq, id, rep, c.State, book.Changes(), now)
	if err == nil {
		rec.ContextID, rec.MessageID, rec.User = id, m.MessageID, t.User
		if del != nil {
			// PACT §5.5: the grant must still be active when the turn is
			// kept, not only when its token was checked: a revocation
			// the ledger recorded while the agent ran is applied first.
			rec.Grant = del.GrantID
			err = s.ledgerRevokedID(ctx, del.GrantID)
		}
		var giveBack func()
		if rec.IdentityRefusal != nil {
			var ok bool
			if giveBack, ok = s.refusals.take(b.ID, now); !ok {
				// Agents and their Users cost nothing to make: the
				// brand's bound is what keeps these refusals from filling
				// the outbox. The agent is answered as ever.
				rec.IdentityRefusal = nil
				s.refusals.dropped(ctx, b.ID, overRate, now)
			}
		}
		dropped := false
		if err == nil {
			if dropped, err = s.cfg.Store.RecordTurn(rec, s.cfg.Now().UTC()); err == nil && dropped {
				s.refusals.dropped(ctx, b.ID, overRoom, now)
			}
		}
		if giveBack != nil && (err != nil || dropped) {
			giveBack()
		}
	}
	if errors.Is(err, store.ErrGrantEnded) {
		s.abandon(ctx, id, m.MessageID)
		s.cfg.Logger.InfoContext(ctx, "delegation token rejected", slog.String("brand", b.ID), slog.String("reason", "the grant ended while the turn ran"))
		// What the agent would have done under the grant is on record as
		// refused, in a transaction of its own: the row after the
		// revocation that a business watches for.
		s.putOnRecord(ctx, s.stopped(rq, id, rep, nil, "delegation grant "+del.GrantID+" "+s.grantEnd(del.GrantID)+
			" while the turn ran: nothing of the turn was kept; answered 401 invalid_token", now))
		return nil, errInvalidToken
	}
	if errors.Is(err, store.ErrOutboxFull) {
		// No action without its record: while the ledger does not take
		// what waits, turns that would queue more are kept nothing of.
		s.abandon(ctx, id, m.MessageID)
		s.cfg.Logger.WarnContext(ctx, "turn refused: the outbox for the ledger is full", slog.String("brand", b.ID), slog.String("reason", err.Error()))
		e := internalErr("the business cannot keep the record of this request for its ledger now; retry later")
		e.retryAfter = 60
		return nil, e
	}
	if err != nil {
		s.abandon(ctx, id, m.MessageID)
		s.cfg.Logger.ErrorContext(ctx, "provider reply", slog.String("error", err.Error()))
		return nil, internalErr("internal error")
	}
	return rec.Reply, nil
}

// recordable checks the actions a delegated turn's receipt would carry
// against the ledger's rules for them (ledger.CheckActions): every receipt
// the Provider signs is one the ledger records.
func recordable(del *oauth.DelegationClaims, rep agent.Reply) error {
	if del == nil {
		return nil // no receipt
	}
	actions := make([]verifier.Action, len(rep.Actions))
	for i, a := range rep.Actions {
		actions[i] = verifier.Action(a)
	}
	return ledger.CheckActions(actions)
}

// beyondGrant is what withinGrant found past the grant: why, and the
// action it concerns when there is one.
type beyondGrant struct {
	why    string
	action agent.Action
}

func (e *beyondGrant) Error() string { return e.why }

// beyond is a beyondGrant about action a (zero: the turn as a whole).
func beyond(a agent.Action, format string, args ...any) error {
	return &beyondGrant{why: fmt.Sprintf(format, args...), action: a}
}

// withinGrant checks that what the agent did stays where PACT §5.5 puts
// it, "as Brand user sub, limited to scope", whatever agent the brand runs:
// each action a tool of the brand; under a delegation token, each tool's
// scope and each scope the agent says it used among the token's, and each
// record changed the User's own and the target of an action whose tool
// changes records of its type; under §3 alone, no record changed and no
// account action run. It returns the scopes the receipt names: those the
// agent gave, with the scope of every tool it ran, so a receipt never
// names an action without the scope that allowed it.
func withinGrant(b *brand.Brand, del *oauth.DelegationClaims, rep agent.Reply, book *records.Book) ([]string, error) {
	var granted []string
	if del != nil {
		granted = strings.Fields(del.Scope)
	}
	used := slices.Clone(rep.ScopesUsed)
	for _, sc := range used {
		if !slices.Contains(granted, sc) {
			return nil, beyond(agent.Action{}, "the agent says it used scope %q, which the request's grant does not hold", sc)
		}
	}
	for _, a := range rep.Actions {
		tool := b.Tool(a.Tool)
		switch {
		case tool == nil:
			return nil, beyond(a, "the agent ran %q, not a tool of the brand", a.Tool)
		case del == nil && tool.Changes():
			return nil, beyond(a, "the agent ran %s on %s without a delegation grant", a.Tool, a.Target)
		case del != nil && (tool.Scope == "" || !slices.Contains(granted, tool.Scope)):
			return nil, beyond(a, "the agent ran %s, whose scope %q the request's grant does not hold", a.Tool, tool.Scope)
		}
		if del != nil && !slices.Contains(used, tool.Scope) {
			used = append(used, tool.Scope)
		}
	}
	for k, c := range book.Changes() {
		if !c.Changed() {
			continue
		}
		if del == nil {
			return nil, beyond(agent.Action{Target: k.ID}, "the agent changed %s without a delegation grant", k)
		}
		if owner := book.Account(k); owner != del.Subject {
			return nil, beyond(agent.Action{Target: k.ID}, "the agent changed %s, of account %q, acting for %q", k, owner, del.Subject)
		}
		if !slices.ContainsFunc(rep.Actions, func(a agent.Action) bool {
			tool := b.Tool(a.Tool)
			return a.Target == k.ID && tool.Changes() && tool.RecordType().Type == k.Type
		}) {
			return nil, beyond(agent.Action{Target: k.ID}, "the agent changed %s with no action of a tool that changes it", k)
		}
	}
	return used, nil
}

// stopped is the refusal that puts on record a turn the Provider kept
// nothing of, though its agent had answered: the action the reason
// concerns (err, a beyondGrant, may name it), else the agent's first, else
// the message itself (message:send in its context).
func (s *Server) stopped(rq *request, ctxID string, rep agent.Reply, err error, reason string, now time.Time) pipeline.Item {
	var act agent.Action
	var bg *beyondGrant
	if errors.As(err, &bg) {
		act = bg.action
	}
	if act.Tool == "" {
		i := slices.IndexFunc(rep.Actions, func(a agent.Action) bool { return act.Target == "" || a.Target == act.Target })
		switch {
		case i >= 0:
			act = rep.Actions[i]
		case act.Target == "":
			act = agent.Action{Tool: "message:send", Target: ctxID}
		default:
			act.Tool = "message:send"
		}
	}
	var did []string
	for _, a := range rep.Actions {
		did = append(did, strings.TrimSpace(a.Tool+" "+a.Target))
	}
	if len(did) > 0 {
		reason += "; the agent's actions: " + strings.Join(did, ", ")
	}
	return s.refusal(rq, &agent.Refusal{Tool: act.Tool, Target: act.Target}, reason+"; context "+ctxID, now)
}

// beyondReason is the reason on record for a turn whose agent went beyond
// the grant (withinGrant's err).
func beyondReason(rq *request, err error) string {
	where := "PACT §3 alone (no delegation grant)"
	if rq.del != nil {
		where = "delegation grant " + rq.del.GrantID + " (scopes " + rq.del.Scope + ")"
	}
	return "the Brand's agent went beyond " + where + ": " + err.Error() + ": nothing of the turn was kept; answered INTERNAL"
}

// grantEnd says how and when grant id ended, as far as the store knows.
func (s *Server) grantEnd(id string) string {
	g, err := s.cfg.Store.Grant(id)
	if err != nil {
		return "ended"
	}
	return ended(g)
}

// putOnRecord queues items for the ledger in a transaction of their own.
func (s *Server) putOnRecord(ctx context.Context, items ...pipeline.Item) {
	if err := s.cfg.Store.Enqueue(items...); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "provider store: a refusal was not put on record", slog.String("error", err.Error()))
	}
}

// abandon removes the running marker of a turn that did not finish.
func (s *Server) abandon(ctx context.Context, ctxID, msgID string) {
	if err := s.cfg.Store.AbandonTurn(ctxID, msgID); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "provider store: a running turn's marker stays until it is stale", slog.String("error", err.Error()))
	}
}

// respond builds what a turn keeps: the response body (a step-up task when
// the turn needs scopes the token lacks, else the message, with a signed
// receipt when the turn ran under a delegation token), the agent's state,
// the record changes the agent made (changes), and what the turn queues
// for the ledger and logs. A record changes only with a receipt that
// names the actions: a turn answered with a step-up task, or with the
// plain answer that replaces a step-up the card cannot name, keeps none of
// the agent's changes, and no receipt names its actions (PACT §5.5: the
// turn needs a scope it was not given; it runs again once the personal
// agent sends the new token). When it had acted, the agent's state stays
// as it was before the turn (prev), which is what the records say: a
// state that remembers the action done would have it skip the action
// when the turn runs again.
func (s *Server) respond(ctx context.Context, rq *request, ctxID string, rep agent.Reply, prev json.RawMessage, changes map[records.Key]records.Change, now time.Time) (store.TurnRecord, error) {
	b, del := rq.brand, rq.del
	var rec store.TurnRecord
	if len(rep.NeedScopes) > 0 && (del != nil || b.WithoutToken == brand.StepUp) {
		// PACT §5.2, §5.5: a step-up names only scope ids on the card,
		// checked as the device authorization endpoint checks them. An
		// agent that needs a scope the Brand does not define gets a plain
		// answer in chat instead.
		scopes, serr := oauth.CardScopes(b, rep.NeedScopes)
		if serr == nil {
			state := rep.State
			if s.notKept(ctx, b.ID, rep, changes, "a step-up task") {
				state = prev
			}
			body, err := s.stepUp(rq, ctxID, rep.Text, scopes, now)
			rec = store.TurnRecord{Reply: body, State: state, Close: rep.Close}
			switch {
			case rep.Refused == nil:
			case del == nil:
				// Asked under PACT §3 alone: nothing ran; on record as a
				// refusal, as in chat, within the brand's bound.
				it := s.refusal(rq, rep.Refused, "asked without a delegation grant: answered with a step-up task for "+strings.Join(scopes, " "), now)
				rec.IdentityRefusal = &it
			default:
				// Asked beyond the grant's scopes: nothing ran, and no
				// receipt is signed for it; on record as a refusal of the
				// grant's User.
				rec.Outbox = append(rec.Outbox, s.refusal(rq, rep.Refused, "asked beyond delegation grant "+del.GrantID+" (scopes "+del.Scope+
					"): answered with a step-up task for "+strings.Join(scopes, " "), now))
			}
			return rec, err
		}
		s.cfg.Logger.WarnContext(ctx, "the agent asked for a scope the brand does not define; answered in chat", slog.String("brand", b.ID), slog.String("reason", serr.Description))
		state := rep.State
		if s.notKept(ctx, b.ID, rep, changes, "a plain answer in chat") {
			state = prev
		}
		rep, changes = agent.Reply{Text: "I can't do that here.", State: state, Close: rep.Close}, nil
	}
	rec.State, rec.Close, rec.Changes = rep.State, rep.Close, changes
	text := rep.Text
	out := &a2a.Message{MessageID: newID(), ContextID: ctxID, Role: "ROLE_AGENT", Parts: []a2a.Part{{Text: &text}}}
	if del == nil && rep.Refused != nil {
		// An account action asked under PACT §3 alone: refused, and on
		// record within the brand's bound.
		reason := "asked without a delegation grant: refused in chat, the User was told to sign in and approve"
		if !b.Grantable(rep.Refused.Tool) {
			reason = "asked without a delegation grant: refused in chat; no grant at this Brand allows it"
		}
		it := s.refusal(rq, rep.Refused, reason, now)
		rec.IdentityRefusal = &it
	}
	if del != nil {
		if err := s.receipt(rq, out, rep, now, &rec); err != nil {
			return rec, err
		}
	}
	body, err := json.Marshal(map[string]any{"message": out})
	rec.Reply = body
	return rec, err
}

// notKept warns that the agent of a turn answered with what (a step-up, or
// the plain answer that replaces one) reported actions or changed records
// in that same turn: none of it is kept, since no receipt names it. It
// reports whether there was any.
func (s *Server) notKept(ctx context.Context, brandID string, rep agent.Reply, changes map[records.Key]records.Change, what string) bool {
	var did []string
	for _, a := range rep.Actions {
		did = append(did, strings.TrimSpace(a.Tool+" "+a.Target))
	}
	for k, c := range changes {
		if c.Changed() {
			did = append(did, "changed "+k.String())
		}
	}
	if len(did) == 0 {
		return false
	}
	slices.Sort(did)
	s.cfg.Logger.WarnContext(ctx, "the brand agent acted in a turn it asked more scopes for: answered with "+what+", none of its actions or record changes kept",
		slog.String("brand", brandID), slog.String("not_kept", strings.Join(did, ", ")))
	return true
}

// refusal is the ledger's record of an account action refused for want of
// a delegation grant, or of a scope the grant lacks. A request under a
// delegation token sends the token with it: the ledger verifies it and
// lists the refusal with the token's grant.
func (s *Server) refusal(rq *request, r *agent.Refusal, reason string, now time.Time) pipeline.Item {
	principal := "sub " + rq.who.Sub + " of " + rq.who.Iss
	var token string
	if rq.del != nil {
		// The delegation token names the Brand user (PACT §5.4).
		principal, token = rq.del.Subject, rq.creds.delegation
	}
	return pipeline.Item{Refusal: &pipeline.Refusal{ClaimedPrincipal: clip(principal, ledger.MaxFieldLength, false), ClaimedAgent: rq.who.Iss,
		RequestJWT: rq.creds.paJWT, Action: pipeline.RefusedAction{Tool: clip(r.Tool, ledger.MaxFieldLength, false), Target: clip(r.Target, ledger.MaxFieldLength, false)},
		Reason: clip(reason, ledger.MaxNoteLength, true), ObservedAt: now, DelegationToken: token}}
}

// clip fits v, which may hold what an agent wrote, into a field of the
// ledger's AppendRefusal: UTF-8 (the API's text), at most n bytes, cut at
// a character, and no character the ledger refuses: no control or
// invisible character in a name, no control character but tabs and line
// feeds in free text (the ledger refuses a
// NUL, another control character or an overlong field, and the refusal
// would be set aside; text not UTF-8 could not be posted at all). Each is
// replaced with U+FFFD.
func clip(v string, n int, free bool) string {
	v = strings.Map(func(r rune) rune {
		if termtext.Control(r) && !(free && (r == '\t' || r == '\n')) || !free && termtext.Invisible(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(v, "\uFFFD"))
	if len(v) <= n {
		return v
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(v[i]) {
		i--
	}
	return v[:i] + "…"
}

// receipt signs the receipt of a delegated turn (PACT §5.6) into the
// message's metadata, and adds to rec the action log and the receipt for
// the ledger.
func (s *Server) receipt(rq *request, out *a2a.Message, rep agent.Reply, now time.Time, rec *store.TurnRecord) error {
	claims := a2a.ReceiptClaims{GrantID: rq.del.GrantID, User: rq.del.Subject, PA: rq.who.Iss, Brand: s.InterfaceURL(rq.brand.ID),
		ScopesUsed: nonNil(rep.ScopesUsed), Actions: []a2a.ReceiptAction{}, TS: now.Format(time.RFC3339)}
	for _, a := range rep.Actions {
		claims.Actions = append(claims.Actions, a2a.ReceiptAction{Tool: a.Tool, ArgsHash: verifier.ArgsHash(a.ArgsJSON)})
	}
	jws, err := s.key.signReceipt(claims)
	if err != nil {
		return err
	}
	meta, err := json.Marshal(map[string]any{"pact.receipt": map[string]any{"jws": jws, "claims": claims}})
	if err != nil {
		return err
	}
	out.Metadata = meta
	sum := sha256.Sum256([]byte(jws))
	rec.ReceiptSHA256 = hex.EncodeToString(sum[:])
	post := pipeline.Receipt{ReceiptJWS: jws, RequestJWT: rq.creds.paJWT, DelegationToken: rq.creds.delegation, Actions: []pipeline.Action{},
		ContextID: out.ContextID, MessageID: out.MessageID}
	for _, a := range rep.Actions {
		post.Actions = append(post.Actions, pipeline.Action(a))
		rec.ActionLog = append(rec.ActionLog, store.ActionLogEntry{ReceiptSHA256: rec.ReceiptSHA256, Tool: a.Tool, Target: a.Target, ArgsJSON: a.ArgsJSON, At: now})
	}
	rec.Outbox = append(rec.Outbox, pipeline.Item{Receipt: &post})
	return nil
}

// stepUp answers a turn that needs scopes the token lacks (PACT §5.5): a
// task in TASK_STATE_AUTH_REQUIRED with a fresh device authorization for
// exactly those scopes; the conversation stays open. The agent gets its
// new token by repeating §5.3, so the link's approval makes the grant at
// once (store: decide): the User who approves through it is not asked
// again when the agent's own request for those scopes comes.
func (s *Server) stepUp(rq *request, ctxID, text string, scopes []string, now time.Time) (json.RawMessage, error) {
	_, userCode, err := s.newDeviceAuthorization(rq, scopes, true, now)
	if err != nil {
		return nil, err
	}
	task := map[string]any{
		"id":        "t-" + newID(),
		"contextId": ctxID,
		"status": map[string]any{
			"state":   "TASK_STATE_AUTH_REQUIRED",
			"message": map[string]any{"role": "ROLE_AGENT", "parts": []a2a.Part{{Text: &text}}},
		},
		"metadata": map[string]any{
			"pact.missingScopes":           scopes,
			"pact.verificationUriComplete": s.cfg.Pages.VerificationURI(rq.brand, userCode),
		},
	}
	return json.Marshal(map[string]any{"task": task})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// newID is a random id in UUID form.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
