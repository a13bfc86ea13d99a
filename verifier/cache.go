package verifier

import (
	"container/list"
	"crypto/sha256"
	"slices"
	"sync"

	"github.com/go-jose/go-jose/v4"
)

// maxCachedToken is the longest token whose verified signature is kept.
// Delegation tokens are under 1 KiB; the cap keeps a full cache under
// about CacheSize × 4 KiB (the token's decoded claims).
const maxCachedToken = 4 << 10

// sigCache remembers the delegation tokens whose signature check passed:
// verifying a compact token against a key set is a pure function of the
// token's bytes, the key set's exact bytes and the algorithm allow-list,
// so an entry is looked up by the SHA-256 of the token's bytes and taken
// only for the key set and allow-list it was checked with. The entry also
// keeps the claims the token's payload decoded to, a pure function of the
// same bytes, so a token sent again with every turn of a session is
// neither checked nor decoded again. Only that is kept: times, issuer,
// bindings, scopes and revocation are checked on every use. Failed checks
// are not kept (an unknown kid must be able to trigger a refetch, and a
// flood of bad tokens must not evict good ones).
//
// It is a least-recently-used list bounded by entry count, with one entry
// a token: a token checked against a new key set replaces its entry.
type sigCache struct {
	size    int
	metrics *CacheMetrics
	algs    []jose.SignatureAlgorithm // Algorithms when the cache was made

	mu      sync.Mutex // guards order and entries
	order   *list.List // of *sigEntry, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

// sigEntry is one delegation token, found by key (tokenKey), whose
// signature check passed against the key set whose digest is keys. claims
// is shared by every hit and must not be modified.
type sigEntry struct {
	key    [sha256.Size]byte
	keys   [sha256.Size]byte
	kid    string
	alg    jose.SignatureAlgorithm
	claims TokenClaims
}

// newSigCache returns a cache of at most size entries, or nil (no cache)
// when size is not positive.
func newSigCache(size int, m *CacheMetrics) *sigCache {
	if size <= 0 {
		return nil
	}
	return &sigCache{size: size, metrics: m, algs: slices.Clone(Algorithms), order: list.New(), entries: make(map[[sha256.Size]byte]*list.Element)}
}

// cacheable reports whether a check against ks may be taken from or kept
// in the cache: not for a key set not built by ParseKeySet (its bytes are
// unknown) or an allow-list that changed since the cache was made. (A
// token longer than maxCachedToken gets no key: newTokenCheck.)
func (c *sigCache) cacheable(ks *KeySet) bool {
	return ks != nil && ks.digested && slices.Equal(c.algs, Algorithms)
}

// tokenKey is what a token's entry is found by: the SHA-256 of its bytes.
func tokenKey(tok string) [sha256.Size]byte { return sha256.Sum256(stringBytes(tok)) }

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

// put adds e, replacing the entry of the same token and evicting the least
// recently used entries beyond the size.
func (c *sigCache) put(e *sigEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		// Checked against another key set, or by another caller meanwhile.
		el.Value = e
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

// tokenCheck is one delegation token's signature check through the cache.
// key is the token's key when keyed (the cache may keep it); cached is its
// entry when it had one. After the check, hit is the entry taken instead
// of checking, or fresh the check that passed afresh, to be kept (with its
// claims) once its claims decode.
type tokenCheck struct {
	c      *sigCache
	key    [sha256.Size]byte
	keyed  bool
	cached *sigEntry
	hit    *sigEntry
	fresh  *sigEntry
}

// newTokenCheck prepares the check of tok through c (nil: no cache).
func newTokenCheck(c *sigCache, tok string) tokenCheck {
	t := tokenCheck{c: c}
	if c == nil || tok == "" || len(tok) > maxCachedToken {
		return t
	}
	t.key, t.keyed = tokenKey(tok), true
	t.cached = c.get(t.key)
	return t
}

// check is a signatureCheck of the token newTokenCheck was given. A hit
// returns no payload: the caller takes the entry's claims instead.
func (t *tokenCheck) check(tok string, ks *KeySet) ([]byte, string, jose.SignatureAlgorithm, error) {
	t.hit, t.fresh = nil, nil
	if !t.keyed || !t.c.cacheable(ks) {
		return verifyCompact(tok, ks)
	}
	if e := t.cached; e != nil && e.keys == ks.digest {
		t.c.metrics.hit()
		t.hit = e
		return nil, e.kid, e.alg, nil
	}
	t.c.metrics.miss()
	payload, kid, alg, err := verifyCompact(tok, ks)
	if err == nil {
		t.fresh = &sigEntry{key: t.key, keys: ks.digest, kid: kid, alg: alg}
	}
	return payload, kid, alg, err
}

// keep puts the check that passed afresh in the cache with claims, the
// claims its payload decoded to.
func (t *tokenCheck) keep(claims TokenClaims) {
	if t.fresh != nil {
		t.fresh.claims = claims
		t.c.put(t.fresh)
	}
}
