package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pactledger/pactledger/verifier"
)

// refusalToken checks the delegation token posted with refusal in, and
// its request JWT, as of its observedAt (verifier.VerifyRefusalToken). A token whose verified
// claims a row cannot hold (a NUL byte: a store's text columns refuse
// one) vouches for nothing: its check fails and the row is tied to no
// grant. The error wraps ErrKeysUnavailable when the brand's or the
// agent's keys cannot be fetched: nothing is stored, and the writer posts the refusal again
// (docs/design/009).
func (l *Ledger) refusalToken(ctx context.Context, in RefusalInput) (*verifier.RefusalToken, error) {
	start := time.Now()
	tok, err := l.v.VerifyRefusalToken(ctx, verifier.ParseToken(in.DelegationToken), verifier.ParseToken(in.RequestJWT), in.ObservedAt, l.keys)
	switch {
	case errors.Is(err, verifier.ErrUndecided):
		return nil, fmt.Errorf("%w: %v", ErrKeysUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("delegationToken: %w", err)
	}
	l.cfg.Metrics.verified(time.Since(start))
	return holdable(tok), nil
}

// holdable fails tok's delegation_token check when it vouches for claims
// a row cannot hold (a NUL byte), and returns it.
func holdable(tok *verifier.RefusalToken) *verifier.RefusalToken {
	if !tok.Vouches() {
		return tok
	}
	c := tok.Claims
	if err := nulFree("a claim", append([]string{c.GrantID, c.Sub, c.ClientID, tok.Brand}, c.Scopes()...)...); err != nil {
		tok.Token = verifier.Check{Name: verifier.CheckDelegationToken, Result: verifier.Fail, Detail: "a claim of the token holds a NUL byte"}
		tok.Bindings = verifier.Check{Name: verifier.CheckBindings, Result: verifier.Skipped, Detail: "the delegation token did not verify"}
	}
	return tok
}

// checks are tok's checks, by name.
func refusalChecks(tok *verifier.RefusalToken) map[string]verifier.Check {
	return map[string]verifier.Check{verifier.CheckRequestSignature: tok.Request, verifier.CheckDelegationToken: tok.Token, verifier.CheckBindings: tok.Bindings}
}

// setChecks replaces the checks of r named in by.
func setChecks(r *Row, by map[string]verifier.Check) {
	for i, c := range r.Verifier.Checks {
		if n, ok := by[c.Name]; ok {
			r.Verifier.Checks[i] = n
		}
	}
}

// underGrant records in refusal row r the checks of its delegation token
// and request JWT, the key sets they were checked against, and, when the
// token vouches
// for it (RefusalToken.Vouches), its grant, brand, Brand user and scopes,
// and whether the ledger holds a revocation of that grant from before the
// refusal (grant_not_revoked). A token that does not verify leaves the
// row tied to no grant: a grant id is a claim until the Brand's signature
// vouches for it.
func underGrant(tx Tx, r *Row, tok *verifier.RefusalToken) error {
	setChecks(r, refusalChecks(tok))
	r.BrandKey.Kid = tok.Kid
	if tok.BrandSnapshot != nil {
		r.BrandKey.JWKSSnapshot = tok.BrandSnapshot.ID
	}
	if tok.RequestKid != "" {
		r.Agent.RequestJWTKid = tok.RequestKid
	}
	if tok.AgentSnapshot != nil {
		r.Agent.JWKSSnapshot = tok.AgentSnapshot.ID
	}
	if !tok.Vouches() {
		return nil
	}
	vouchedFields(r, tok)
	check, err := refusalGrantCheck(tx, r.GrantID, r.IssuedAt)
	if err != nil {
		return err
	}
	setChecks(r, map[string]verifier.Check{check.Name: check})
	return nil
}

// refusalGrantCheck is the grant_not_revoked check of a refusal under
// grant, observed at: FAIL when the ledger holds a revocation of the
// grant from before, the playbook's signal of an agent acting after a
// revocation.
func refusalGrantCheck(tx Tx, grant string, at time.Time) (verifier.Check, error) {
	const name = verifier.CheckGrantNotRevoked
	rev, err := tx.Revocation(grant)
	switch {
	case err != nil:
		return verifier.Check{}, err
	case rev == nil:
		return verifier.Check{Name: name, Result: verifier.Pass, Detail: "no revocation recorded"}, nil
	case at.After(rev.RevokedAt):
		return verifier.Check{Name: name, Result: verifier.Fail, Detail: fmt.Sprintf("grant revoked at %s (reported by %s); the refused request was observed at %s, after it",
			rev.RevokedAt.Format(time.RFC3339), rev.By, at.Format(time.RFC3339))}, nil
	}
	return verifier.Check{Name: name, Result: verifier.Pass, Detail: fmt.Sprintf("observed before the revocation at %s", rev.RevokedAt.Format(time.RFC3339))}, nil
}

// TokenVouches reports whether a signature vouches for a refusal row's
// grant: a refusal posted with a delegation token that verified
// (AppendRefusal sets the grant of no other refusal).
func (r *Row) TokenVouches() bool {
	return r.Kind == KindRefusal && r.GrantID != "" && r.Verifier.passed(verifier.CheckDelegationToken)
}

// reverifyRefusal completes out, VerifyRow's of refusal row r whose stored
// refusal record is in: the delegation token posted with it, if any, and
// the request JWT beside it are checked again against the key sets stored
// with the row, as of the refusal's observedAt; every other check is the
// write-time record's (a refusal has no receipt to check, and
// grant_not_revoked depends on the ledger's state at write time).
func reverifyRefusal(ctx context.Context, v *verifier.Verifier, r *Row, in *RefusalInput, src *snapshotSource, out *Reverification) *Reverification {
	out.Checks = slices.Clone(r.Verifier.Checks)
	if in == nil || in.DelegationToken == "" {
		return out
	}
	tokenOf := verifier.ParseToken(in.DelegationToken)
	if c, err := tokenOf.Compact(); err == nil {
		var claims verifier.TokenClaims
		if json.Unmarshal(c.Payload, &claims) == nil {
			// The stored key set is the one of the brand the token names.
			src.brand, _ = claims.Audience()
		}
	}
	tok, err := v.VerifyRefusalToken(ctx, tokenOf, verifier.ParseToken(in.RequestJWT), in.ObservedAt, src)
	if err != nil {
		out.Same = false
		out.Differences = append(out.Differences, "the stored delegation token could not be checked again: "+err.Error())
		return out
	}
	again := refusalChecks(holdable(tok))
	for i, c := range out.Checks {
		n, ok := again[c.Name]
		switch {
		case ok:
			out.Checks[i] = n
		case c.Name == verifier.CheckGrantNotRevoked:
			out.Checks[i].Detail = "as recorded at write time: " + c.Detail
		default:
			continue
		}
		if out.Checks[i].Result != c.Result {
			out.Same = false
			out.Differences = append(out.Differences, fmt.Sprintf("%s was %s at write time, now %s (%s)", c.Name, c.Result, out.Checks[i].Result, out.Checks[i].Detail))
		}
	}
	return out
}

// refusalAgent is the agent platform a refusal names, and the kid of its
// request JWT: the JWT's iss when it parses and names one, else the
// platform the writer claimed.
func refusalAgent(in *RefusalInput) (agent, kid string) {
	agent = in.ClaimedAgent
	if c, err := verifier.ParseCompact(in.RequestJWT); err == nil {
		var claims struct {
			Iss string `json:"iss"`
		}
		if json.Unmarshal(c.Payload, &claims) == nil && claims.Iss != "" {
			agent = claims.Iss
		}
		kid = c.Kid
	}
	return agent, kid
}

// newRefusalRow is the row of refusal in, of id (its bundle's hash),
// with the fields its input gives: AppendRefusal adds its checks, status
// and times, and what a vouching token gives (underGrant); fsck and
// VerifyRow build it again from the evidence (refusalFromEvidence).
func newRefusalRow(in *RefusalInput, id, agent, kid string) *Row {
	action := verifier.RowAction{Tool: in.Tool, Target: in.Target}
	if in.Target != "" {
		// No agent signed a refusal's action: its target is the writer's.
		action.TargetSource = verifier.TargetFromWriter
	}
	return &Row{
		ID:             id,
		ReceiptID:      "sha256:" + id,
		Kind:           KindRefusal,
		Principal:      in.ClaimedPrincipal,
		Agent:          Agent{Platform: agent, RequestJWTKid: kid},
		Actions:        []verifier.RowAction{action},
		IssuedAt:       in.ObservedAt,
		Refusal:        &Refusal{ClaimedPrincipal: in.ClaimedPrincipal, ClaimedAgent: in.ClaimedAgent, Reason: in.Reason},
		EvidenceSHA256: id,
	}
}

// vouchedFields sets on refusal row r what its delegation token gives
// when it vouches for its grant: the grant, the Brand user as principal,
// the brand, the scopes granted and the token's expiry.
func vouchedFields(r *Row, tok *verifier.RefusalToken) {
	c := tok.Claims
	r.GrantID, r.Principal, r.Brand, r.ScopeGranted = c.GrantID, c.Sub, tok.Brand, c.Scopes()
	if c.Exp != nil {
		if exp, err := c.Exp.Check("exp"); err == nil {
			r.Limits.GrantExpires = exp
		}
	}
}
