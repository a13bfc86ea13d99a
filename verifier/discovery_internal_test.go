package verifier

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// An open agent's issuer is any PA JWT's iss, named before its signature
// is checked: discovery refuses one written as an address inside the
// network before any connection, and the dialer refuses a name that
// resolves to one.
func TestOpenAgentDiscoveryReachesOnlyPublicAddresses(t *testing.T) {
	reg, err := NewRegistry(NewFetcher(FetcherConfig{}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenAgents(true)
	for _, iss := range []string{"https://127.0.0.1:1", "https://[::1]:1", "https://localhost:1", "https://10.1.2.3", "https://169.254.169.254", "https://[::ffff:192.168.0.1]", "https://100.64.0.1"} {
		if _, err := reg.Agent(context.Background(), iss, false); !errors.Is(err, ErrUntrusted) || !errors.Is(err, errNotPublic) {
			t.Errorf("iss %s: %v, want untrusted: not a public address", iss, err)
		}
	}
	dial := publicOnly(false)
	for addr, ok := range map[string]bool{
		"127.0.0.1:443": false, "[::1]:443": false, "10.0.0.1:443": false, "172.16.5.4:443": false, "192.168.1.1:443": false,
		"169.254.169.254:80": false, "[fe80::1]:443": false, "[fd00::1]:443": false, "0.0.0.0:443": false, "224.0.0.1:443": false,
		"[::ffff:10.0.0.1]:443": false, "100.64.1.1:443": false, "198.18.0.1:443": false,
		"93.184.215.14:443": true, "[2606:4700::1111]:443": true,
	} {
		if err := dial("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("dial %s: %v, want allowed %v", addr, err, ok)
		}
	}
	if !public(netip.MustParseAddr("127.0.0.1"), true) {
		t.Error("loopback refused under AllowInsecureLoopback")
	}
}

// allowInsecureLoopbackJwks is the operator's, for the URIs configured:
// with it on, a caller's issuer (or the jwks_uri its discovery names)
// still never makes the Provider ask a service on its own machine, named
// by address or by name.
func TestOpenAgentsNeverReachLoopbackUnderAllowInsecureLoopback(t *testing.T) {
	var got atomic.Value
	got.Store("")
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Method + " " + r.URL.RequestURI())
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer inside.Close()
	reg, err := NewRegistry(NewFetcher(FetcherConfig{AllowInsecureLoopback: true}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenAgents(true)
	byName := strings.Replace(inside.URL, "127.0.0.1", "localhost", 1)
	for _, iss := range []string{inside.URL + "/v1/admin/anything?x=", byName + "/v1/admin/anything?x="} {
		if _, err := reg.Agent(context.Background(), iss, false); !errors.Is(err, ErrUntrusted) || !errors.Is(err, errNotPublic) {
			t.Errorf("iss %s: %v, want untrusted: not a public address", iss, err)
		}
	}
	// A jwks_uri is fetched by the same fetcher; its dialer refuses a
	// name that resolves to loopback.
	for _, uri := range []string{inside.URL + "/jwks", byName + "/jwks"} {
		if _, err := reg.callers.Keys(context.Background(), uri); !errors.Is(err, ErrFetch) {
			t.Errorf("keys at %s: %v, want ErrFetch", uri, err)
		}
	}
	if v := got.Load().(string); v != "" {
		t.Errorf("an open agent's address made the Provider ask loopback: %s", v)
	}
}

// IPv6 has many ways to write, or route to, an IPv4 address inside the
// network; an IPv6 address is public only in global unicast outside the
// special-purpose blocks, and an IPv4-mapped one is judged as its IPv4
// address. Each is decided by the dialer's control, nothing is dialed.
func TestIPv6FormsOfInsideAddressesAreNotPublic(t *testing.T) {
	dial := publicOnly(false)
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"::a00:1", false},                              // IPv4-compatible ::10.0.0.1
		{"::a9fe:a9fe", false},                          // IPv4-compatible ::169.254.169.254
		{"::ffff:0:a00:1", false},                       // SIIT ::ffff:0:10.0.0.1
		{"::ffff:10.0.0.1", false},                      // IPv4-mapped private
		{"::ffff:100.64.0.1", false},                    // IPv4-mapped shared address space
		{"64:ff9b::a00:1", false},                       // NAT64 well-known prefix
		{"64:ff9b:1::a00:1", false},                     // local-use NAT64 (RFC 8215)
		{"64:ff9b:1::a9fe:a9fe", false},                 // local-use NAT64 of 169.254.169.254
		{"2002:a00:1::1", false},                        // 6to4 of 10.0.0.1
		{"2002:a9fe:a9fe::1", false},                    // 6to4 of 169.254.169.254
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", false}, // Teredo
		{"2001:2::1", false},                            // benchmarking
		{"2001:db8::1", false},                          // documentation
		{"3fff::1", false},                              // documentation (RFC 9637)
		{"fec0::1", false},                              // site-local
		{"fc00::1", false},                              // unique local
		{"fe80::1", false},                              // link-local
		{"ff02::1", false},                              // multicast
		{"100::1", false},                               // discard
		{"::", false},                                   // unspecified
		{"2606:4700::1111", true},
		{"2001:4860:4860::8888", true},
		{"::ffff:93.184.215.14", true}, // IPv4-mapped public
	} {
		ip := netip.MustParseAddr(tc.addr)
		if got := public(ip, false); got != tc.public {
			t.Errorf("%s: public %v, want %v", tc.addr, got, tc.public)
		}
		if err := dial("tcp6", netip.AddrPortFrom(ip, 443).String(), nil); (err == nil) != tc.public {
			t.Errorf("dial %s: %v, want allowed %v", tc.addr, err, tc.public)
		}
	}
}

// Every issuer a caller names would otherwise keep a cache entry for
// good: the open agents' cache is bounded, and the configured keys'
// cache is not where their documents go.
func TestOpenAgentsCacheIsBounded(t *testing.T) {
	f := NewFetcher(FetcherConfig{AllowInsecureLoopback: true})
	reg, err := NewRegistry(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenAgentsOnLoopback()
	const n = maxCallerDocs + 200
	for i := range n {
		// Nothing listens on port 1: each fails at once.
		_, _ = reg.Agent(context.Background(), fmt.Sprintf("http://127.0.0.1:1/agent-%d", i), false)
	}
	reg.callers.mu.Lock()
	callers := len(reg.callers.cache)
	reg.callers.mu.Unlock()
	f.mu.Lock()
	configured := len(f.cache)
	f.mu.Unlock()
	if callers > maxCallerDocs || configured != 0 {
		t.Fatalf("%d issuers left %d documents in the open agents' cache (at most %d) and %d in the configured keys'", n, callers, maxCallerDocs, configured)
	}
}

// Fetches for callers' addresses run at most maxCallerFetches at once;
// one more fails at once as undecided, without asking the endpoint.
func TestOpenAgentFetchesAreBounded(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "no keys here", http.StatusNotFound)
	}))
	defer srv.Close()
	g := NewFetcher(FetcherConfig{AllowInsecureLoopback: true}).callerFetcher(true)
	for range maxCallerFetches {
		g.fetches <- struct{}{} // fetches in flight
	}
	if _, err := g.Keys(context.Background(), srv.URL+"/jwks.json"); !errors.Is(err, ErrFetch) || hits.Load() != 0 {
		t.Fatalf("a fetch over the bound = %v after %d requests, want ErrFetch after none", err, hits.Load())
	}
	<-g.fetches
	if _, err := g.Keys(context.Background(), srv.URL+"/other.json"); !errors.Is(err, ErrFetch) || hits.Load() != 1 {
		t.Fatalf("a fetch within the bound = %v after %d requests, want the endpoint's 404 after one", err, hits.Load())
	}
}

