package verifier

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// MaxJWKSBytes caps a fetched JWKS or authorization-server metadata document.
const MaxJWKSBytes = 64 << 10

// Each key a token is tried against is a signature check, which anyone
// who can post a token would make the ledger run, and anyone can publish
// a set (an open agent's issuer is whatever a caller names): MaxJWKSBytes
// lets a set hold a few hundred keys, all under one kid if its publisher
// likes. So a token is tried against at most maxKidCandidates keys of its
// algorithm under its kid (a kid names one key: more than one under it is
// a key being replaced), and a token without a kid against the first
// maxKidlessCandidates keys of its algorithm. The keys of other types do
// not count: a set of many RSA keys and a few P-256 ones still has every
// P-256 key tried for an ES256 token without a kid, up to the bound.
const (
	maxKidCandidates     = 4
	maxKidlessCandidates = 16
)

// An RSA key is usable with a modulus of minRSABits to maxRSABits bits and
// an odd public exponent of at most maxRSAExponent (65537, the one every
// signer uses): a larger exponent makes each check slower, for nothing.
const (
	minRSABits     = 2048
	maxRSABits     = 4096
	maxRSAExponent = 65537
)

// Snapshot is the exact bytes of one JWKS as fetched. Its ID is the hex
// SHA-256 of Body, so equal bodies share one snapshot.
type Snapshot struct {
	ID        string
	URI       string
	FetchedAt time.Time
	Body      []byte
}

// NewSnapshot returns the snapshot of body fetched from uri at t.
func NewSnapshot(uri string, t time.Time, body []byte) Snapshot {
	sum := sha256.Sum256(body)
	return Snapshot{ID: hex.EncodeToString(sum[:]), URI: uri, FetchedAt: t.UTC(), Body: body}
}

// KeySet is a parsed JWKS with the snapshot it came from (without its
// bytes, and with its first few usable keys only, for an open agent's
// set: Fetcher.forCallers). Only EC P-256 and
// RSA (2048 to 4096 bits, an odd public exponent of at most 65537) public
// keys for signatures are kept: a key
// published with its private part (anyone can sign with it), or whose
// key_ops leave out "verify" (RFC 7517 §4.3), is skipped.
type KeySet struct {
	Snapshot Snapshot
	keys     []jose.JSONWebKey
	// Skipped counts entries that were not usable keys.
	Skipped int
	// digest is the SHA-256 of the bytes keys were parsed from (not the
	// snapshot's ID, which a caller may have set); digested says it is set.
	digest   [sha256.Size]byte
	digested bool
}

// ParseKeySet parses a snapshot's bytes. It fails only when the body is not a
// JSON object with a "keys" array; odd or unsupported entries are skipped.
func ParseKeySet(s Snapshot) (*KeySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(s.Body, &doc); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object with a keys array", ErrBadJWKS)
	}
	if doc.Keys == nil {
		return nil, fmt.Errorf("%w: no keys array", ErrBadJWKS)
	}
	ks := &KeySet{Snapshot: s, digest: sha256.Sum256(s.Body), digested: true}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !usableKey(k) || !k.IsPublic() || !verifies(raw) {
			ks.Skipped++
			continue
		}
		ks.keys = append(ks.keys, k.Public())
	}
	return ks, nil
}

// verifies reports whether a JWK's key_ops, when it has them, allow
// verifying signatures.
func verifies(raw json.RawMessage) bool {
	var ops struct {
		KeyOps *[]string `json:"key_ops"`
	}
	if json.Unmarshal(raw, &ops) != nil {
		return false
	}
	return ops.KeyOps == nil || slices.Contains(*ops.KeyOps, "verify")
}

func usableKey(k jose.JSONWebKey) bool {
	if k.Use != "" && k.Use != "sig" {
		return false
	}
	switch pub := k.Public().Key.(type) {
	case *ecdsa.PublicKey:
		return pub.Curve == elliptic.P256()
	case *rsa.PublicKey:
		bits := pub.N.BitLen()
		return bits >= minRSABits && bits <= maxRSABits && pub.E >= 3 && pub.E <= maxRSAExponent && pub.E%2 == 1
	}
	return false
}

