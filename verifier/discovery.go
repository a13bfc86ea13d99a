package verifier

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"syscall"

	"github.com/pactledger/pactledger/internal/testseam"
)

// Documents whose addresses come from callers, an open personal agent's
// issuer (any PA JWT's iss, before its signature is checked) and the
// jwks_uri its discovery names, are fetched by a fetcher of their own
// (Fetcher.forCallers): it keeps at most maxCallerDocs documents, runs at
// most maxCallerFetches fetches at once and maxHostFetches to one host,
// keeps the first maxCallerKeys usable keys of a set and not its bytes,
// and connects only to public
// addresses, so that a caller can neither grow the cache of the keys the
// ledger verifies with nor make the Provider reach inside its network.
const (
	maxCallerDocs    = 1024
	maxCallerFetches = 64
	// maxCallerKeys is how many usable keys of an open agent's set are
	// kept: an agent signs with one key, two while it rotates, and a set
	// of 64 KiB parses to a few hundred keys (about 170 KiB), which
	// maxCallerDocs sets from anyone would multiply.
	maxCallerKeys = 8
	// maxHostFetches bounds the fetches at once to one host (host and
	// port, however written: fetchHost), so that the servers of a few issuers that answer slowly
	// do not hold every fetch.
	maxHostFetches = 2
)

// The ledger checks the request JWTs of open agents a brand of the
// embedded Provider granted (Registry.OpenAgentsOnGrant) through a
// fetcher of its own (Fetcher.forGrants), under the same rules as
// forCallers but for one thing: it keeps each set's bytes and every usable
// key, since the ledger keeps the set it verified with as the row's
// snapshot, and a later check of the row (VerifyRow) parses all of it. A
// set is at most MaxJWKSBytes and parses to a few hundred keys at most,
// so its cache holds fewer documents, and only agents a delegation token
// of such a brand names as its client_id reach it, not any caller.
const (
	maxGrantDocs    = 128
	maxGrantFetches = 16
)

// errNotPublic is the error of an address a caller named that is not a
// public one: loopback, private, link-local, unspecified, multicast or
// reserved.
var errNotPublic = errors.New("not a public address")

// forCallers returns a fetcher like f for addresses callers name. It
// reaches public addresses only, whatever AllowInsecureLoopback says: that
// setting is the operator's, for the URIs configured, and a caller's
// issuer must not make the Provider reach a service on its own machine.
func (f *Fetcher) forCallers() *Fetcher {
	return f.callerFetcher(testseam.CallersOnLoopback())
}

// forGrants returns a fetcher like forCallers's for the open agents the
// ledger checks on a brand's grant: it keeps each set's bytes and every
// usable key, and holds at most maxGrantDocs documents with at most
// maxGrantFetches fetches at once.
func (f *Fetcher) forGrants() *Fetcher {
	g := f.callerFetcher(testseam.CallersOnLoopback())
	g.maxDocs = maxGrantDocs
	g.fetches = make(chan struct{}, maxGrantFetches)
	g.maxKeys = 0
	return g
}

// callerFetcher is forCallers, with loopback addresses reachable too when
// loopback is set (the tests' servers listen on loopback).
func (f *Fetcher) callerFetcher(loopback bool) *Fetcher {
	g := NewFetcher(f.cfg)
	g.maxDocs = maxCallerDocs
	g.fetches = make(chan struct{}, maxCallerFetches)
	g.hostFetches = map[string]int{}
	g.maxKeys = maxCallerKeys
	g.callerLoopback = loopback
	dialer := &net.Dialer{Timeout: f.cfg.Timeout, Control: publicOnly(loopback)}
	g.client.Transport.(*http.Transport).DialContext = dialer.DialContext
	return g
}

// publicOnly is a dialer's Control that refuses a connection to an
// address that is not public. It runs after the name is resolved, for the
// address dialed, so a name that resolves to an inside address is refused
// as well as one written as that address.
func publicOnly(loopback bool) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", errNotPublic, address)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("%w: %s", errNotPublic, address)
		}
		if !public(ip, loopback) {
			return fmt.Errorf("%w: %s", errNotPublic, ip)
		}
		return nil
	}
}

// reserved4 are IPv4 ranges IsGlobalUnicast and IsPrivate leave out that
// are not reachable on the internet (IANA IPv4 special-purpose registry):
// "this network", shared address space (RFC 6598), IETF protocol
// assignments, documentation, the 6to4 relay anycast, benchmarking and
// the class E block.
var reserved4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// global6 is IPv6 global unicast (RFC 4291 §2.4); every other IPv6 block
// (IPv4-compatible and SIIT forms, NAT64 prefixes, unique local,
// link-local, site-local, multicast) is refused.
var global6 = netip.MustParsePrefix("2000::/3")

// reserved6 are the blocks of global6 that are not an ordinary public
// address (IANA IPv6 special-purpose registry): IETF protocol assignments
// (Teredo 2001::/32 among them, which embeds an IPv4 address, and
// benchmarking), documentation, and 6to4, whose address embeds an IPv4
// one that a relay would reach.
var reserved6 = []netip.Prefix{
	netip.MustParsePrefix("2001::/23"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("3fff::/20"),
}

// public reports whether ip is a public unicast address (or loopback,
// when loopback is allowed: only for tests). An IPv4-mapped address is
// judged as the IPv4 address it maps; any other IPv6 address must be
// global unicast outside the special-purpose blocks.
func public(ip netip.Addr, loopback bool) bool {
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return loopback
	}
	if ip.Zone() != "" {
		return false
	}
	if ip.Is4() {
		if !ip.IsGlobalUnicast() || ip.IsPrivate() {
			return false
		}
		return !slices.ContainsFunc(reserved4, func(p netip.Prefix) bool { return p.Contains(ip) })
	}
	if !global6.Contains(ip) {
		return false
	}
	return !slices.ContainsFunc(reserved6, func(p netip.Prefix) bool { return p.Contains(ip) })
}

// checkCallerURI is CheckURI for an address a caller named: it also
// refuses at once a host written as an address that is not public, or
// "localhost", where the dialer would refuse it later.
func (f *Fetcher) checkCallerURI(uri string) error {
	if err := f.CheckURI(uri); err != nil {
		return err
	}
	u, _ := url.Parse(uri) // parsed by CheckURI
	host := u.Hostname()
	if host == "localhost" {
		if f.callerLoopback {
			return nil
		}
		return fmt.Errorf("%s: %w", uri, errNotPublic)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !public(ip, f.callerLoopback) {
		return fmt.Errorf("%s: %w", uri, errNotPublic)
	}
	return nil
}
