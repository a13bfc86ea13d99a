package pact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-jose/go-jose/v4"
	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/verifier"
)

var (
	bOrders    = []byte("order_status")
	bActionLog = []byte("action_log")
)

// verifyDelegation checks a delegation token as PACT §5.5 says: signature
// with the Provider's key (ES256 only), iss the brand's authorization
// server, aud the interface URL, not expired (30 s skew), client_id the
// personal agent's iss, and the grant not revoked.
func (p *Provider) verifyDelegation(b *Brand, who *verifier.RequestClaims, header string) (*DelegationClaims, error) {
	tok, ok := bearerToken(header)
	if !ok || !b.Delegation {
		return nil, errors.New("not a bearer delegation token for a delegating brand")
	}
	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(p.key.jwk.Public().Key)
	if err != nil {
		return nil, err
	}
	var c DelegationClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, err
	}
	now := p.cfg.Now()
	switch {
	case c.Iss != p.issuer(b):
		return nil, fmt.Errorf("iss %q is not this brand's authorization server", c.Iss)
	case c.Aud != p.InterfaceURL(b.ID):
		return nil, fmt.Errorf("aud %q is not this brand's interface", c.Aud)
	case now.After(time.Unix(c.Exp, 0).Add(30 * time.Second)):
		return nil, errors.New("expired")
	case c.ClientID != who.Iss:
		return nil, errors.New("client_id is not the personal agent's iss")
	}
	var g grant
	err = p.store.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bGrants).Get([]byte(c.GrantID))
		if v == nil {
			return errors.New("unknown grant")
		}
		return json.Unmarshal(v, &g)
	})
	if err != nil {
		return nil, err
	}
	if !g.Revoked.IsZero() {
		return nil, errors.New("the grant is revoked")
	}
	return &c, nil
}

// turnOrders is the order book one turn sees: the brand's data and the
// statuses stored over it, with the turn's own changes held until its reply
// commits (turnEffects.write), so an action never outlives a reply and a
// receipt that were not kept.
type turnOrders struct {
	s       *store
	brand   string
	changed map[string]orderChange
}

// orderChange is a status change a turn made, and the status it saw
// before; the commit refuses it when another turn changed it since.
type orderChange struct{ def, from, to string }

func (o *turnOrders) key(order *Order) string { return o.brand + "/" + order.ID }

// Status implements OrderBook.
func (o *turnOrders) Status(order *Order) (string, error) {
	if c, ok := o.changed[o.key(order)]; ok {
		return c.to, nil
	}
	status := order.Status
	err := o.s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bOrders).Get([]byte(o.key(order))); v != nil {
			status = string(v)
		}
		return nil
	})
	return status, err
}

// SetStatus implements OrderBook: the change is kept with the turn's reply.
func (o *turnOrders) SetStatus(order *Order, status string) error {
	k := o.key(order)
	c, ok := o.changed[k]
	if !ok {
		from, err := o.Status(order)
		if err != nil {
			return err
		}
		c = orderChange{def: order.Status, from: from}
	}
	c.to = status
	if o.changed == nil {
		o.changed = map[string]orderChange{}
	}
	o.changed[k] = c
	return nil
}

// errOrderChanged: another turn changed an order this turn changed too.
var errOrderChanged = errors.New("the order changed during the turn")

// turnEffects is what a turn writes besides its reply: its order changes,
// the action log of its receipt, and what it queues for the ledger (the
// receipt, or a refusal). The reply's transaction writes them all
// (store.finish): a turn is kept whole or not at all.
type turnEffects struct {
	orders     map[string]orderChange
	receiptSHA string
	log        []ActionLogEntry
	outbox     []LedgerItem
}

