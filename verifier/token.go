package verifier

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Algorithms is the explicit allow-list for every signature the verifier
// checks (PACT §3.2, §5.4). The token's own alg header is never trusted.
var Algorithms = []jose.SignatureAlgorithm{jose.ES256, jose.RS256}

// MaxTokenBytes caps each compact token (receipt JWS, request JWT,
// delegation token).
const MaxTokenBytes = 16 << 10

// Compact is the unverified view of a compact JWS: its header and payload.
type Compact struct {
	Alg     string
	Kid     string
	Typ     string
	Payload []byte
}

// ParseCompact decodes a compact JWS without verifying it: three base64url
// segments, a JSON object header with an alg, and a payload. It is the
// structural check that decides between a bad request and a FAIL row.
func ParseCompact(s string) (Compact, error) {
	if s == "" {
		return Compact{}, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(s) > MaxTokenBytes {
		return Compact{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxTokenBytes)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Compact{}, fmt.Errorf("%w: not a compact JWS (want 3 dot-separated parts, got %d)", ErrMalformed, len(parts))
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return Compact{}, fmt.Errorf("%w: header is not base64url", ErrMalformed)
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}
	if err := json.Unmarshal(hb, &h); err != nil || h.Alg == "" {
		return Compact{}, fmt.Errorf("%w: header is not a JSON object with alg", ErrMalformed)
	}
	pb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Compact{}, fmt.Errorf("%w: payload is not base64url", ErrMalformed)
	}
	if _, err := base64.RawURLEncoding.DecodeString(parts[2]); err != nil {
		return Compact{}, fmt.Errorf("%w: signature is not base64url", ErrMalformed)
	}
	return Compact{Alg: h.Alg, Kid: h.Kid, Typ: h.Typ, Payload: pb}, nil
}

// verifyCompact verifies s against the keys in ks and returns the verified
// payload and the kid of the key that verified it.
func verifyCompact(s string, ks *KeySet) (payload []byte, kid string, alg jose.SignatureAlgorithm, err error) {
	jws, err := jose.ParseSignedCompact(s, Algorithms)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: %v", ErrSignature, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, "", "", fmt.Errorf("%w: want exactly one signature", ErrSignature)
	}
	h := jws.Signatures[0].Header
	alg = jose.SignatureAlgorithm(h.Algorithm)
	cands := ks.candidates(h.KeyID, alg)
	if len(cands) == 0 {
		return nil, h.KeyID, alg, fmt.Errorf("%w: kid %q (%s) not in JWKS %s", ErrUnknownKid, h.KeyID, alg, ks.Snapshot.URI)
	}
	for _, k := range cands {
		if p, err := jws.Verify(k.Key); err == nil {
			return p, k.KeyID, alg, nil
		}
	}
	return nil, h.KeyID, alg, fmt.Errorf("%w: %s signature does not verify with kid %q", ErrSignature, alg, h.KeyID)
}

// NumericDate is a JWT time: seconds since the epoch.
type NumericDate float64

// Time returns d as a time.
func (d NumericDate) Time() time.Time {
	sec := int64(d)
	return time.Unix(sec, int64((float64(d)-float64(sec))*1e9)).UTC()
}

// RequestClaims are the personal-agent JWT claims of PACT §3.2.
type RequestClaims struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Iat *NumericDate    `json:"iat"`
	Exp *NumericDate    `json:"exp"`
	Jti string          `json:"jti,omitempty"`
}

// TokenClaims are the delegation token claims of PACT §5.4.
type TokenClaims struct {
	Iss      string          `json:"iss"`
	Aud      json.RawMessage `json:"aud"`
	Sub      string          `json:"sub"`
	ClientID string          `json:"client_id"`
	Scope    string          `json:"scope"`
	GrantID  string          `json:"grant_id"`
	Iat      *NumericDate    `json:"iat"`
	Exp      *NumericDate    `json:"exp"`
}

// Scopes returns the space-separated scope as a list.
func (c TokenClaims) Scopes() []string { return strings.Fields(c.Scope) }

// audience decodes aud: a single string, or (when allowList) an array.
func audience(raw json.RawMessage, allowList bool) ([]string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	if !allowList {
		return nil, false
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many, true
	}
	return nil, false
}

// Receipt is the claims of a PACT receipt (§5.6).
type Receipt struct {
	GrantID    string          `json:"grantId"`
	User       string          `json:"user"`
	PA         string          `json:"pa"`
	Brand      string          `json:"brand"`
	ScopesUsed []string        `json:"scopesUsed"`
	Actions    []ReceiptAction `json:"actions"`
	TS         string          `json:"ts"`

	// Time is TS parsed.
	Time time.Time `json:"-"`
}

// ReceiptAction is one action a receipt lists.
type ReceiptAction struct {
	Tool     string `json:"tool"`
	ArgsHash string `json:"argsHash,omitempty"`
}

// ParseReceipt decodes a receipt JWS without verifying it. It fails when the
// input is not a compact JWS or its payload is not receipt claims with an
// RFC 3339 ts; such input cannot be recorded.
func ParseReceipt(jws string) (Receipt, Compact, error) {
	c, err := ParseCompact(jws)
	if err != nil {
		return Receipt{}, c, err
	}
	var r Receipt
	if err := json.Unmarshal(c.Payload, &r); err != nil {
		return Receipt{}, c, fmt.Errorf("%w: receipt claims are not a JSON object of the PACT §5.6 shape", ErrMalformed)
	}
	t, err := time.Parse(time.RFC3339Nano, r.TS)
	if err != nil {
		return Receipt{}, c, fmt.Errorf("%w: receipt ts %q is not RFC 3339", ErrMalformed, r.TS)
	}
	r.Time = t.UTC()
	return r, c, nil
}

// VerifySignature verifies a compact token against the keys of one JWKS
// (such as a stored snapshot) with the algorithm allow-list, and returns
// the kid and algorithm of the key that verified it.
func VerifySignature(token string, ks *KeySet) (kid, alg string, err error) {
	_, kid, a, err := verifyCompact(token, ks)
	return kid, string(a), err
}

// DecodeClaims decodes the claims of a compact token into dst without
// verifying it.
func DecodeClaims(token string, dst any) (Compact, error) {
	c, err := ParseCompact(token)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(c.Payload, dst); err != nil {
		return c, fmt.Errorf("%w: claims are not a JSON object", ErrMalformed)
	}
	return c, nil
}
