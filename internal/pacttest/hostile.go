package pacttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
)

// This file holds what a hostile writer does to compact tokens without the
// signer's key (re-encode segments, malleate an ECDSA signature) and what it
// does with keys of its own (sign any header and claims, with any
// algorithm), for the ledger's hostile-writer tests.

// Encode is base64url without padding, the one encoding RFC 7515 §2 allows
// for a compact JWS segment.
func Encode(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Segments splits a compact JWS into its dot-separated segments.
func Segments(jws string) []string { return strings.Split(jws, ".") }

// Join joins segments into a compact JWS.
func Join(segs []string) string { return strings.Join(segs, ".") }

// ReplaceSegment returns jws with segment i (0 header, 1 payload,
// 2 signature) transformed by f; ok is false when f reports it cannot apply.
func ReplaceSegment(jws string, i int, f func(string) (string, bool)) (string, bool) {
	segs := Segments(jws)
	if i >= len(segs) {
		return jws, false
	}
	s, ok := f(segs[i])
	if !ok {
		return jws, false
	}
	segs[i] = s
	return Join(segs), true
}

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// NonCanonicalTail returns seg with the unused low bits of its last
// character set: lenient decoders read it as the same bytes (RFC 4648 §3.5).
// ok is false when the segment's length leaves no unused bits.
func NonCanonicalTail(seg string) (string, bool) {
	var unused uint
	switch len(seg) % 4 {
	case 2:
		unused = 4
	case 3:
		unused = 2
	default:
		return seg, false
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	if last < 0 {
		return seg, false
	}
	v := last | (1<<unused - 1)
	if v == last {
		v = last ^ 1
	}
	return seg[:len(seg)-1] + string(alphabet[v]), true
}

// Padded returns seg with the '=' padding of standard base64. ok is false
// when the segment's length needs none.
func Padded(seg string) (string, bool) {
	n := (4 - len(seg)%4) % 4
	if n == 0 {
		return seg, false
	}
	return seg + strings.Repeat("=", n), true
}

// StdAlphabet returns seg with '-' and '_' written as '+' and '/' (the
// standard alphabet). ok is false when seg holds neither.
func StdAlphabet(seg string) (string, bool) {
	if !strings.ContainsAny(seg, "-_") {
		return seg, false
	}
	return strings.NewReplacer("-", "+", "_", "/").Replace(seg), true
}

// Insert returns a transformation putting s in the middle of a segment
// (whitespace or line breaks, which some decoders skip).
func Insert(s string) func(string) (string, bool) {
	return func(seg string) (string, bool) {
		if len(seg) < 2 {
			return seg, false
		}
		m := len(seg) / 2
		return seg[:m] + s + seg[m:], true
	}
}

// MalleateES256 returns jws with its ES256 signature (r, s) replaced by
// (r, n−s), n the order of P-256: a different signature that verifies for
// the same header and payload without the signer's key.
func MalleateES256(jws string) string {
	segs := Segments(jws)
	sig, err := base64.RawURLEncoding.DecodeString(segs[2])
	if err != nil || len(sig) != 64 {
		panic(fmt.Sprintf("pacttest: not an ES256 signature: %q", segs[2]))
	}
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(elliptic.P256().Params().N, s)
	out := make([]byte, 64)
	copy(out, sig[:32])
	s.FillBytes(out[32:])
	segs[2] = Encode(out)
	return Join(segs)
}

// TamperSignature returns jws with one byte of its signature changed.
func TamperSignature(jws string) string {
	segs := Segments(jws)
	sig, err := base64.RawURLEncoding.DecodeString(segs[2])
	if err != nil || len(sig) == 0 {
		panic(fmt.Sprintf("pacttest: no signature to tamper with: %q", segs[2]))
	}
	sig[len(sig)/2] ^= 0x01
	segs[2] = Encode(sig)
	return Join(segs)
}

// Header decodes the header of a compact JWS.
func Header(jws string) map[string]any {
	b, err := base64.RawURLEncoding.DecodeString(Segments(jws)[0])
	if err != nil {
		panic(err)
	}
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		panic(err)
	}
	return h
}

// SignFunc signs a JWS signing input and returns the raw signature.
type SignFunc func(input []byte) []byte

// SignWith returns the compact JWS of header and claims (each marshalled to
// JSON as given; use json.Number for a number written verbatim) signed by
// sign. The header is not checked: it may name any alg and kid.
func SignWith(header map[string]any, claims any, sign SignFunc) string {
	h, err := json.Marshal(header)
	if err != nil {
		panic(err)
	}
	p, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	input := Encode(h) + "." + Encode(p)
	return input + "." + Encode(sign([]byte(input)))
}

// Unsigned is an empty signature, as alg "none" has.
func Unsigned([]byte) []byte { return nil }

// Signer signs with k's private key and k's own algorithm, whatever a
// header says.
func (k *Key) Signer() SignFunc {
	return func(input []byte) []byte {
		sum := sha256.Sum256(input)
		switch priv := k.private.(type) {
		case *ecdsa.PrivateKey:
			r, s, err := ecdsa.Sign(rand.Reader, priv, sum[:])
			if err != nil {
				panic(err)
			}
			out := make([]byte, 64)
			r.FillBytes(out[:32])
			s.FillBytes(out[32:])
			return out
		case *rsa.PrivateKey:
			out, err := rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, sum[:])
			if err != nil {
				panic(err)
			}
			return out
		}
		panic("pacttest: unknown key type")
	}
}

// SignHeader signs claims with k under exactly header.
func (k *Key) SignHeader(header map[string]any, claims any) string {
	return SignWith(header, claims, k.Signer())
}

// HeaderOf is the header k's Sign writes: alg, kid and typ JWT.
func (k *Key) HeaderOf() map[string]any {
	return map[string]any{"alg": string(k.Alg), "kid": k.Kid, "typ": "JWT"}
}

// HS256 signs with HMAC-SHA256 keyed by secret: with a public key's bytes
// as the secret, the classic algorithm-confusion attempt.
func HS256(secret []byte) SignFunc {
	return func(input []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(input)
		return m.Sum(nil)
	}
}

// ES384 signs with a fresh P-384 key (an algorithm off the allow-list).
func ES384() SignFunc {
	priv, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return func(input []byte) []byte {
		sum := sha512.Sum384(input)
		r, s, err := ecdsa.Sign(rand.Reader, priv, sum[:])
		if err != nil {
			panic(err)
		}
		out := make([]byte, 96)
		r.FillBytes(out[:48])
		s.FillBytes(out[48:])
		return out
	}
}

// PublicPEM is k's public key as a PEM "PUBLIC KEY" block (PKIX).
func (k *Key) PublicPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.PublicKey())
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// PublicJWK is k's public JWK as JSON.
func (k *Key) PublicJWK() []byte {
	b, err := json.Marshal(k.Public())
	if err != nil {
		panic(err)
	}
	return b
}

// PublicJWKMap is k's public JWK as a JSON object value, for an embedded
// "jwk" header.
func (k *Key) PublicJWKMap() map[string]any {
	var m map[string]any
	if err := json.Unmarshal(k.PublicJWK(), &m); err != nil {
		panic(err)
	}
	return m
}