func (fx *turnEffects) write(tx *bolt.Tx) error {
	ob := tx.Bucket(bOrders)
	for k, c := range fx.orders {
		cur := c.def
		if v := ob.Get([]byte(k)); v != nil {
			cur = string(v)
		}
		if cur != c.from {
			return errOrderChanged
		}
		if err := ob.Put([]byte(k), []byte(c.to)); err != nil {
			return err
		}
	}
	if len(fx.log) > 0 {
		v, err := json.Marshal(fx.log)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bActionLog).Put([]byte(fx.receiptSHA), v); err != nil {
			return err
		}
	}
	for _, it := range fx.outbox {
		if err := enqueue(tx, it); err != nil {
			return err
		}
	}
	return nil
}

// ReceiptClaims are a receipt's claims (PACT §5.6).
type ReceiptClaims struct {
	GrantID    string          `json:"grantId"`
	User       string          `json:"user"`
	PA         string          `json:"pa"`
	Brand      string          `json:"brand"`
	ScopesUsed []string        `json:"scopesUsed"`
	Actions    []ReceiptAction `json:"actions"`
	TS         string          `json:"ts"`
}

// ReceiptAction is one action a receipt lists.
type ReceiptAction struct {
	Tool     string `json:"tool"`
	ArgsHash string `json:"argsHash,omitempty"`
}

// ActionLogEntry is the application action log: the exact args, kept with
// the receipt's hash under the log's own retention.
type ActionLogEntry struct {
	ReceiptSHA256 string    `json:"receiptSha256"`
	Tool          string    `json:"tool"`
	Target        string    `json:"target"`
	ArgsJSON      string    `json:"argsJson"`
	At            time.Time `json:"at"`
}

// respond builds the response body: a step-up task when the turn needs
// scopes the token lacks, else the message, with a signed receipt when the
// turn ran under a delegation token. It returns what the turn queues for
// the ledger and logs, for the reply's transaction to write.
func (p *Provider) respond(ctx context.Context, b *Brand, who *verifier.RequestClaims, del *DelegationClaims, conv *conversation, rep Reply, now time.Time, creds credentials) (json.RawMessage, turnEffects, error) {
	var fx turnEffects
	if del != nil && len(rep.NeedScopes) > 0 {
		// PACT §5.2, §5.5: a step-up names only scope ids on the card,
		// checked as the device authorization endpoint checks them. An
		// agent that needs a scope the Brand does not define gets a plain
		// answer in chat instead.
		scopes, serr := cardScopes(b, rep.NeedScopes)
		if serr != nil {
			p.cfg.Logger.WarnContext(ctx, "the agent asked for a scope the brand does not define; answered in chat", slog.String("brand", b.ID), slog.String("reason", serr.desc))
			rep = Reply{Text: "I can't do that here.", State: rep.State, Close: rep.Close}
		} else {
			return p.stepUp(b, who, conv, rep.Text, scopes, now, creds)
		}
	}
	text := rep.Text
	out := &Message{MessageID: newID(), ContextID: conv.ID, Role: "ROLE_AGENT", Parts: []Part{{Text: &text}}}
	if del == nil && rep.Refused != nil {
		// An account action asked under PACT §3 alone: refused, and on record.
		reason := "asked without a delegation grant: refused in chat, the User was told to sign in and approve"
		if !b.grantable(rep.Refused.Tool) {
			reason = "asked without a delegation grant: refused in chat; no grant at this Brand allows it"
		}
		fx.outbox = append(fx.outbox, LedgerItem{Refusal: &LedgerRefusal{ClaimedPrincipal: "sub " + who.Sub + " of " + who.Iss, ClaimedAgent: who.Iss,
			RequestJWT: creds.paJWT, Action: *rep.Refused, Reason: reason, ObservedAt: now}})
	}
	if del != nil {
		claims := ReceiptClaims{GrantID: del.GrantID, User: del.Sub, PA: who.Iss, Brand: p.InterfaceURL(b.ID),
			ScopesUsed: nonNil(rep.ScopesUsed), Actions: []ReceiptAction{}, TS: now.Format(time.RFC3339)}
		for _, a := range rep.Actions {
			claims.Actions = append(claims.Actions, ReceiptAction{Tool: a.Tool, ArgsHash: verifier.ArgsHash(a.ArgsJSON)})
		}
		jws, err := p.key.signReceipt(claims)
		if err != nil {
			return nil, fx, err
		}
		meta, err := json.Marshal(map[string]any{"pact.receipt": map[string]any{"jws": jws, "claims": claims}})
		if err != nil {
			return nil, fx, err
		}
		out.Metadata = meta
		sum := sha256.Sum256([]byte(jws))
		fx.receiptSHA = hex.EncodeToString(sum[:])
		post := LedgerPost{ReceiptJWS: jws, RequestJWT: creds.paJWT, DelegationToken: creds.delegation, Actions: []LedgerEntry{}, ContextID: conv.ID, MessageID: out.MessageID}
		for _, a := range rep.Actions {
			post.Actions = append(post.Actions, LedgerEntry(a))
			fx.log = append(fx.log, ActionLogEntry{ReceiptSHA256: fx.receiptSHA, Tool: a.Tool, Target: a.Target, ArgsJSON: a.ArgsJSON, At: now})
		}
		fx.outbox = append(fx.outbox, LedgerItem{Receipt: &post})
	}
	body, err := json.Marshal(map[string]any{"message": out})
	return body, fx, err
}

