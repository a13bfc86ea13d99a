package pact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || !b.Delegation {
		return nil, errors.New("not a bearer delegation token for a delegating brand")
	}
	jws, err := jose.ParseSignedCompact(strings.TrimSpace(tok), []jose.SignatureAlgorithm{jose.ES256})
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

// orderBook keeps order status changes in the Provider's store, over the
// brand's data.
type orderBook struct {
	s     *store
	brand string
}

func (o orderBook) key(order *Order) []byte { return []byte(o.brand + "/" + order.ID) }

func (o orderBook) Status(order *Order) (string, error) {
	status := order.Status
	err := o.s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bOrders).Get(o.key(order)); v != nil {
			status = string(v)
		}
		return nil
	})
	return status, err
}

func (o orderBook) SetStatus(order *Order, status string) error {
	return o.s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bOrders).Put(o.key(order), []byte(status)) })
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
// turn ran under a delegation token.
func (p *Provider) respond(b *Brand, who *verifier.RequestClaims, del *DelegationClaims, conv *conversation, rep Reply, now time.Time, creds credentials) (json.RawMessage, error) {
	text := rep.Text
	parts := []Part{{Text: &text}}
	if del != nil && len(rep.NeedScopes) > 0 {
		// PACT §5.5 step-up: a fresh device authorization for exactly the
		// missing scopes; the conversation stays open.
		_, userCode, err := p.newDeviceAuth(b, who.Iss, who.Sub, creds.paJWT, rep.NeedScopes, now)
		if err != nil {
			return nil, err
		}
		task := map[string]any{
			"id":        "t-" + newID(),
			"contextId": conv.ID,
			"status": map[string]any{
				"state":   "TASK_STATE_AUTH_REQUIRED",
				"message": map[string]any{"role": "ROLE_AGENT", "parts": parts},
			},
			"metadata": map[string]any{
				"pact.missingScopes":           rep.NeedScopes,
				"pact.verificationUriComplete": p.verificationURI(b, userCode),
			},
		}
		return json.Marshal(map[string]any{"task": task})
	}
	out := &Message{MessageID: newID(), ContextID: conv.ID, Role: "ROLE_AGENT", Parts: parts}
	if del == nil && rep.Refused != nil {
		// An account action asked under PACT §3 alone: refused, and on record.
		err := p.store.db.Update(func(tx *bolt.Tx) error {
			return enqueue(tx, LedgerItem{Refusal: &LedgerRefusal{ClaimedPrincipal: "sub " + who.Sub + " of " + who.Iss, ClaimedAgent: who.Iss,
				RequestJWT: creds.paJWT, Action: *rep.Refused, Reason: "asked without a delegation grant: refused in chat, the User was told to sign in and approve", ObservedAt: now}})
		})
		if err != nil {
			return nil, err
		}
		p.wakePipeline()
	}
	if del != nil {
		claims := ReceiptClaims{GrantID: del.GrantID, User: del.Sub, PA: who.Iss, Brand: p.InterfaceURL(b.ID),
			ScopesUsed: nonNil(rep.ScopesUsed), Actions: []ReceiptAction{}, TS: now.Format(time.RFC3339)}
		for _, a := range rep.Actions {
			claims.Actions = append(claims.Actions, ReceiptAction{Tool: a.Tool, ArgsHash: verifier.ArgsHash(a.ArgsJSON)})
		}
		jws, err := p.key.signReceipt(claims)
		if err != nil {
			return nil, err
		}
		meta, err := json.Marshal(map[string]any{"pact.receipt": map[string]any{"jws": jws, "claims": claims}})
		if err != nil {
			return nil, err
		}
		out.Metadata = meta
		sum := sha256.Sum256([]byte(jws))
		post := LedgerPost{ReceiptJWS: jws, RequestJWT: creds.paJWT, DelegationToken: creds.delegation, Actions: []LedgerEntry{}, ContextID: conv.ID, MessageID: out.MessageID}
		for _, a := range rep.Actions {
			post.Actions = append(post.Actions, LedgerEntry(a))
		}
		if err := p.record(hex.EncodeToString(sum[:]), post, rep.Actions, now); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]any{"message": out})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// record keeps the action log of a receipt and queues the receipt for the
// ledger, in one transaction.
func (p *Provider) record(receiptSHA string, post LedgerPost, actions []ActionTaken, now time.Time) error {
	err := p.store.db.Update(func(tx *bolt.Tx) error {
		if len(actions) > 0 {
			entries := make([]ActionLogEntry, len(actions))
			for i, a := range actions {
				entries[i] = ActionLogEntry{ReceiptSHA256: receiptSHA, Tool: a.Tool, Target: a.Target, ArgsJSON: a.ArgsJSON, At: now}
			}
			v, err := json.Marshal(entries)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bActionLog).Put([]byte(receiptSHA), v); err != nil {
				return err
			}
		}
		return enqueue(tx, LedgerItem{Receipt: &post})
	})
	if err == nil {
		p.wakePipeline()
	}
	return err
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