// hasKid reports whether the set holds a usable key under kid, of any
// algorithm.
func (ks *KeySet) hasKid(kid string) bool {
	for _, k := range ks.keys {
		if k.KeyID == kid {
			return true
		}
	}
	return false
}

// candidates returns the keys a token signed with alg and kid may verify
// against: the first maxKidCandidates keys with that kid whose type fits
// alg (the first maxKidlessCandidates of the set whose type fits alg when
// kid is empty).
func (ks *KeySet) candidates(kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range ks.keys {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != string(alg) {
			continue
		}
		switch k.Key.(type) {
		case *ecdsa.PublicKey:
			if alg == jose.ES256 {
				out = append(out, k)
			}
		case *rsa.PublicKey:
			if alg == jose.RS256 {
				out = append(out, k)
			}
		}
		if (kid == "" && len(out) == maxKidlessCandidates) || (kid != "" && len(out) == maxKidCandidates) {
			break
		}
	}
	return out
}

// FetcherConfig tunes a Fetcher. The zero value is the documented default.
type FetcherConfig struct {
	// AllowInsecureLoopback permits plain http to loopback hosts (tests only).
	AllowInsecureLoopback bool
	// Timeout bounds one fetch; default 5 s.
	Timeout time.Duration
	// TTL is how long a fetched document is served without asking its
	// endpoint again; default 5 min. After it, the document is still served
	// while one refetch runs in the background (stale-while-revalidate).
	TTL time.Duration
	// MaxStale is how long after its last successful fetch a document keeps
	// being served while refetches fail; default 1 h. Past it, callers wait
	// for a fetch and get an error wrapping ErrFetch if it fails. A value
	// below TTL means TTL.
	MaxStale time.Duration
	// MinRefetch is the least time between two fetches of one URI after a
	// failed fetch, and between two refetches on an unknown kid; default 10 s.
	MinRefetch time.Duration
	// UnknownKidWait bounds how long Refresh waits for its refetch; default
	// 1 s. The refetch itself goes on (bounded by Timeout) for later callers.
	UnknownKidWait time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// OnFetch, when set, is told the result of each fetch: "ok", "error"
	// (network, timeout, non-200, too large) or "rejected" (fetched but not
	// a usable document: not JSON, or a JWKS without one usable key). It is
	// called from the goroutine that fetched, once the cache holds the
	// outcome, and must not block.
	OnFetch func(result string)
	// OnStale, when set, is called each time a document older than TTL is
	// served (its refetch running or failing), with the document's age since
	// its last successful fetch. It must not block.
	OnStale func(age time.Duration)
}

// Fetch results passed to FetcherConfig.OnFetch.
const (
	FetchOK       = "ok"
	FetchError    = "error"
	FetchRejected = "rejected"
)

// Fetcher fetches JWKS and RFC 8414 metadata from configured URIs, with a
// size cap, a timeout, a cache and a rate-limited refetch.
//
// No lock is held across I/O. Each URI has at most one fetch in flight; it
// runs in its own goroutine with a context detached from the caller that
// started it, bounded by Timeout, and every caller that needs it waits on
// it (bounded by its own ctx). A document past TTL is served at once while
// its refetch runs; a fetched document that is not usable (for a JWKS: no
// ES256 or RS256 verification key) is rejected and the one cached kept.
//
// Errors wrapping ErrFetch mean the keys could not be obtained for a reason
// that may pass (see Keys and Refresh); callers should answer "retry", not
// decide.
type Fetcher struct {
	cfg    FetcherConfig
	client *http.Client

	mu    sync.Mutex // guards cache and every cacheEntry; never held across I/O
	cache map[cacheKey]*cacheEntry
	// maxDocs, when not 0, bounds the cache: a new entry evicts one
	// without a fetch in flight. fetches, when not nil, bounds the
	// fetches in flight: one over it fails at once (ErrFetch). Both are
	// set for addresses callers name (forCallers).
	maxDocs int
	fetches chan struct{}
	// hostFetches, when not nil, counts the fetches in flight by host
	// and port (fetchHost); one over maxHostFetches to a host fails at
	// once. f.mu guards it.
	hostFetches map[string]int
	// maxKeys, when not 0, is how many usable keys a fetched set keeps
	// (its first ones); such a set keeps its snapshot's ID, URI and time
	// but not its bytes (Snapshot.Body nil). Set for addresses callers
	// name (forCallers).
	maxKeys int
	// callerLoopback lets a fetcher for callers' addresses reach
	// loopback (tests only: callerFetcher).
	callerLoopback bool
}