// stepUp answers a turn that needs scopes the token lacks (PACT §5.5): a
// task in TASK_STATE_AUTH_REQUIRED with a fresh device authorization for
// exactly those scopes; the conversation stays open.
func (p *Provider) stepUp(b *Brand, who *verifier.RequestClaims, conv *conversation, text string, scopes []string, now time.Time, creds credentials) (json.RawMessage, turnEffects, error) {
	_, userCode, err := p.newDeviceAuth(b, who.Iss, who.Sub, creds.paJWT, scopes, now)
	if err != nil {
		return nil, turnEffects{}, err
	}
	task := map[string]any{
		"id":        "t-" + newID(),
		"contextId": conv.ID,
		"status": map[string]any{
			"state":   "TASK_STATE_AUTH_REQUIRED",
			"message": map[string]any{"role": "ROLE_AGENT", "parts": []Part{{Text: &text}}},
		},
		"metadata": map[string]any{
			"pact.missingScopes":           scopes,
			"pact.verificationUriComplete": p.verificationURI(b, userCode),
		},
	}
	body, err := json.Marshal(map[string]any{"task": task})
	return body, turnEffects{}, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ActionLog returns the action log entries of a receipt (by the hex SHA-256
// of its JWS).
func (p *Provider) ActionLog(receiptSHA string) ([]ActionLogEntry, error) {
	var out []ActionLogEntry
	err := p.store.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bActionLog).Get([]byte(receiptSHA))
		if v == nil {
			return nil
		}
		return json.Unmarshal(v, &out)
	})
	return out, err
}

// credentials are the raw tokens of a request, for the ledger.
type credentials struct{ paJWT, delegation string }

// Approve records that the User, signed in with the Brand as user, approved
// the device authorization with user code userCode for scopes (those they
// kept of the ones requested). The consent page calls it; Deny records a
// refusal.
func (p *Provider) Approve(userCode, user string, scopes []string) error {
	return p.decide(decision{UserCode: userCode, User: user, Approve: true, Scopes: scopes})
}

// Deny records that the User refused the device authorization.
func (p *Provider) Deny(userCode, user string) error {
	return p.decide(decision{UserCode: userCode, User: user})
}

// BrandSigners returns, for each delegating brand, its interface URL and
// the keys and issuer its delegation tokens and receipts carry, so a ledger
// in the same process can verify them without fetching its own JWKS.
func (p *Provider) BrandSigners() map[string]verifier.Signer {
	out := map[string]verifier.Signer{}
	for _, b := range p.cfg.Brands {
		if !b.Delegation {
			continue
		}
		ks, err := verifier.ParseKeySet(verifier.NewSnapshot(p.issuer(b)+"/jwks.json", p.cfg.Now(), p.key.jwks))
		if err != nil {
			continue
		}
		out[p.InterfaceURL(b.ID)] = verifier.Signer{Keys: ks, Issuer: p.issuer(b)}
	}
	return out
}
