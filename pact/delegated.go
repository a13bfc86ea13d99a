package pact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/verifier"
)

var (
	// bOrders holds order statuses kept before brands defined their
	// record types; read, never written.
	bOrders    = []byte("order_status")
	bRecords   = []byte("record_fields")
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

// turnRecords is the record book one turn sees: the brand's records (or
// its source) with the changes stored over them, and the turn's own
// changes held until its reply commits (turnEffects.write), so an action
// never outlives a reply and a receipt that were not kept.
type turnRecords struct {
	s       *store
	brand   string
	source  map[string]brand.Record // as the brand's data had them, by key
	changed map[string]recordChange
}

// recordChange is what a turn changed in one record: per field, the value
// in the brand's data, the value the turn saw, and the new value. The
// commit refuses it when another turn changed a field since.
type recordChange struct{ def, from, to map[string]string }

func recordKey(brandID string, rt *brand.RecordType, id string) string {
	return brandID + "/" + rt.Type + "/" + id
}

// Get implements RecordBook.
func (o *turnRecords) Get(ctx context.Context, rt *brand.RecordType, id string) (brand.Record, error) {
	src, err := rt.Lookup(ctx, id)
	if err != nil || src == nil {
		return nil, err
	}
	k := recordKey(o.brand, rt, src.ID())
	if o.source == nil {
		o.source = map[string]brand.Record{}
	}
	o.source[k] = src
	stored, err := o.s.recordFields(k, o.brand, src.ID())
	if err != nil {
		return nil, err
	}
	rec := maps.Clone(src)
	maps.Copy(rec, stored)
	if c, ok := o.changed[k]; ok {
		maps.Copy(rec, c.to)
	}
	return rec, nil
}

// Set implements RecordBook: the change is kept with the turn's reply.
func (o *turnRecords) Set(_ context.Context, rt *brand.RecordType, rec brand.Record, changes map[string]string) error {
	k := recordKey(o.brand, rt, rec.ID())
	src, ok := o.source[k]
	if !ok {
		return fmt.Errorf("set %s %s: not read in this turn", rt.Type, rec.ID())
	}
	c, ok := o.changed[k]
	if !ok {
		c = recordChange{def: map[string]string{}, from: map[string]string{}, to: map[string]string{}}
	}
	for f, v := range changes {
		if _, seen := c.from[f]; !seen {
			c.def[f], c.from[f] = src[f], rec[f]
		}
		c.to[f] = v
	}
	if o.changed == nil {
		o.changed = map[string]recordChange{}
	}
	o.changed[k] = c
	return nil
}

// errRecordChanged: another turn changed a record this turn changed too.
var errRecordChanged = errors.New("the record changed during the turn")

// turnEffects is what a turn writes besides its reply: its record changes,
// the action log of its receipt, and what it queues for the ledger (the
// receipt, or a refusal). The reply's transaction writes them all
// (store.finish): a turn is kept whole or not at all.
type turnEffects struct {
	records    map[string]recordChange
	receiptSHA string
	log        []ActionLogEntry
	outbox     []LedgerItem
}

func (fx *turnEffects) write(tx *bolt.Tx) error {
	for k, c := range fx.records {
		cur, err := storedFields(tx, k, legacyKey(k))
		if err != nil {
			return err
		}
		if cur == nil {
			cur = map[string]string{}
		}
		for f, to := range c.to {
			v, ok := cur[f]
			if !ok {
				v = c.def[f]
			}
			if v != c.from[f] {
				return errRecordChanged
			}
			cur[f] = to
		}
		v, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bRecords).Put([]byte(k), v); err != nil {
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

// storedFields returns the fields stored over a record's data, or nil. A
// status kept before brands defined their record types (legacy, by
// brand/id) counts as its status field.
func storedFields(tx *bolt.Tx, key, legacy string) (map[string]string, error) {
	if v := tx.Bucket(bRecords).Get([]byte(key)); v != nil {
		var m map[string]string
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, fmt.Errorf("stored record %s: %w", key, err)
		}
		return m, nil
	}
	if legacy != "" {
		if v := tx.Bucket(bOrders).Get([]byte(legacy)); v != nil {
			return map[string]string{"status": string(v)}, nil
		}
	}
	return nil, nil
}

// legacyKey is the key a record's status had before brands defined their
// record types: brand/id.
func legacyKey(key string) string {
	b, rest, _ := strings.Cut(key, "/")
	_, id, _ := strings.Cut(rest, "/")
	return b + "/" + id
}

// recordFields reads the fields stored over a record.
func (s *store) recordFields(key, brandID, id string) (map[string]string, error) {
	var m map[string]string
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		m, err = storedFields(tx, key, brandID+"/"+id)
		return err
	})
	return m, err
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
	if len(rep.NeedScopes) > 0 && (del != nil || b.WithoutToken == brand.StepUp) {
		// PACT §5.2, §5.5: a step-up names only scope ids on the card,
		// checked as the device authorization endpoint checks them. An
		// agent that needs a scope the Brand does not define gets a plain
		// answer in chat instead.
		scopes, serr := cardScopes(b, rep.NeedScopes)
		if serr != nil {
			p.cfg.Logger.WarnContext(ctx, "the agent asked for a scope the brand does not define; answered in chat", slog.String("brand", b.ID), slog.String("reason", serr.desc))
			rep = Reply{Text: "I can't do that here.", State: rep.State, Close: rep.Close}
		} else {
			body, fx, err := p.stepUp(b, who, conv, rep.Text, scopes, now, creds)
			if del == nil && rep.Refused != nil {
				// Asked under PACT §3 alone: nothing ran; on record as a
				// refusal, as in chat.
				fx.outbox = append(fx.outbox, LedgerItem{Refusal: &LedgerRefusal{ClaimedPrincipal: "sub " + who.Sub + " of " + who.Iss, ClaimedAgent: who.Iss,
					RequestJWT: creds.paJWT, Action: *rep.Refused, Reason: "asked without a delegation grant: answered with a step-up task for " + strings.Join(scopes, " "), ObservedAt: now}})
			}
			return body, fx, err
		}
	}
	text := rep.Text
	out := &Message{MessageID: newID(), ContextID: conv.ID, Role: "ROLE_AGENT", Parts: []Part{{Text: &text}}}
	if del == nil && rep.Refused != nil {
		// An account action asked under PACT §3 alone: refused, and on record.
		reason := "asked without a delegation grant: refused in chat, the User was told to sign in and approve"
		if !b.Grantable(rep.Refused.Tool) {
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