type docKind int

const (
	kindKeys docKind = iota
	kindMeta
)

type cacheKey struct {
	kind docKind
	uri  string
}

// cacheEntry is one URI's cached document and fetch state, guarded by
// Fetcher.mu.
type cacheEntry struct {
	key       cacheKey
	doc       any       // *KeySet or *metadata, the last one accepted; nil before
	fetched   time.Time // when doc was last fetched and accepted
	lastErr   error     // the latest fetch's error; nil after a success
	lastErrAt time.Time
	flight    *flight // the fetch in progress, nil when none
	// refresh is the latest unknown-kid refetch (running or finished),
	// started (or joined) at refreshAt.
	refresh   *flight
	refreshAt time.Time
}

// flight is one fetch in progress. doc and err are written before done is
// closed and read only after.
type flight struct {
	done chan struct{}
	doc  any
	err  error
}

type metadata struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// NewFetcher returns a Fetcher with cfg's settings.
func NewFetcher(cfg FetcherConfig) *Fetcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Minute
	}
	if cfg.MaxStale <= 0 {
		cfg.MaxStale = time.Hour
	}
	cfg.MaxStale = max(cfg.MaxStale, cfg.TTL)
	if cfg.MinRefetch <= 0 {
		cfg.MinRefetch = 10 * time.Second
	}
	if cfg.UnknownKidWait <= 0 {
		cfg.UnknownKidWait = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: cfg.Timeout}).DialContext,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   4,
	}
	return &Fetcher{
		cfg: cfg,
		client: &http.Client{
			Timeout:   cfg.Timeout,
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("redirects are not followed")
			},
		},
		cache: make(map[cacheKey]*cacheEntry),
	}
}

// entry returns the cache entry of k, creating it. f.mu must be held.
func (f *Fetcher) entry(k cacheKey) *cacheEntry {
	e := f.cache[k]
	if e == nil {
		if f.maxDocs > 0 && len(f.cache) >= f.maxDocs {
			f.evictOne()
		}
		e = &cacheEntry{key: k}
		f.cache[k] = e
	}
	return e
}

// evictOne removes an entry without a fetch in flight, any one: the map's
// order is random. f.mu must be held.
func (f *Fetcher) evictOne() {
	for k, e := range f.cache {
		if e.flight == nil {
			delete(f.cache, k)
			return
		}
	}
}

// Keys returns the JWKS at uri:
//   - within TTL of its last successful fetch, the cached set;
//   - past TTL and within MaxStale, the cached set at once, while one
//     refetch runs in the background (none while the last fetch failed less
//     than MinRefetch ago);
//   - otherwise (no set yet, or older than MaxStale) it waits for the fetch,
//     bounded by ctx and Timeout.
//
// The error wraps ErrFetch whenever no set could be obtained: network
// error, timeout, non-200, a body that is not a usable JWKS (also wrapping
// ErrBadJWKS), a fetch that failed less than MinRefetch ago, or ctx done.
func (f *Fetcher) Keys(ctx context.Context, uri string) (*KeySet, error) {
	doc, err := f.load(ctx, cacheKey{kindKeys, uri})
	if err != nil {
		return nil, err
	}
	return doc.(*KeySet), nil
}

