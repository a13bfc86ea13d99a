package verifier

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"sync"

	"github.com/go-jose/go-jose/v4"
)

// A signer puts the same protected header on every token it signs (the same
// alg, kid and typ), so the ledger sees a handful of distinct headers
// across millions of tokens. go-jose parses a token's header afresh on
// every check (decoding its base64, its JSON, every field it knows), which
// was about half of a row's verification besides the P-256 arithmetic.
// Whether go-jose accepts a compact token's header, and the alg and kid it
// reads from it, depend on the header's bytes alone, so they are kept here
// once go-jose has parsed a token with that header: a later ES256 token
// with the same header segment is verified as go-jose would verify it (the
// same signing input, hash, signature size and curve checks, and
// ecdsa.Verify's verdict, through the key's table once it has one:
// keytables.go), without parsing the header again.
//
// Only plain headers are kept: alg, kid and typ and nothing else. A header
// with any other member (crit, b64, jwk, x5c, nonce…) can change what is
// signed or what is refused, and is always left to go-jose. So is a token
// whose segments are not canonical base64url: go-jose's decoder accepts
// more than the strict one, and its verdict stands for those.

// maxKnownHeaders bounds the headers kept. A writer posting tokens with
// ever new headers only makes the memo start again: its tokens, and
// everyone else's, are then checked by go-jose alone until seen twice.
const maxKnownHeaders = 1024

// maxKnownHeaderBytes is the longest header segment kept.
const maxKnownHeaderBytes = 512

// plainHeaderMembers are the members a header may have and be kept.
var plainHeaderMembers = []string{"alg", "kid", "typ"}

// knownHeader is a header go-jose accepted. A plain one holds what go-jose
// read from it and what compactOf reads from it (its Payload unset); one
// that is not plain is kept only so that it is not examined again.
type knownHeader struct {
	plain   bool
	alg     jose.SignatureAlgorithm
	kid     string
	compact Compact
}

// headerMemo is the set of headers go-jose accepted, by segment.
type headerMemo struct {
	mu      sync.RWMutex
	headers map[string]knownHeader
}

var knownHeaders = &headerMemo{headers: make(map[string]knownHeader)}

// get returns the plain header kept for segment seg.
func (m *headerMemo) get(seg string) (knownHeader, bool) {
	h, ok := m.lookup(seg)
	return h, ok && h.plain
}

func (m *headerMemo) lookup(seg string) (knownHeader, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.headers[seg]
	return h, ok
}

// remember keeps header segment seg of a token go-jose parsed (whatever
// the signature's verdict), with what go-jose read from it, h.
func (m *headerMemo) remember(seg string, h jose.Header) {
	if _, ok := m.lookup(seg); ok || len(seg) > maxKnownHeaderBytes {
		return
	}
	c, plain := plainHeader(seg)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.headers) >= maxKnownHeaders {
		clear(m.headers)
	}
	m.headers[strings.Clone(seg)] = knownHeader{plain: plain, alg: jose.SignatureAlgorithm(h.Algorithm), kid: h.KeyID, compact: c}
}

// plainHeader reports whether header segment seg is canonical base64url of
// a JSON object whose members are all plainHeaderMembers, each a string,
// and returns what compactOf reads from it.
func plainHeader(seg string) (Compact, bool) {
	raw, ok := decodeSegment(seg)
	if !ok {
		return Compact{}, false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return Compact{}, false
	}
	for name, v := range members {
		var s string
		if !slices.Contains(plainHeaderMembers, name) || json.Unmarshal(v, &s) != nil {
			return Compact{}, false
		}
	}
	c, err := compactOf([3][]byte{raw})
	return c, err == nil
}

// knownCompact is what compactOf reads from header segment seg, when seg
// is a known header.
func knownCompact(seg string) (Compact, bool) {
	h, ok := knownHeaders.get(seg)
	return h.compact, ok
}

// verifyKnown verifies t as verifyCompact does when t parsed and is an
// ES256 token whose header go-jose accepted before (knownHeaders), from the
// segments ParseToken decoded; handled is false, and nothing was checked,
// otherwise.
func verifyKnown(t Token, ks *KeySet) (payload []byte, kid string, alg jose.SignatureAlgorithm, handled bool, err error) {
	if t.err != nil {
		return nil, "", "", false, nil
	}
	h, known := knownHeaders.get(t.signingInput[:strings.IndexByte(t.signingInput, '.')])
	if !known || h.alg != jose.ES256 || !slices.Contains(Algorithms, h.alg) {
		return nil, "", "", false, nil
	}
	cands := ks.candidates(h.kid, h.alg)
	if len(cands) == 0 {
		return nil, h.kid, h.alg, true, unknownKid(h.kid, h.alg, ks)
	}
	digest := sha256.Sum256([]byte(t.signingInput))
	for _, k := range cands {
		if verifyES256(k.Key, digest[:], t.sig) {
			return t.c.Payload, k.KeyID, h.alg, true, nil
		}
	}
	return nil, h.kid, h.alg, true, badSignature(h.kid, h.alg)
}

// check is verifyCompact as a signatureCheck of t's own bytes (s is
// t.Raw()), without parsing t again.
func (t Token) check(s string, ks *KeySet) ([]byte, string, jose.SignatureAlgorithm, error) {
	if s != t.raw {
		return verifyCompact(s, ks)
	}
	return t.verify(ks)
}

// verifyES256 is go-jose's check of an ES256 signature sig over digest with
// key: a P-256 public key, a signature of 64 bytes, r and s big-endian,
// checked as ecdsa.Verify checks them (through the key's table once it
// has signed often: keytables.go).
func verifyES256(key any, digest, sig []byte) bool {
	pub, ok := key.(*ecdsa.PublicKey)
	if !ok || pub == nil || pub.Curve != elliptic.P256() || len(sig) != 64 {
		return false
	}
	rs := sigInts.Get().(*[2]big.Int)
	defer sigInts.Put(rs)
	return verifyP256(pub, digest, rs[0].SetBytes(sig[:32]), rs[1].SetBytes(sig[32:]))
}

// sigInts holds the r and s of a check, kept from one check to the next
// (nothing a check calls keeps them).
var sigInts = sync.Pool{New: func() any { return new([2]big.Int) }}
