package verifier

import (
	"bytes"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

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

// ErrNotCanonical: a token segment is not in the one accepted base64url
// encoding (it also wraps ErrMalformed). No signer emits such a token; a
// writer that posts one re-encoded it.
var ErrNotCanonical = errors.New("not canonical")

// b64 is the strict base64url decoder of RFC 7515 §2: no padding, and
// (RFC 4648 §3.5) a last character whose unused bits are zero. Together with
// the alphabet check in segments it gives every byte string exactly one
// accepted encoding, so two posts of the same token cannot differ in bytes.
var b64 = base64.RawURLEncoding.Strict()

// decodeSegment decodes a canonical base64url segment: the strict decoder
// refuses every byte outside the alphabet but CR and LF, which it skips,
// so a segment without them that decodes holds the alphabet alone.
func decodeSegment(seg string) ([]byte, bool) {
	if strings.IndexByte(seg, '\r') >= 0 || strings.IndexByte(seg, '\n') >= 0 {
		return nil, false
	}
	b, err := b64.DecodeString(seg)
	return b, err == nil
}

// invalidAlphabet is the index of the first byte of s outside the
// base64url alphabet, or -1.
func invalidAlphabet(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return i
		}
	}
	return -1
}

// segments splits a compact serialization into its three base64url parts,
// refusing any byte outside the base64url alphabet (the decoder would skip
// CR and LF) and any encoding that is not canonical.
func segments(s string) (parts [3]string, decoded [3][]byte, err error) {
	if s == "" {
		return parts, decoded, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(s) > MaxTokenBytes {
		return parts, decoded, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxTokenBytes)
	}
	split := strings.Split(s, ".")
	if len(split) != 3 {
		return parts, decoded, fmt.Errorf("%w: not a compact JWS (want 3 dot-separated parts, got %d)", ErrMalformed, len(split))
	}
	names := [3]string{"header", "payload", "signature"}
	for i, p := range split {
		b, ok := decodeSegment(p)
		if !ok {
			if j := invalidAlphabet(p); j >= 0 {
				return parts, decoded, fmt.Errorf("%w: %w: %s holds %q, outside the base64url alphabet (RFC 7515 §2)", ErrMalformed, ErrNotCanonical, names[i], p[j])
			}
			return parts, decoded, fmt.Errorf("%w: %w: %s is not canonical base64url (RFC 7515 §2, RFC 4648 §3.5)", ErrMalformed, ErrNotCanonical, names[i])
		}
		parts[i], decoded[i] = p, b
	}
	return parts, decoded, nil
}

// ParseCompact decodes a compact JWS without verifying it: three canonical
// base64url segments, a JSON object header with an alg, and a payload. It
// is the structural check that decides between a bad request and a FAIL row.
func ParseCompact(s string) (Compact, error) {
	_, d, err := segments(s)
	if err != nil {
		return Compact{}, err
	}
	return compactOf(d)
}

// compactOf decodes the header of a compact JWS's decoded segments d.
func compactOf(d [3][]byte) (Compact, error) {
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}
	if err := json.Unmarshal(d[0], &h); err != nil || h.Alg == "" {
		return Compact{}, fmt.Errorf("%w: header is not a JSON object with alg", ErrMalformed)
	}
	return Compact{Alg: h.Alg, Kid: h.Kid, Typ: h.Typ, Payload: d[1]}, nil
}

// Token is a compact token as posted, parsed once (ParseToken): what
// ParseCompact returns for it, and what Encodings and Canonical need, so
// that neither parses it again. Its fields are set by ParseToken alone.
type Token struct {
	raw string
	c   Compact // valid when err is nil
	err error   // ParseCompact's error

	signingInput string // header and payload segments with their dot
	sig          []byte // the decoded signature
	es256        bool   // the header's alg is ES256
}

// ParseToken parses s once. The returned Token holds ParseCompact's result
// and error; its Encodings and Canonical are those of s.
func ParseToken(s string) Token {
	t := Token{raw: s}
	parts, d, err := segments(s)
	if err != nil {
		t.err = err
		return t
	}
	t.signingInput = s[:len(parts[0])+1+len(parts[1])]
	t.sig = d[2]
	if c, known := knownCompact(parts[0]); known {
		c.Payload = d[1]
		t.c = c
	} else {
		t.c, t.err = compactOf(d)
	}
	if t.err == nil {
		t.es256 = t.c.Alg == string(jose.ES256)
	} else {
		// A header ParseCompact refuses (a kid that is not a string) may
		// still name ES256: its other encoding is listed all the same.
		var h struct {
			Alg string `json:"alg"`
		}
		t.es256 = json.Unmarshal(d[0], &h) == nil && h.Alg == string(jose.ES256)
	}
	return t
}