// Refresh refetches the JWKS at uri after an unknown kid and, once the
// refetch succeeded, returns the newest cached set. It waits for the refetch at most UnknownKidWait (and ctx);
// when that passes first, the error wraps ErrFetch and the refetch goes on
// for later callers. A fetch already in flight is joined rather than
// doubled.
//
// Only a refetch that started for this call decides that a kid is
// unknown: one that started earlier may have been answered before the
// signer published the key. Refetches are rate-limited to one per
// MinRefetch per URI, and anyone who can present a token with a made-up
// kid can start one. So when this call joins a fetch already running, or
// comes within MinRefetch of the latest refetch, it returns the newest
// cached set together with an error wrapping ErrFetch (errEarlierRefetch):
// a kid that set holds may be used, a kid it lacks is undecided. The
// latest refetch's failure, or one still running past UnknownKidWait, is
// an error wrapping ErrFetch with no set, even while a cached set exists.
// Outside the window, an endpoint whose latest fetch failed less than
// MinRefetch ago is not asked again: the error wraps ErrFetch.
func (f *Fetcher) Refresh(ctx context.Context, uri string) (*KeySet, error) {
	doc, err := f.refetch(ctx, cacheKey{kindKeys, uri})
	ks, _ := doc.(*KeySet)
	return ks, err
}

// RefreshMetadata refetches the RFC 8414 metadata at uri after an unknown
// kid, as Refresh refetches keys, and returns its issuer and jwks_uri: a
// brand that moved its keys to a new jwks_uri names it there, and a kid
// the keys at the old address lack is decided unknown only when the
// metadata too was refetched for this call. When it was not (a refetch
// already running or within MinRefetch), the newest cached metadata comes
// with an error wrapping ErrFetch; when none could be obtained, the error
// alone.
func (f *Fetcher) RefreshMetadata(ctx context.Context, uri string) (issuer, jwksURI string, err error) {
	doc, err := f.refetch(ctx, cacheKey{kindMeta, uri})
	if m, ok := doc.(*metadata); ok {
		return m.Issuer, m.JWKSURI, err
	}
	return "", "", err
}

// refetch is Refresh of the document k.
func (f *Fetcher) refetch(ctx context.Context, k cacheKey) (any, error) {
	uri := k.uri
	if err := f.CheckURI(uri); err != nil {
		return nil, err
	}
	f.mu.Lock()
	e := f.entry(k)
	now := f.cfg.Now()
	fl := e.refresh
	own := false // fl started for this call
	if fl == nil || now.Sub(e.refreshAt) >= f.cfg.MinRefetch {
		fl = e.flight
		if fl == nil && e.lastErr != nil && now.Sub(e.lastErrAt) < f.cfg.MinRefetch {
			// The endpoint failed moments ago: the kid stays undecided
			// without asking it again.
			err := e.lastErr
			f.mu.Unlock()
			return nil, fmt.Errorf("refetch after an unknown kid: %w", err)
		}
		if fl == nil {
			fl, own = f.start(ctx, e), true
		}
		e.refresh, e.refreshAt = fl, now
	}
	f.mu.Unlock()

	wait := time.NewTimer(f.cfg.UnknownKidWait)
	defer wait.Stop()
	select {
	case <-fl.done:
	case <-wait.C:
		return nil, fmt.Errorf("%w: %s: refetch after an unknown kid still running after %s", ErrFetch, uri, f.cfg.UnknownKidWait)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %s: %w", ErrFetch, uri, context.Cause(ctx))
	}
	if fl.err != nil {
		return nil, fmt.Errorf("refetch after an unknown kid: %w", fl.err)
	}
	// The newest accepted document: a later fetch may have replaced the
	// one this refetch brought.
	f.mu.Lock()
	doc := e.doc
	f.mu.Unlock()
	if !own {
		return doc, fmt.Errorf("%w: %s", errEarlierRefetch, uri)
	}
	return doc, nil
}

// aged reports whether ks, a set f gave, was fetched at least MinRefetch
// ago (Signer.Aged).
func (f *Fetcher) aged(ks *KeySet) bool {
	return ks != nil && f.cfg.Now().Sub(ks.Snapshot.FetchedAt) >= f.cfg.MinRefetch
}

// errEarlierRefetch is Refresh's error with the newest set when no
// refetch could start for the call: the set may lack a key its signer
// published since, so a kid it lacks is undecided.
var errEarlierRefetch = fmt.Errorf("%w: the latest refetch started before this kid was seen (a refetch starts at most once a MinRefetch)", ErrFetch)

