// Package pipeline posts the Provider's outbox to the ledger: receipts,
// refusals and revocations, in order, with the generated ledgerv1 request
// messages, retrying while the ledger is down and setting aside what it
// refuses as invalid. The outbox itself is durable storage that Run drains
// through the Outbox interface.
package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Receipt is one receipt for the ledger's AppendReceipt, as the outbox
// keeps it.
type Receipt struct {
	ReceiptJWS      string   `json:"receiptJws"`
	RequestJWT      string   `json:"requestJwt"`
	DelegationToken string   `json:"delegationToken"`
	Actions         []Action `json:"actions"`
	ContextID       string   `json:"contextId,omitempty"`
	MessageID       string   `json:"messageId,omitempty"`
}

// Action is one action log entry of a Receipt: the exact args.
type Action struct {
	Tool     string `json:"tool"`
	Target   string `json:"target,omitempty"`
	ArgsJSON string `json:"argsJson,omitempty"`
}

// Refusal is an account action refused, or a consent denied, for the
// ledger's AppendRefusal.
type Refusal struct {
	ClaimedPrincipal string        `json:"claimedPrincipal"`
	ClaimedAgent     string        `json:"claimedAgent"`
	RequestJWT       string        `json:"requestJwt,omitempty"`
	Action           RefusedAction `json:"action"`
	Reason           string        `json:"reason"`
	ObservedAt       time.Time     `json:"observedAt"`
	// DelegationToken is the delegation token the refused request carried
	// (PACT §5.5), when it was refused under one: the ledger verifies it
	// and lists the refusal with the token's grant.
	DelegationToken string `json:"delegationToken,omitempty"`
}

// RefusedAction is the action of a Refusal.
type RefusedAction struct {
	Tool   string `json:"tool"`
	Target string `json:"target,omitempty"`
}

// Revocation is a revoked grant, for the ledger's RevokeGrant.
type Revocation struct {
	GrantID   string    `json:"grantId"`
	RevokedAt time.Time `json:"revokedAt"`
	Note      string    `json:"note,omitempty"`
}

// Item is one entry of the outbox: exactly one of a receipt, a refusal or
// a revocation.
type Item struct {
	Receipt    *Receipt    `json:"receipt,omitempty"`
	Refusal    *Refusal    `json:"refusal,omitempty"`
	Revocation *Revocation `json:"revocation,omitempty"`
}

// DecodeItem reads an outbox entry. Entries queued before the outbox held
// refusals and revocations are bare receipts.
func DecodeItem(v []byte) (Item, error) {
	var item Item
	if err := json.Unmarshal(v, &item); err != nil {
		return Item{}, err
	}
	if item.Receipt == nil && item.Refusal == nil && item.Revocation == nil {
		var old Receipt
		if err := json.Unmarshal(v, &old); err == nil && old.ReceiptJWS != "" {
			item.Receipt = &old
		}
	}
	return item, nil
}

// DeniedConsent is the refusal a User's denial at the consent page puts on
// record: the grant_delegation the personal agent asked for at brand with
// requestJWT at requested, which the User denied at denied. The refused
// request is the agent's, so it is observed when it was made: the ledger
// checks requestJWT as of observedAt, and an agent's JWT lives minutes at
// most (PACT §3.2) while the User may answer up to the device code's end.
// The reason says when the User denied.
func DeniedConsent(user, client, requestJWT, brand string, scopes []string, requested, denied time.Time) Item {
	return Item{Refusal: &Refusal{
		ClaimedPrincipal: user, ClaimedAgent: client, RequestJWT: requestJWT,
		Action: RefusedAction{Tool: "grant_delegation", Target: strings.Join(scopes, " ")},
		Reason: "the user denied consent at " + brand + " for " + strings.Join(scopes, ", ") + " at " + denied.UTC().Format(time.RFC3339) +
			"; the personal agent asked at " + requested.UTC().Format(time.RFC3339),
		ObservedAt: requested,
	}}
}

// Revoked is the revocation of grant at at, with a note saying why.
func Revoked(grant string, at time.Time, note string) Item {
	return Item{Revocation: &Revocation{GrantID: grant, RevokedAt: at, Note: note}}
}