// Raw returns the token as posted.
func (t Token) Raw() string { return t.raw }

// Compact returns what ParseCompact returns for the token.
func (t Token) Compact() (Compact, error) { return t.c, t.err }

// p256Order is the order n of the P-256 group.
var p256Order = elliptic.P256().Params().N

// Encodings returns the hex SHA-256 of every compact serialization that
// carries the same signed content as s and verifies exactly when s does:
// s itself first and, for an ES256 token, the one whose signature is
// (r, n−s) instead of (r, s) (ECDSA signatures are malleable: anyone can
// compute the other without the key). RS256 signatures have one encoding.
// Dedupe looks up every one, so a re-encoded token is never new. s must
// have passed ParseCompact.
func Encodings(s string) []string { return ParseToken(s).Encodings() }

// Encodings is Encodings of the token as posted.
func (t Token) Encodings() []string {
	out := []string{hexSHA256(t.raw)}
	if sig, ok := t.otherSignature(false); ok {
		out = append(out, t.sha256With(sig))
	}
	return out
}

// sha256With is the hex SHA-256 of t's encoding with the signature sig,
// hashed as it is written rather than built.
func (t Token) sha256With(sig [64]byte) string {
	var enc [86]byte // 64 bytes in unpadded base64url
	b64.Encode(enc[:], sig[:])
	h := sha256.New()
	h.Write(stringBytes(t.signingInput))
	h.Write(dot)
	h.Write(enc[:])
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return hexSum(sum)
}

// malleated returns the encoding of t with the ES256 signature (r, n−s)
// (otherSignature), and false when there is none.
func (t Token) malleated(lowOnly bool) (string, bool) {
	sig, ok := t.otherSignature(lowOnly)
	if !ok {
		return "", false
	}
	return t.signingInput + "." + b64.EncodeToString(sig[:]), true
}

// otherSignature returns t's ES256 signature (r, n−s) in place of (r, s),
// and false when t did not parse to its segments or its alg is not ES256,
// or when s is not in (0, n). For Encodings (lowOnly false) r must be in
// (0, n) as well; for Canonical (lowOnly true) s must be above n/2, so
// that n−s is the low-s form.
func (t Token) otherSignature(lowOnly bool) (sig [64]byte, ok bool) {
	if t.sig == nil || !t.es256 || len(t.sig) != 64 {
		return sig, false
	}
	r, s := t.sig[:32], t.sig[32:]
	if !inOrder(s) {
		return sig, false
	}
	if lowOnly {
		if bytes.Compare(s, p256HalfOrderBytes) <= 0 {
			return sig, false
		}
	} else if !inOrder(r) {
		return sig, false
	}
	copy(sig[:32], r)
	// n − s, big-endian, with a borrow: s < n, so the result is in (0, n).
	var borrow uint16
	for i := 31; i >= 0; i-- {
		d := uint16(p256OrderBytes[i]) - uint16(s[i]) - borrow
		sig[32+i] = byte(d)
		borrow = d >> 15
	}
	return sig, true
}

// inOrder reports whether the 32 big-endian bytes x are in (0, n).
func inOrder(x []byte) bool {
	return bytes.Compare(x, p256OrderBytes) < 0 && bytes.Count(x, []byte{0}) < len(x)
}

// p256HalfOrder is n/2: an ES256 signature's s is low when s ≤ n/2.
var p256HalfOrder = new(big.Int).Rsh(p256Order, 1)

// CanonicalSHA256 returns the hex SHA-256 of t.Canonical(), taken from
// encodings, which must be t.Encodings() or nil, when they list it: a
// caller that needs both hashes the token once.
func (t Token) CanonicalSHA256(encodings []string) string {
	low, high := t.otherSignature(true)
	switch {
	case !high && len(encodings) > 0:
		return encodings[0]
	case !high:
		return hexSHA256(t.raw)
	case len(encodings) == 2:
		return encodings[1]
	}
	return t.sha256With(low)
}

// n and n/2 as 32 big-endian bytes.
var p256OrderBytes, p256HalfOrderBytes = p256Order.FillBytes(make([]byte, 32)), p256HalfOrder.FillBytes(make([]byte, 32))

// Canonical returns the one encoding of s that Encodings lists and whose
// ES256 signature has s ≤ n/2 (the low-s form), so that every malleated
// copy of a token is stored the same way. Other tokens are returned as they
// are. s must have passed ParseCompact.
func Canonical(s string) string { return ParseToken(s).Canonical() }