// Metadata returns the issuer and jwks_uri of the RFC 8414 metadata at uri,
// cached like Keys (TTL, stale-while-revalidate within MaxStale, one fetch
// in flight). The error wraps ErrFetch whenever none could be obtained.
func (f *Fetcher) Metadata(ctx context.Context, uri string) (issuer, jwksURI string, err error) {
	doc, err := f.load(ctx, cacheKey{kindMeta, uri})
	if err != nil {
		return "", "", err
	}
	m := doc.(*metadata)
	return m.Issuer, m.JWKSURI, nil
}

// Staleness reports, for each URI whose latest fetch failed while a document
// from an earlier fetch is cached, how long ago (as of now) that document was
// last fetched successfully. Such a document is served until MaxStale.
func (f *Fetcher) Staleness(now time.Time) map[string]time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]time.Duration)
	for _, e := range f.cache {
		if e.doc != nil && e.lastErr != nil {
			out[e.key.uri] = max(out[e.key.uri], now.Sub(e.fetched))
		}
	}
	return out
}

// MaxStale is the longest a document is served past its last successful
// fetch while refetches fail (FetcherConfig.MaxStale after defaults). A
// writer told to retry because keys are unavailable should keep retrying at
// least this long.
func (f *Fetcher) MaxStale() time.Duration { return f.cfg.MaxStale }

// load returns the document of k as Keys documents it.
func (f *Fetcher) load(ctx context.Context, k cacheKey) (any, error) {
	f.mu.Lock()
	e := f.cache[k]
	if e == nil || e.doc == nil {
		// A document in the cache passed the check when it was fetched;
		// a URI without one is checked before it gets an entry.
		f.mu.Unlock()
		if err := f.CheckURI(k.uri); err != nil {
			return nil, err
		}
		f.mu.Lock()
		e = f.entry(k)
	}
	now := f.cfg.Now()
	backoff := e.lastErr != nil && now.Sub(e.lastErrAt) < f.cfg.MinRefetch
	if e.doc != nil {
		age := now.Sub(e.fetched)
		if age < f.cfg.TTL {
			doc := e.doc
			f.mu.Unlock()
			return doc, nil
		}
		if age < f.cfg.MaxStale {
			if e.flight == nil && !backoff {
				f.start(ctx, e)
			}
			doc := e.doc
			f.mu.Unlock()
			if f.cfg.OnStale != nil {
				f.cfg.OnStale(age)
			}
			return doc, nil
		}
	}
	fl := e.flight
	if fl == nil {
		if backoff {
			err := e.lastErr
			f.mu.Unlock()
			return nil, err
		}
		fl = f.start(ctx, e)
	}
	f.mu.Unlock()

	select {
	case <-fl.done:
		return fl.doc, fl.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %s: %w", ErrFetch, k.uri, context.Cause(ctx))
	}
}

// start begins a fetch of e's URI in its own goroutine, with a context that
// keeps ctx's values but not its cancellation (the fetch serves every
// waiter, not only the caller that started it); doGet bounds it by Timeout.
// f.mu must be held.
func (f *Fetcher) start(ctx context.Context, e *cacheEntry) *flight {
	fl := &flight{done: make(chan struct{})}
	host := ""
	if f.hostFetches != nil {
		host = fetchHost(e.key.uri)
		if f.hostFetches[host] >= maxHostFetches {
			fl.err = fmt.Errorf("%w: %s: %d fetches to %s already running", ErrFetch, e.key.uri, maxHostFetches, host)
			close(fl.done)
			return fl
		}
	}
	if f.fetches != nil {
		select {
		case f.fetches <- struct{}{}:
		default:
			fl.err = fmt.Errorf("%w: %s: %d fetches already running", ErrFetch, e.key.uri, cap(f.fetches))
			close(fl.done)
			return fl
		}
	}
	if f.hostFetches != nil {
		f.hostFetches[host]++
	}
	e.flight = fl
	ctx = context.WithoutCancel(ctx)
	go func() {
		doc, result, err := f.fetch(ctx, e.key)
		f.mu.Lock()
		now := f.cfg.Now()
		if err == nil {
			doc = accept(e, doc, now)
		} else {
			e.lastErr, e.lastErrAt = err, now
		}
		e.flight = nil
		fl.doc, fl.err = doc, err
		if f.hostFetches != nil {
			if f.hostFetches[host]--; f.hostFetches[host] <= 0 {
				delete(f.hostFetches, host)
			}
		}
		f.mu.Unlock()
		if f.fetches != nil {
			<-f.fetches
		}
		// Reported once the cache holds the outcome, before any waiter
		// returns.
		if f.cfg.OnFetch != nil {
			f.cfg.OnFetch(result)
		}
		close(fl.done)
	}()
	return fl
}