// Anyone at the Provider can name an issuer (a PA JWT's iss is read before
// its signature). Issuers on a server that answers slowly hold at most
// maxHostFetches fetches; an honest open agent elsewhere is still found.
func TestSlowIssuersDoNotHoldEveryOpenAgentFetch(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 2*maxCallerFetches)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)

	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwk := jose.JSONWebKey{Key: &priv.PublicKey, KeyID: "pa-1", Algorithm: "ES256", Use: "sig"}
	var honest *httptest.Server
	honest = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]string{"issuer": honest.URL, "jwks_uri": honest.URL + "/jwks"})
		case "/jwks":
			json.NewEncoder(w).Encode(map[string]any{"keys": []jose.JSONWebKey{jwk}})
		}
	}))
	defer honest.Close()

	reg, err := NewRegistry(NewFetcher(FetcherConfig{AllowInsecureLoopback: true}), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenAgentsOnLoopback()
	// More issuers on the slow server than there are fetches: each is
	// either held there or refused at once.
	const hostile = maxCallerFetches + 1
	refused := make(chan struct{}, hostile)
	for i := range hostile {
		go func() {
			if _, err := reg.Agent(context.Background(), fmt.Sprintf("%s/hostile-%d", slow.URL, i), false); err != nil {
				refused <- struct{}{}
			}
		}()
	}
	for n := 0; n < hostile; n++ {
		select {
		case <-arrived:
		case <-refused:
		}
	}
	if _, err := reg.Agent(context.Background(), honest.URL, false); err != nil {
		t.Fatalf("an honest open agent while %d hostile issuers' fetches hang: %v", maxCallerFetches+1, err)
	}
	reg.callers.mu.Lock()
	held := reg.callers.hostFetches[strings.TrimPrefix(slow.URL, "http://")]
	reg.callers.mu.Unlock()
	if held > maxHostFetches {
		t.Fatalf("%d fetches to the slow server at once, want at most %d", held, maxHostFetches)
	}
}

