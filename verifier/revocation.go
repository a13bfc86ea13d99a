package verifier

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// RevocationTyp is the JWS typ header of a revocation statement.
const RevocationTyp = "pact-revocation+jwt"

// RevocationClaims are what a Provider signs when it reports a grant's
// revocation to the ledger (a revocation statement, docs/design/045):
// that it, the issuer of the grant's delegation tokens at the brand's
// interface URL, revoked the grant as of RevokedAt. A statement has no
// exp: it is a record of something that happened, and is read again
// whenever the Provider's own state may have forgotten it.
type RevocationClaims struct {
	Issuer  string `json:"iss"`
	Brand   string `json:"brand"`
	GrantID string `json:"grant_id"`
	// RevokedAt is RFC 3339 with the fraction of the second the Provider
	// recorded: the statement names the exact time the ledger records.
	RevokedAt string `json:"revoked_at"`
	IssuedAt  int64  `json:"iat"`
}

// Revocation is a verified revocation statement.
type Revocation struct {
	Brand, GrantID, Kid string
	RevokedAt           time.Time
}

// VerifyRevocation verifies a revocation statement, a compact JWS of at
// most MaxTokenBytes with typ RevocationTyp, signed (with an algorithm of
// the allow-list, never the token's own alg) by a key of the brand its brand
// claim names, which keys must trust (KeySource.Brand): its iss must be
// the brand's issuer when the source names one. The error wraps
// ErrUndecided when the brand's keys cannot be fetched, ErrUntrusted for
// a brand keys does not trust, and ErrMalformed, ErrSignature,
// ErrUnknownKid or ErrClaims otherwise.
func VerifyRevocation(ctx context.Context, tok string, keys KeySource) (Revocation, error) {
	c, err := ParseCompact(tok)
	if err != nil {
		return Revocation{}, err
	}
	if !sameTyp(c.Typ, RevocationTyp) {
		return Revocation{}, fmt.Errorf("%w: typ %q, want %q", ErrClaims, c.Typ, RevocationTyp)
	}
	if c.Kid == "" {
		return Revocation{}, fmt.Errorf("%w: the statement names no kid", ErrUnknownKid)
	}
	// Read unverified only to know whose keys to check it with, as a
	// receipt's brand claim is.
	var unverified struct {
		Brand string `json:"brand"`
	}
	if json.Unmarshal(c.Payload, &unverified) != nil || unverified.Brand == "" {
		return Revocation{}, fmt.Errorf("%w: the statement's claims name no brand", ErrMalformed)
	}
	payload, kid, _, s, err := verifySigned(tok, verifyCompact, func(refresh bool) (Signer, error) {
		return keys.Brand(ctx, unverified.Brand, refresh)
	})
	if err != nil {
		return Revocation{}, err
	}
	var claims RevocationClaims
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Revocation{}, fmt.Errorf("%w: the statement's claims are not a JSON object of the expected shape", ErrMalformed)
	}
	at, err := time.Parse(time.RFC3339Nano, claims.RevokedAt)
	switch {
	case s.Issuer != "" && claims.Issuer != s.Issuer:
		return Revocation{}, fmt.Errorf("%w: issuer %q is not the brand's, %q", ErrClaims, claims.Issuer, s.Issuer)
	case claims.GrantID == "":
		return Revocation{}, fmt.Errorf("%w: no grant_id", ErrClaims)
	case err != nil:
		return Revocation{}, fmt.Errorf("%w: revoked_at %q is not an RFC 3339 time", ErrClaims, claims.RevokedAt)
	case !InRange(at):
		return Revocation{}, fmt.Errorf("%w: revoked_at %s is out of range", ErrClaims, claims.RevokedAt)
	case claims.IssuedAt <= 0:
		return Revocation{}, fmt.Errorf("%w: no iat", ErrClaims)
	}
	return Revocation{Brand: claims.Brand, GrantID: claims.GrantID, Kid: kid, RevokedAt: at.UTC()}, nil
}
