package oauth

import (
	"errors"
	"fmt"
	"time"

	"github.com/pactledger/pactledger/verifier"
)

// DelegationTokenType is the typ of a delegation token (RFC 9068 §2.1).
const DelegationTokenType = "at+jwt"

// DelegationClaims are the claims of a delegation token (PACT §5.4): the
// registered claims (iss the brand's authorization server, aud its
// interface URL, sub the Brand user), and the grant.
type DelegationClaims struct {
	verifier.Claims
	ClientID string `json:"client_id"`
	Scope    string `json:"scope"`
	GrantID  string `json:"grant_id"`
}

// NewDelegationClaims are the claims of a delegation token of g issued at
// now by issuer for the interface audience, with its id jti. The token
// ends AccessTokenTTL after now, or with its grant when that is sooner.
func NewDelegationClaims(g *Grant, issuer, audience, scope, jti string, now time.Time) DelegationClaims {
	exp := now.Add(AccessTokenTTL)
	if !g.Expires.IsZero() && g.Expires.Before(exp) {
		exp = g.Expires
	}
	return DelegationClaims{
		Claims: verifier.Claims{Issuer: issuer, Audience: []string{audience}, Subject: g.User, ID: jti,
			IssuedAt: verifier.NumericDateOf(now), Expiry: verifier.NumericDateOf(exp)},
		ClientID: g.Client, Scope: scope, GrantID: g.ID,
	}
}

// DelegationLeeway is the clock skew allowed on a delegation token's times.
const DelegationLeeway = 30 * time.Second

// VerifyDelegation checks a delegation token as PACT §5.5 says: signed by
// one of keys (the Provider's own) under its kid, typ at+jwt, iss the
// brand's authorization server, aud the interface URL, not expired (30 s
// skew), client_id the personal agent's iss, and a grant id. Whether the
// grant is still active is the caller's to check.
func VerifyDelegation(token string, keys *verifier.KeySet, issuer, audience, client string, now time.Time) (*DelegationClaims, error) {
	var c DelegationClaims
	_, err := verifier.VerifyCompact(token, keys, &c, verifier.Expected{Issuer: issuer, Audience: audience, Typ: DelegationTokenType,
		Time: now, Leeway: DelegationLeeway})
	switch {
	case err != nil:
		return nil, fmt.Errorf("delegation token: %w", err)
	case c.ClientID != client:
		return nil, errors.New("delegation token: client_id is not the personal agent's iss")
	case c.GrantID == "" || c.Subject == "":
		return nil, errors.New("delegation token: sub and grant_id are required")
	}
	return &c, nil
}