// One host written many ways (letter case, a trailing dot, a port with
// leading zeros or left to the scheme, an IPv4-mapped address) is one
// host to the bound on fetches at once.
func TestFetchHostIsOneWayOfWritingAHost(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"https://Agent.Example./jwks", "agent.example:443"},
		{"https://agent.example:0443/jwks", "agent.example:443"},
		{"http://LOCALHOST.:8080/x", "localhost:8080"},
		{"http://localhost/x", "localhost:80"},
		{"http://127.0.0.1:00080/x", "127.0.0.1:80"},
		{"http://[::ffff:127.0.0.1]:80/x", "127.0.0.1:80"},
		{"https://[2606:4700:0::1111]/x", "[2606:4700::1111]:443"},
		{"https://[2606:4700::1111]:443/x", "[2606:4700::1111]:443"},
	} {
		if got := fetchHost(tc.uri); got != tc.want {
			t.Errorf("fetchHost(%s) = %s, want %s", tc.uri, got, tc.want)
		}
	}
}

// Issuers on one slow server hold at most maxHostFetches fetches however
// they write its host.
func TestSpellingsOfOneHostShareItsFetches(t *testing.T) {
	for name, spell := range map[string][]string{
		"address": {"127.0.0.1:%s", "127.0.0.1:0%s", "127.0.0.1:00%s", "[::ffff:127.0.0.1]:%s"},
		"name":    {"localhost:%s", "LOCALHOST:%s", "Localhost:%s", "localhost.:%s"},
	} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			var arrived atomic.Int32
			events := make(chan struct{}, 64)
			slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived.Add(1)
				events <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			defer slow.Close()
			port := slow.URL[strings.LastIndexByte(slow.URL, ':')+1:]
			g := NewFetcher(FetcherConfig{AllowInsecureLoopback: true}).callerFetcher(true)
			n := 0
			for _, h := range spell {
				for i := range 2 {
					n++
					go func() {
						_, _ = g.Keys(context.Background(), fmt.Sprintf("http://"+h+"/jwks-%d", port, i))
						events <- struct{}{}
					}()
				}
			}
			// Each fetch either reaches the server (and is held there) or
			// returns: refused over the bound, or failed to connect.
			for range n {
				<-events
			}
			got := arrived.Load()
			close(release)
			if got > maxHostFetches {
				t.Errorf("%d fetches at once to one host written %d ways, want at most %d", got, len(spell), maxHostFetches)
			}
		})
	}
}

