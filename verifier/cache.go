package verifier

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/go-jose/go-jose/v4"
)

// maxCachedToken is the longest token whose verified signature is kept.
// Delegation tokens are under 1 KiB; the cap keeps a full cache under
// about CacheSize × 4 KiB of payloads.
const maxCachedToken = 4 << 10

// cacheDomain separates signature-cache keys from any other SHA-256 the
// ledger computes over the same bytes.
const cacheDomain = "pactledger verified signature v1\x00"

// sigCache remembers signature checks that passed: verifying a compact
// token against a key set is a pure function of the token's bytes, the key
// set's exact bytes and the algorithm allow-list, so a result is looked up
// by the SHA-256 of all three. Only the signature check is kept: claims,
// times, issuer, bindings, scopes and revocation are checked on every use.
// Failed checks are not kept (an unknown kid must be able to trigger a
// refetch, and a flood of bad tokens must not evict good ones).
//
// It is a least-recently-used list bounded by entry count.
type sigCache struct {
	size    int
	metrics *CacheMetrics

	mu      sync.Mutex // guards order and entries
	order   *list.List // of *sigEntry, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

// sigEntry is one signature check that passed. payload is shared by every
// hit and must not be modified.
type sigEntry struct {
	key     [sha256.Size]byte
	payload []byte
	kid     string
	alg     jose.SignatureAlgorithm
}

// newSigCache returns a cache of at most size entries, or nil (no cache)
// when size is not positive.
func newSigCache(size int, m *CacheMetrics) *sigCache {
	if size <= 0 {
		return nil
	}
	return &sigCache{size: size, metrics: m, order: list.New(), entries: make(map[[sha256.Size]byte]*list.Element)}
}

// signatureKey returns the key of verifying tok against ks, and false when the
// check must not be cached: a key set not built by ParseKeySet (its bytes
// are unknown) or a token longer than maxCachedToken.
func signatureKey(tok string, ks *KeySet) ([sha256.Size]byte, bool) {
	var key [sha256.Size]byte
	if ks == nil || !ks.digested || len(tok) > maxCachedToken {
		return key, false
	}
	h := sha256.New()
	h.Write([]byte(cacheDomain))
	writeField(h, []byte(tok))
	h.Write(ks.digest[:])
	for _, a := range Algorithms {
		writeField(h, []byte(a))
	}
	h.Sum(key[:0])
	return key, true
}

// writeField writes b with its length first, so that no two sequences of
// fields hash the same.
func writeField(h interface{ Write([]byte) (int, error) }, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// verify is verifyCompact through the cache: a hit returns the payload, kid
// and algorithm the check returned when it passed.
func (c *sigCache) verify(tok string, ks *KeySet) ([]byte, string, jose.SignatureAlgorithm, error) {
	key, ok := signatureKey(tok, ks)
	if !ok {
		return verifyCompact(tok, ks)
	}
	if e := c.get(key); e != nil {
		c.metrics.hit()
		return e.payload, e.kid, e.alg, nil
	}
	c.metrics.miss()
	payload, kid, alg, err := verifyCompact(tok, ks)
	if err == nil {
		c.put(&sigEntry{key: key, payload: payload, kid: kid, alg: alg})
	}
	return payload, kid, alg, err
}

// get returns the entry of key, marking it most recently used, or nil.
func (c *sigCache) get(key [sha256.Size]byte) *sigEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*sigEntry)
}

// put adds e, evicting the least recently used entries beyond the size.
func (c *sigCache) put(e *sigEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		// Another caller verified the same token meanwhile.
		c.order.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.order.PushFront(e)
	evicted := 0
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*sigEntry).key)
		evicted++
	}
	c.metrics.stored(c.order.Len(), evicted)
}