// Canonical is Canonical of the token as posted.
func (t Token) Canonical() string {
	if low, ok := t.malleated(true); ok {
		return low
	}
	return t.raw
}

// hexSHA256 is the hex SHA-256 of s.
func hexSHA256(s string) string { return hexSum(sha256.Sum256(stringBytes(s))) }

// hexSum is a SHA-256 digest in lowercase hex.
func hexSum(sum [sha256.Size]byte) string {
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

// dot separates a compact token's segments.
var dot = []byte{'.'}

// stringBytes is s's bytes without a copy, to be read, never written nor
// kept: a token is hashed where it lies instead of being copied first.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// verifyCompact verifies s against the keys in ks and returns the verified
// payload and the kid of the key that verified it.
func verifyCompact(s string, ks *KeySet) (payload []byte, kid string, alg jose.SignatureAlgorithm, err error) {
	return ParseToken(s).verify(ks)
}

// verify is verifyCompact of t. A token whose header go-jose accepted
// before is checked without parsing it again (verifyKnown); any other is
// checked by go-jose, which the header it read is kept from.
func (t Token) verify(ks *KeySet) ([]byte, string, jose.SignatureAlgorithm, error) {
	if payload, kid, alg, handled, err := verifyKnown(t, ks); handled {
		return payload, kid, alg, err
	}
	payload, kid, alg, h, err := verifyGoJose(t.raw, ks)
	if h != nil {
		knownHeaders.remember(t.raw[:strings.IndexByte(t.raw, '.')], *h)
	}
	return payload, kid, alg, err
}

// verifyGoJose is verifyCompact by go-jose alone: its parse with the
// allow-list, then its Verify with each candidate key. h is the header
// go-jose read, nil when it refused the token.
func verifyGoJose(s string, ks *KeySet) (payload []byte, kid string, alg jose.SignatureAlgorithm, h *jose.Header, err error) {
	jws, err := jose.ParseSignedCompact(s, Algorithms)
	if err != nil {
		return nil, "", "", nil, fmt.Errorf("%w: %v", ErrSignature, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, "", "", nil, fmt.Errorf("%w: want exactly one signature", ErrSignature)
	}
	h = &jws.Signatures[0].Header
	alg = jose.SignatureAlgorithm(h.Algorithm)
	cands := ks.candidates(h.KeyID, alg)
	if len(cands) == 0 {
		return nil, h.KeyID, alg, h, unknownKid(h.KeyID, alg, ks)
	}
	for _, k := range cands {
		if p, err := jws.Verify(k.Key); err == nil {
			return p, k.KeyID, alg, h, nil
		}
	}
	return nil, h.KeyID, alg, h, badSignature(h.KeyID, alg)
}

// unknownKid is verifyCompact's error for a kid and alg no key of ks has.
func unknownKid(kid string, alg jose.SignatureAlgorithm, ks *KeySet) error {
	return fmt.Errorf("%w: kid %q (%s) not in JWKS %s", ErrUnknownKid, kid, alg, ks.Snapshot.URI)
}

// badSignature is verifyCompact's error for a signature no candidate key
// verifies.
func badSignature(kid string, alg jose.SignatureAlgorithm) error {
	return fmt.Errorf("%w: %s signature does not verify with kid %q%w", ErrSignature, alg, kid, errNoKeyVerifies)
}

// errNoKeyVerifies marks badSignature's error: a token without a kid
// that no key of its algorithm verifies may be signed by a key published
// since the set was fetched, as a token with an unknown kid may
// (verifySigned).
var errNoKeyVerifies = noKeyVerifies{}

type noKeyVerifies struct{}

func (noKeyVerifies) Error() string { return "" }

// The ledger's time range: every time a writer supplies must lie in
// [MinTime, MaxTime). It keeps times and retention arithmetic (years of
// periods added) inside what the API's RFC 3339 and protobuf Timestamp
// fields represent (years 1 to 9999) and what the time-ordered indexes
// sort (no time before the Unix epoch).
var (
	MinTime = time.Unix(0, 0).UTC()
	MaxTime = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// InRange reports whether t lies in [MinTime, MaxTime).
func InRange(t time.Time) bool { return !t.Before(MinTime) && t.Before(MaxTime) }

// NumericDate is a JWT time (RFC 7519 §2): seconds since the epoch, kept
// with the JSON text it arrived as, so that a value the ledger cannot use
// is quoted exactly as the signer wrote it.
type NumericDate struct {
	raw string
	sec float64
	num bool
}

// NewNumericDate returns the NumericDate of sec seconds since the epoch.
func NewNumericDate(sec float64) NumericDate {
	return NumericDate{raw: strconv.FormatFloat(sec, 'f', -1, 64), sec: sec, num: true}
}

// maxRawClaim bounds the raw text of a time claim kept for messages.
const maxRawClaim = 64

// UnmarshalJSON keeps any JSON value; Check says whether it is a usable
// time. A claim of the wrong type is a failed check, not undecodable claims.
// The text as sent is kept only when a message may quote it: a value that
// is not a number, or a number outside the supported range.
func (d *NumericDate) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9') {
		// A JSON number (the decoder checked its syntax), parsed as
		// encoding/json parses one into a float64.
		if f, err := strconv.ParseFloat(string(b), 64); err == nil {
			*d = NumericDate{sec: f, num: true}
			if !usableSeconds(f) {
				d.raw = truncate(string(b), maxRawClaim)
			}
			return nil
		}
	}
	*d = NumericDate{raw: truncate(string(b), maxRawClaim)}
	var f float64
	if string(b) != "null" && json.Unmarshal(b, &f) == nil {
		d.sec, d.num = f, true
	}
	return nil
}

// usableSeconds reports whether f seconds since the epoch lie in
// [MinTime, MaxTime).
func usableSeconds(f float64) bool {
	return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= float64(MinTime.Unix()) && f < float64(MaxTime.Unix())
}

// MarshalJSON writes the time as it arrived.
func (d NumericDate) MarshalJSON() ([]byte, error) {
	if d.num || d.raw == "" {
		return []byte(strconv.FormatFloat(d.sec, 'f', -1, 64)), nil
	}
	return json.Marshal(d.raw)
}

// Time returns d as a time. Use Check first: a value that is not a number
// or out of range gives a meaningless time.
func (d NumericDate) Time() time.Time {
	sec := int64(d.sec)
	return time.Unix(sec, int64((d.sec-float64(sec))*1e9)).UTC()
}

// Check returns d as a time, or an error quoting the value as sent when it
// is not a number or lies outside [MinTime, MaxTime).
func (d NumericDate) Check(claim string) (time.Time, error) {
	f := d.sec
	if !d.num && (d.raw == "" || !strings.ContainsAny(d.raw[:1], "-0123456789")) {
		return time.Time{}, fmt.Errorf("%s %s is not a number", claim, d.raw)
	}
	if !d.num || !usableSeconds(f) {
		return time.Time{}, fmt.Errorf("%s %s is outside the supported time range %s to %s", claim, d.raw,
			MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return d.Time(), nil
}

// RequestClaims are the personal-agent JWT claims of PACT §3.2.
type RequestClaims struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Iat *NumericDate    `json:"iat"`
	Exp *NumericDate    `json:"exp"`
	Nbf *NumericDate    `json:"nbf,omitempty"`
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
	Nbf      *NumericDate    `json:"nbf,omitempty"`
}

// Scopes returns the space-separated scope as a list.
func (c TokenClaims) Scopes() []string { return strings.Fields(c.Scope) }

// Audience returns the one audience aud names, as a string or a list of
// one (PACT §5.4: one Brand per token); false when it names none or more.
func (c TokenClaims) Audience() (string, bool) {
	aud, ok := audience(c.Aud, true)
	if !ok || len(aud) != 1 || aud[0] == "" {
		return "", false
	}
	return aud[0], true
}

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
	return receiptOf(c)
}

// receiptOf decodes the receipt claims of c, a parsed receipt JWS.
func receiptOf(c Compact) (Receipt, Compact, error) {
	var r Receipt
	if err := json.Unmarshal(c.Payload, &r); err != nil {
		return Receipt{}, c, fmt.Errorf("%w: receipt claims are not a JSON object of the PACT §5.6 shape", ErrMalformed)
	}
	t, err := time.Parse(time.RFC3339Nano, r.TS)
	if err != nil {
		return Receipt{}, c, fmt.Errorf("%w: receipt ts %q is not RFC 3339", ErrMalformed, truncate(r.TS, 64))
	}
	if t = t.UTC(); !InRange(t) {
		return Receipt{}, c, fmt.Errorf("%w: receipt ts %q is outside the supported time range %s to %s", ErrMalformed, r.TS,
			MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	r.Time = t
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

// truncate shortens s for an error message to at most n bytes and "…",
// cut between characters, with each run of bytes that are not UTF-8
// replaced by U+FFFD: a message may become a row's check detail, and a row's
// answer carries it as a protobuf string, which must be UTF-8.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
