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
	"net/url"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// MaxJWKSBytes caps a fetched JWKS or authorization-server metadata document.
const MaxJWKSBytes = 64 << 10

// maxKeysPerSet caps how many usable keys one JWKS may contribute.
const maxKeysPerSet = 64

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

// KeySet is a parsed JWKS with the snapshot it came from. Only EC P-256 and
// RSA (2048 bits or more) public keys are kept; private parts are dropped.
type KeySet struct {
	Snapshot Snapshot
	keys     []jose.JSONWebKey
	// Skipped counts entries that were not usable keys.
	Skipped int
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
	ks := &KeySet{Snapshot: s}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !usableKey(k) || len(ks.keys) >= maxKeysPerSet {
			ks.Skipped++
			continue
		}
		ks.keys = append(ks.keys, k.Public())
	}
	return ks, nil
}

func usableKey(k jose.JSONWebKey) bool {
	if k.Use != "" && k.Use != "sig" {
		return false
	}
	switch pub := k.Public().Key.(type) {
	case *ecdsa.PublicKey:
		return pub.Curve == elliptic.P256()
	case *rsa.PublicKey:
		return pub.N.BitLen() >= 2048
	}
	return false
}

// candidates returns the keys a token signed with alg and kid may verify
// against: the keys with that kid (all keys when kid is empty) whose type
// fits alg.
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
	}
	return out
}

// FetcherConfig tunes a Fetcher. The zero value is the documented default.
type FetcherConfig struct {
	// AllowInsecureLoopback permits plain http to loopback hosts (tests only).
	AllowInsecureLoopback bool
	// Timeout bounds one fetch; default 5 s.
	Timeout time.Duration
	// TTL is how long a fetched JWKS is reused; default 5 min.
	TTL time.Duration
	// MinRefetch is the least time between two refetches of one URI on an
	// unknown kid; default 10 s.
	MinRefetch time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// OnFetch, when set, is told about each fetch ("ok" or "error").
	OnFetch func(result string)
}

// Fetcher fetches JWKS and RFC 8414 metadata from configured URIs, with a
// size cap, a timeout, a cache and a rate-limited refetch.
type Fetcher struct {
	cfg    FetcherConfig
	client *http.Client

	mu    sync.Mutex
	cache map[string]*cacheEntry
}

type cacheEntry struct {
	mu          sync.Mutex // serializes fetches of one URI
	ks          *KeySet
	meta        *metadata
	fetched     time.Time
	lastRefresh time.Time
	lastErr     error
	lastErrAt   time.Time
}

// maxStale is how long a cached JWKS keeps serving while refetches fail.
const maxStale = time.Hour

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
	if cfg.MinRefetch <= 0 {
		cfg.MinRefetch = 10 * time.Second
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
		cache: make(map[string]*cacheEntry),
	}
}

func (f *Fetcher) entry(uri string) *cacheEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.cache[uri]
	if e == nil {
		e = &cacheEntry{}
		f.cache[uri] = e
	}
	return e
}

// Keys returns the JWKS at uri, from the cache while it is fresh.
func (f *Fetcher) Keys(ctx context.Context, uri string) (*KeySet, error) {
	e := f.entry(uri)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := f.cfg.Now()
	if e.ks != nil && now.Sub(e.fetched) < f.cfg.TTL {
		return e.ks, nil
	}
	// A failing endpoint is asked again at most once per MinRefetch, so a
	// signer that is down cannot make every write wait for a timeout.
	if e.lastErr != nil && now.Sub(e.lastErrAt) < f.cfg.MinRefetch {
		if e.ks != nil && now.Sub(e.fetched) < maxStale {
			return e.ks, nil
		}
		return nil, e.lastErr
	}
	ks, err := f.fetchKeys(ctx, uri, e)
	if err != nil && e.ks != nil && now.Sub(e.fetched) < maxStale {
		return e.ks, nil // the keys last published, while the endpoint fails
	}
	return ks, err
}

// Refresh refetches the JWKS at uri after an unknown kid, at most once per
// MinRefetch; within that window it returns the cached set.
func (f *Fetcher) Refresh(ctx context.Context, uri string) (*KeySet, error) {
	e := f.entry(uri)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := f.cfg.Now()
	if e.ks != nil && now.Sub(e.lastRefresh) < f.cfg.MinRefetch {
		return e.ks, nil
	}
	e.lastRefresh = now
	return f.fetchKeys(ctx, uri, e)
}

func (f *Fetcher) fetchKeys(ctx context.Context, uri string, e *cacheEntry) (*KeySet, error) {
	body, err := f.get(ctx, uri)
	if err == nil {
		var ks *KeySet
		if ks, err = ParseKeySet(NewSnapshot(uri, f.cfg.Now(), body)); err == nil {
			return f.store(e, ks), nil
		}
		err = fmt.Errorf("jwks %s: %w", uri, err)
	}
	e.lastErr, e.lastErrAt = err, f.cfg.Now()
	return nil, err
}

func (f *Fetcher) store(e *cacheEntry, ks *KeySet) *KeySet {
	e.lastErr = nil
	if e.ks != nil && e.ks.Snapshot.ID == ks.Snapshot.ID {
		ks.Snapshot.FetchedAt = e.ks.Snapshot.FetchedAt
	}
	e.ks, e.fetched = ks, f.cfg.Now()
	return ks
}

// Metadata returns the issuer and jwks_uri of the RFC 8414 metadata at uri.
func (f *Fetcher) Metadata(ctx context.Context, uri string) (issuer, jwksURI string, err error) {
	e := f.entry("meta " + uri)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.meta != nil && f.cfg.Now().Sub(e.fetched) < f.cfg.TTL {
		return e.meta.Issuer, e.meta.JWKSURI, nil
	}
	body, err := f.get(ctx, uri)
	if err != nil {
		return "", "", err
	}
	var m metadata
	if err := json.Unmarshal(body, &m); err != nil || m.JWKSURI == "" {
		return "", "", fmt.Errorf("%w: metadata %s has no jwks_uri", ErrBadJWKS, uri)
	}
	e.meta, e.fetched = &m, f.cfg.Now()
	return m.Issuer, m.JWKSURI, nil
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

func (f *Fetcher) get(ctx context.Context, uri string) ([]byte, error) {
	if err := f.CheckURI(uri); err != nil {
		return nil, err
	}
	body, err := f.doGet(ctx, uri)
	if f.cfg.OnFetch != nil {
		if err != nil {
			f.cfg.OnFetch("error")
		} else {
			f.cfg.OnFetch("ok")
		}
	}
	return body, err
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