// Anyone can be an open agent, and each of maxCallerDocs sets could be
// 64 KiB of a few hundred keys: an open agent's set keeps its first
// maxCallerKeys usable keys, and not its bytes.
func TestAnOpenAgentsSetKeepsAFewKeys(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var keys []jose.JSONWebKey
	for i := 0; ; i++ {
		keys = append(keys, jose.JSONWebKey{Key: &priv.PublicKey, KeyID: fmt.Sprint(i), Use: "sig"})
		b, err := json.Marshal(map[string]any{"keys": keys})
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxJWKSBytes {
			keys = keys[:len(keys)-1]
			break
		}
	}
	body, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	g := NewFetcher(FetcherConfig{AllowInsecureLoopback: true}).callerFetcher(true)
	ks, err := g.Keys(context.Background(), srv.URL+"/jwks")
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.keys) != maxCallerKeys || cap(ks.keys) != maxCallerKeys || ks.Snapshot.Body != nil {
		t.Errorf("a set of %d keys kept %d (capacity %d) and %d bytes, want %d keys and no bytes", len(keys), len(ks.keys), cap(ks.keys), len(ks.Snapshot.Body), maxCallerKeys)
	}
	if !ks.hasKid("0") || ks.hasKid(fmt.Sprint(maxCallerKeys)) {
		t.Errorf("kept other keys than the first %d", maxCallerKeys)
	}
	// The configured keys' fetcher keeps a set whole: its bytes go with
	// the rows verified against it.
	f := NewFetcher(FetcherConfig{AllowInsecureLoopback: true})
	if ks, err := f.Keys(context.Background(), srv.URL+"/jwks"); err != nil || len(ks.keys) != len(keys) || len(ks.Snapshot.Body) != len(body) {
		t.Errorf("configured keys: %v, want all %d keys and the bytes", err, len(keys))
	}
}

// The fetcher of the open agents the ledger takes on a grant keeps each
// set's bytes and every usable key (a row keeps the set as its snapshot,
// and a re-verification parses all of it), holds at most maxGrantDocs
// documents and never reaches loopback in the product; Agent stays
// closed to those agents.
func TestOpenAgentsOnGrantKeepTheSetsBytes(t *testing.T) {
	var keys []string
	for i := range maxCallerKeys + 2 {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := jose.JSONWebKey{Key: &k.PublicKey, KeyID: fmt.Sprintf("k%d", i), Algorithm: "ES256", Use: "sig"}.MarshalJSON()
		keys = append(keys, string(b))
	}
	set := []byte(`{"keys":[` + strings.Join(keys, ",") + `]}`)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/openid-configuration" {
			fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, srv.URL, srv.URL+"/jwks")
			return
		}
		w.Write(set)
	}))
	defer srv.Close()
	f := NewFetcher(FetcherConfig{AllowInsecureLoopback: true})
	reg, err := NewRegistry(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenAgentsOnGrant()
	if _, err := reg.OpenAgent(context.Background(), srv.URL, false); !errors.Is(err, ErrUntrusted) || !errors.Is(err, errNotPublic) {
		t.Fatalf("an open agent on loopback: %v, want refused as not public", err)
	}
	if _, err := reg.Agent(context.Background(), srv.URL, false); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("Agent of an unregistered agent: %v, want untrusted", err)
	}
	reg.grants = f.callerFetcher(true)
	reg.grants.maxDocs, reg.grants.fetches, reg.grants.maxKeys = maxGrantDocs, make(chan struct{}, maxGrantFetches), 0
	s, err := reg.OpenAgent(context.Background(), srv.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.Keys.Snapshot.Body, set) || len(s.Keys.keys) != maxCallerKeys+2 {
		t.Fatalf("the set kept: %d bytes, %d keys; want the %d bytes served and all %d keys", len(s.Keys.Snapshot.Body), len(s.Keys.keys), len(set), maxCallerKeys+2)
	}
	g := f.forGrants()
	if g.maxDocs != maxGrantDocs || cap(g.fetches) != maxGrantFetches || g.maxKeys != 0 || g.callerLoopback {
		t.Fatalf("forGrants: %d documents, %d fetches, %d keys, loopback %v", g.maxDocs, cap(g.fetches), g.maxKeys, g.callerLoopback)
	}
}