// Brand is the interface URL of the brand whose keys the ledger checks
// the entry's signatures with: a receipt's brand claim, else the audience
// of the delegation token a refusal carries; "" for an entry that names
// none (a revocation, a refusal without a token) or whose token cannot
// be read. The token is decoded, not verified: this says where an entry
// is going, not whether it is genuine.
func (it Item) Brand() string {
	switch {
	case it.Receipt != nil:
		var c struct {
			Brand string `json:"brand"`
		}
		if claimsOf(it.Receipt.ReceiptJWS, &c) {
			return c.Brand
		}
	case it.Refusal != nil && it.Refusal.DelegationToken != "":
		var c struct {
			Aud json.RawMessage `json:"aud"`
		}
		if !claimsOf(it.Refusal.DelegationToken, &c) {
			return ""
		}
		var one string
		if json.Unmarshal(c.Aud, &one) == nil {
			return one
		}
		var many []string
		if json.Unmarshal(c.Aud, &many) == nil && len(many) == 1 {
			return many[0]
		}
	}
	return ""
}

// SignerKids are the kids, from their JWS headers, of the Provider's
// signatures the entry carries: a receipt's JWS and its delegation token,
// the delegation token of a refusal made under one; each kid once, in
// that order. The personal agent's request JWT is not the Provider's and
// is left out; so is a token whose header cannot be read. The headers
// are decoded, not verified: this says which of the Provider's keys the
// ledger will check the entry with.
func (it Item) SignerKids() []string {
	var toks []string
	switch {
	case it.Receipt != nil:
		toks = []string{it.Receipt.ReceiptJWS, it.Receipt.DelegationToken}
	case it.Refusal != nil:
		toks = []string{it.Refusal.DelegationToken}
	}
	var kids []string
	for _, tok := range toks {
		if kid := kidOf(tok); kid != "" && !slices.Contains(kids, kid) {
			kids = append(kids, kid)
		}
	}
	return kids
}

// kidOf is the kid in the header of compact JWS tok, unverified; "" when
// it names none or cannot be read.
func kidOf(tok string) string {
	head, _, ok := strings.Cut(tok, ".")
	if !ok {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	var h struct {
		Kid string `json:"kid"`
	}
	if err != nil || json.Unmarshal(raw, &h) != nil {
		return ""
	}
	return h.Kid
}

// claimsOf decodes the payload of compact JWS tok into v, unverified.
func claimsOf(tok string, v any) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(raw, v) == nil
}

// Grant is the grant the ledger checks the entry under, read from its
// claims unverified: a receipt's grantId, the grant_id of the delegation
// token a refusal carries, a revocation's grant; "" when it names none
// or cannot be read. It only decides which entries the pipeline keeps in
// order when it moves one back (MoveBacker): an entry that lies about its
// grant changes no more than the order of its own recording.
func (it Item) Grant() string {
	switch {
	case it.Receipt != nil:
		var c struct {
			GrantID string `json:"grantId"`
		}
		if claimsOf(it.Receipt.ReceiptJWS, &c) {
			return c.GrantID
		}
	case it.Refusal != nil && it.Refusal.DelegationToken != "":
		var c struct {
			GrantID string `json:"grant_id"`
		}
		if claimsOf(it.Refusal.DelegationToken, &c) {
			return c.GrantID
		}
	case it.Revocation != nil:
		return it.Revocation.GrantID
	}
	return ""
}

// MayPass reports whether it, a receipt or a refusal, may be recorded
// after rev although it was queued before it, with the ledger's verdict
// on it unchanged. The ledger checks a receipt or a refusal under a grant
// against the revocations of that grant it holds when it records it
// (grant_not_revoked): a receipt fails when its ts is not before the
// revocation's time, truncated to the second (ledger.IssuedAfterRevocation),
// a refusal when its observedAt is after it. Recorded before rev, it was
// checked without rev; recorded after, with it. So it may pass rev when
// rev is of another grant, or when the check against rev passes: it is
// dated before the revocation. A revocation never passes anything, nor
// does an entry whose time cannot be read pass its grant's revocation.
func (it Item) MayPass(rev *Revocation) bool {
	if rev == nil {
		return true
	}
	if it.Revocation != nil {
		return false
	}
	g := it.Grant()
	if g == "" || g != rev.GrantID {
		// A refusal without a grant is checked against no revocation; a
		// receipt whose grant cannot be read against none the ledger
		// could find under rev's id.
		return it.Receipt != nil || it.Refusal != nil
	}
	switch {
	case it.Receipt != nil:
		var c struct {
			TS string `json:"ts"`
		}
		if !claimsOf(it.Receipt.ReceiptJWS, &c) {
			return false
		}
		ts, err := time.Parse(time.RFC3339Nano, c.TS)
		return err == nil && ts.Before(rev.RevokedAt.Truncate(time.Second))
	case it.Refusal != nil:
		return !it.Refusal.ObservedAt.IsZero() && !it.Refusal.ObservedAt.After(rev.RevokedAt)
	}
	return false
}
