package console_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/console"
)

// trySignIn signs c in with key (from a fresh sign-in form) and returns
// the status, the Retry-After header and the page.
func (c *webClient) trySignIn(t *testing.T, key string, hdr ...string) (int, string, string) {
	t.Helper()
	if code, _ := c.get(t, "/console/signin"); code != http.StatusOK {
		t.Fatalf("GET signin = %d", code)
	}
	resp, body := c.post(t, "/console/signin", url.Values{"csrf": {c.csrf}, "key": {key}}, hdr...)
	return resp.StatusCode, resp.Header.Get("Retry-After"), body
}

// After five failed sign-ins an address is refused (429) with the time to
// wait, even with a good key, until one attempt has come back; another
// address is not held up, and X-Forwarded-For does not move a client to
// another address.
func TestFailedSignInsAreLimitedPerAddress(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 10, 9, 9, 5, 0, 0, time.UTC)
	e := newEnv(t, nil, withClock(&now, &mu))
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := e.newWebClient(t)
	for i := range console.DefaultSigninFailures {
		if code, _, _ := c.trySignIn(t, "guess-"+string(rune('a'+i)), "X-Forwarded-For", "203.0.113."+string(rune('1'+i))); code != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d = %d, want 401", i+1, code)
		}
	}
	code, retry, body := c.trySignIn(t, keys[config.RoleSupport], "X-Forwarded-For", "203.0.113.99")
	if code != http.StatusTooManyRequests || retry != "20" || !strings.Contains(body, "Too many failed sign-in attempts from your address: try again in 20 s.") {
		t.Fatalf("sixth sign-in = %d, Retry-After %q:\n%s", code, retry, body)
	}
	if !strings.Contains(body, `id="key"`) {
		t.Fatal("the refusal page has no sign-in form")
	}
	if c.signedIn(t) {
		t.Fatal("signed in while refused")
	}

	other := e.newWebClientFrom(t, "127.0.0.2")
	if code, _, _ := other.trySignIn(t, keys[config.RoleAuditor]); code != http.StatusSeeOther {
		t.Fatalf("another address = %d, want 303", code)
	}

	advance(12 * time.Second)
	if code, retry, body := c.trySignIn(t, keys[config.RoleSupport]); code != http.StatusTooManyRequests || retry != "8" || !strings.Contains(body, "try again in 8 s") {
		t.Fatalf("12 s later = %d, Retry-After %q", code, retry)
	}
	advance(8 * time.Second)
	if code, _, _ := c.trySignIn(t, keys[config.RoleSupport]); code != http.StatusSeeOther {
		t.Fatalf("20 s later with the right key = %d, want 303", code)
	}
	if !c.signedIn(t) {
		t.Fatal("not signed in")
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `action="sign-in refused: too many failed attempts" addr=127.0.0.1/32 outcome=limit`) {
		t.Errorf("refusal not logged:\n%s", logs)
	}
	for _, k := range []string{keys[config.RoleSupport], "guess-a"} {
		if strings.Contains(logs, k) {
			t.Errorf("a key was logged: %s", k)
		}
	}
}

// Behind a trusted proxy each client counts by its X-Forwarded-For
// address, not the proxy's.
func TestSignInLimitBehindATrustedProxy(t *testing.T) {
	e := newEnv(t, nil, withTrustedProxies(netip.MustParsePrefix("127.0.0.0/8")))
	c := e.newWebClient(t)
	const client = "198.51.100.7"
	for range console.DefaultSigninFailures {
		if code, _, _ := c.trySignIn(t, "guess", "X-Forwarded-For", "10.9.9.9, "+client); code != http.StatusUnauthorized {
			t.Fatalf("failed sign-in = %d", code)
		}
	}
	if code, _, _ := c.trySignIn(t, keys[config.RoleSupport], "X-Forwarded-For", client); code != http.StatusTooManyRequests {
		t.Fatalf("%s after its failures = %d, want 429", client, code)
	}
	if code, _, _ := c.trySignIn(t, keys[config.RoleSupport], "X-Forwarded-For", "198.51.100.8"); code != http.StatusSeeOther {
		t.Fatalf("another client through the same proxy = %d, want 303", code)
	}
	if !strings.Contains(e.logs.String(), "addr="+client+"/32") {
		t.Errorf("the client's address is not in the log:\n%s", e.logs.String())
	}
}

// signedIn reports whether c has a live session.
func (c *webClient) signedIn(t *testing.T) bool {
	t.Helper()
	resp, err := c.Get(c.base + "/console/search")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