// fetchHost is the host and port uri's fetch connects to, written one
// way whatever way uri writes them: the name in lower case without a
// trailing dot, an IP address in its canonical form (an IPv4-mapped one
// as IPv4), the port as a number, the scheme's default when uri has none.
// A uri that does not parse is its own host.
func fetchHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return uri
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return uri
		}
		port = int(n)
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// accept makes doc e's cached document. A JWKS with the same bytes as the
// cached one keeps the time it was first fetched, so its snapshot is one.
// f.mu must be held.
func accept(e *cacheEntry, doc any, now time.Time) any {
	if ks, ok := doc.(*KeySet); ok {
		if old, ok := e.doc.(*KeySet); ok && old.Snapshot.ID == ks.Snapshot.ID {
			ks.Snapshot.FetchedAt = old.Snapshot.FetchedAt
		}
	}
	e.doc, e.fetched, e.lastErr = doc, now, nil
	return doc
}

// fetch gets and parses the document of k, and says how it went for
// OnFetch. Every error wraps ErrFetch; a body that is not a usable document
// also wraps ErrBadJWKS.
func (f *Fetcher) fetch(ctx context.Context, k cacheKey) (any, string, error) {
	body, err := f.doGet(ctx, k.uri)
	if err != nil {
		return nil, FetchError, err
	}
	var doc any
	switch k.kind {
	case kindKeys:
		var ks *KeySet
		ks, err = parseUsableKeySet(NewSnapshot(k.uri, f.cfg.Now(), body))
		if err == nil && f.maxKeys > 0 {
			ks.keys = slices.Clone(ks.keys[:min(len(ks.keys), f.maxKeys)])
			ks.Snapshot.Body = nil
		}
		doc = ks
	case kindMeta:
		doc, err = parseMetadata(body)
	}
	if err != nil {
		return nil, FetchRejected, fmt.Errorf("%w: %s: %w", ErrFetch, k.uri, err)
	}
	return doc, FetchOK, nil
}

// parseUsableKeySet parses a fetched JWKS and rejects one without a single
// usable key: such a set (a misconfigured endpoint, or someone in its path)
// must not replace keys that verify.
func parseUsableKeySet(s Snapshot) (*KeySet, error) {
	ks, err := ParseKeySet(s)
	if err != nil {
		return nil, err
	}
	if len(ks.keys) == 0 {
		return nil, fmt.Errorf("%w: no usable ES256 or RS256 verification key (%d entries skipped)", ErrBadJWKS, ks.Skipped)
	}
	return ks, nil
}

func parseMetadata(body []byte) (*metadata, error) {
	var m metadata
	if err := json.Unmarshal(body, &m); err != nil || m.JWKSURI == "" {
		return nil, fmt.Errorf("%w: metadata has no jwks_uri", ErrBadJWKS)
	}
	return &m, nil
}

// CheckURI reports whether uri may be fetched: https, or http to a loopback
// host when AllowInsecureLoopback is set.
func (f *Fetcher) CheckURI(uri string) error {
	return CheckFetchURI(uri, f.cfg.AllowInsecureLoopback)
}

// CheckFetchURI is the URI rule of a Fetcher, for configuration checks.
func CheckFetchURI(uri string, allowInsecureLoopback bool) error {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrFetch, uri)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowInsecureLoopback && isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%w: %s: plain http is allowed only to loopback with allowInsecureLoopbackJwks", ErrFetch, uri)
	}
	return fmt.Errorf("%w: %s: scheme %q not allowed", ErrFetch, uri, u.Scheme)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (f *Fetcher) doGet(ctx context.Context, uri string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFetch, uri, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFetch, uri, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: HTTP %d", ErrFetch, uri, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFetch, uri, err)
	}
	if len(body) > MaxJWKSBytes {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrFetch, uri, MaxJWKSBytes)
	}
	return body, nil
}
