package provider

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/pactledger/pactledger/pact/brand"
)

// hostNames checks a brand's own domains (Config.Domains) and returns them
// as requests are matched against them (requestHost): lower case, without
// the root's trailing dot. A domain that is not a host name alone (a port,
// a scheme, a path, an IP literal in brackets) or that names no brand is
// refused, as are two spellings of one host for different brands: either
// would start a card no request reaches.
func hostNames(domains map[string]string, brands map[string]*brand.Brand) (map[string]string, error) {
	out := make(map[string]string, len(domains))
	for d, id := range domains {
		if brands[id] == nil {
			return nil, fmt.Errorf("domain %s names unknown brand %q", d, id)
		}
		h := strings.TrimSuffix(strings.ToLower(d), ".")
		if host, port, err := net.SplitHostPort(h); err == nil && isHostName(host) && isPort(port) {
			return nil, fmt.Errorf("domain %q of brand %s: give the host name without a port (the card is served to that host's requests on any port)", d, id)
		}
		if !isHostName(h) {
			return nil, fmt.Errorf("domain %q of brand %s is not a host name (letters, digits and dashes, in dot-separated labels of up to 63, such as support.acme.example)", d, id)
		}
		if other, ok := out[h]; ok && other != id {
			return nil, fmt.Errorf("domain %s is given twice, in different letter case, for brands %s and %s", h, other, id)
		}
		out[h] = id
	}
	return out, nil
}

// isHostName says whether h, in lower case, is a DNS host name: labels of
// letters, digits and dashes, 1 to 63 long, not starting or ending with a
// dash, 253 in all at most.
func isHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for l := range strings.SplitSeq(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

// isPort says whether p is a port number's digits.
func isPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

// requestHost is the host a request was sent to, as Config.Domains is
// keyed: its Host without the port, in lower case, without the root's
// trailing dot. An IPv6 literal keeps its brackets only without a port.
func requestHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
