package verifier

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// ErrClaims: a verified token's registered claims are not acceptable
// (issuer, audience, times, type); the wrapped text says which.
var ErrClaims = errors.New("claims rejected")

// Claims are the registered claims of a JWT (RFC 7519 §4.1) that
// VerifyCompact checks. A token's claim type embeds them; the times are
// NumericDates, the one JWT time type of the module.
type Claims struct {
	Issuer    string       `json:"iss,omitempty"`
	Subject   string       `json:"sub,omitempty"`
	Audience  jwt.Audience `json:"aud,omitempty"`
	IssuedAt  *NumericDate `json:"iat,omitempty"`
	Expiry    *NumericDate `json:"exp,omitempty"`
	NotBefore *NumericDate `json:"nbf,omitempty"`
	ID        string       `json:"jti,omitempty"`
}

// Registered returns the registered claims, so that any type embedding
// Claims is a ClaimSet.
func (c *Claims) Registered() *Claims { return c }

// ClaimSet is a token's claims with registered claims in them.
type ClaimSet interface{ Registered() *Claims }

// NumericDateOf is the NumericDate of t, in whole seconds.
func NumericDateOf(t time.Time) *NumericDate {
	d := NewNumericDate(float64(t.Unix()))
	return &d
}

// Expected is what VerifyCompact requires of a token besides a signature
// by one of the keys. Its zero value requires a kid and, when claims are
// decoded, an unexpired exp with jwt.DefaultLeeway.
type Expected struct {
	// Issuer and Audience, when set, must be the token's iss and one of
	// its aud.
	Issuer, Audience string
	// Typ, when set, is the header typ required (RFC 8725 §3.11), compared
	// without case and with or without "application/".
	Typ string
	// Time is when the token is checked; zero means time.Now.
	Time time.Time
	// Leeway is the clock skew allowed on exp, nbf and iat; zero means
	// jwt.DefaultLeeway.
	Leeway time.Duration
	// MaxLifetime, when set, requires iat and exp - iat in (0, MaxLifetime].
	MaxLifetime time.Duration
	// KidOptional accepts a token without a kid, tried against every key.
	KidOptional bool
}

// Signed is a verified compact JWS: the key that verified it and its
// payload.
type Signed struct {
	Kid, Alg, Typ string
	Payload       []byte
}

// VerifyCompact verifies token, a compact JWS of at most MaxTokenBytes,
// against keys with the algorithm allow-list (never the token's own alg)
// and the kid in its header. When claims is not nil it decodes the payload
// into it and checks the registered claims against want with go-jose's
// jwt.Expected: iss, aud, exp (required), nbf and iat with the leeway, and
// the lifetime. Errors wrap ErrMalformed, ErrSignature, ErrUnknownKid or
// ErrClaims.
func VerifyCompact(token string, keys *KeySet, claims ClaimSet, want Expected) (Signed, error) {
	c, err := ParseCompact(token)
	if err != nil {
		return Signed{}, err
	}
	if c.Kid == "" && !want.KidOptional {
		return Signed{}, fmt.Errorf("%w: the token names no kid", ErrUnknownKid)
	}
	if want.Typ != "" && !sameTyp(c.Typ, want.Typ) {
		return Signed{}, fmt.Errorf("%w: typ %q, want %q", ErrClaims, c.Typ, want.Typ)
	}
	payload, kid, alg, err := verifyCompact(token, keys)
	if err != nil {
		return Signed{}, err
	}
	s := Signed{Kid: kid, Alg: string(alg), Typ: c.Typ, Payload: payload}
	if claims == nil {
		return s, nil
	}
	if err := json.Unmarshal(payload, claims); err != nil {
		return s, fmt.Errorf("%w: claims are not a JSON object of the expected shape", ErrMalformed)
	}
	return s, checkClaims(claims.Registered(), want)
}

// sameTyp compares typ header values as RFC 7515 §4.1.9 says: without
// case, "application/" optional.
func sameTyp(got, want string) bool {
	trim := func(s string) string { return strings.TrimPrefix(strings.ToLower(s), "application/") }
	return trim(got) == trim(want)
}

// checkClaims checks registered claims against want.
func checkClaims(r *Claims, want Expected) error {
	if r.Expiry == nil {
		return fmt.Errorf("%w: no exp", ErrClaims)
	}
	jc := jwt.Claims{Issuer: r.Issuer, Subject: r.Subject, Audience: r.Audience, ID: r.ID}
	times := []struct {
		name string
		d    *NumericDate
		out  **jwt.NumericDate
	}{{"iat", r.IssuedAt, &jc.IssuedAt}, {"exp", r.Expiry, &jc.Expiry}, {"nbf", r.NotBefore, &jc.NotBefore}}
	for _, t := range times {
		if t.d == nil {
			continue
		}
		v, err := t.d.Check(t.name)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrClaims, err)
		}
		*t.out = jwt.NewNumericDate(v)
	}
	if want.MaxLifetime > 0 {
		if jc.IssuedAt == nil {
			return fmt.Errorf("%w: no iat", ErrClaims)
		}
		if life := jc.Expiry.Time().Sub(jc.IssuedAt.Time()); life <= 0 || life > want.MaxLifetime {
			return fmt.Errorf("%w: lifetime %s, want at most %s", ErrClaims, life, want.MaxLifetime)
		}
	}
	e := jwt.Expected{Issuer: want.Issuer, Time: want.Time}
	if want.Audience != "" {
		e.AnyAudience = jwt.Audience{want.Audience}
	}
	leeway := want.Leeway
	if leeway == 0 {
		leeway = jwt.DefaultLeeway
	}
	switch err := jc.ValidateWithLeeway(e, leeway); {
	case err == nil:
		return nil
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return fmt.Errorf("%w: issuer %q is not %q", ErrClaims, r.Issuer, want.Issuer)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return fmt.Errorf("%w: audience %q does not include %q", ErrClaims, []string(r.Audience), want.Audience)
	case errors.Is(err, jwt.ErrExpired):
		return fmt.Errorf("%w: expired", ErrClaims)
	case errors.Is(err, jwt.ErrNotValidYet):
		return fmt.Errorf("%w: not valid yet", ErrClaims)
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return fmt.Errorf("%w: issued in the future", ErrClaims)
	default:
		return fmt.Errorf("%w: %v", ErrClaims, err)
	}
}

// KeySetOf is a KeySet of the public keys in set, named by uri (where the
// set is published, or where it was configured); it was not fetched, so
// its snapshot has no fetch time.
func KeySetOf(uri string, set *jose.JSONWebKeySet) (*KeySet, error) {
	pub := jose.JSONWebKeySet{}
	for _, k := range set.Keys {
		pub.Keys = append(pub.Keys, k.Public())
	}
	b, err := json.Marshal(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJWKS, err)
	}
	return ParseKeySet(NewSnapshot(uri, time.Time{}, b))
}
