package provider

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/store"
	"github.com/pactledger/pactledger/verifier"
)

// pollCode asks the token endpoint once for a device code and returns the
// OAuth error it answers ("" for tokens).
func (e *oauthEnv) pollCode(da map[string]any) string {
	e.t.Helper()
	code, m := e.poll(da)
	if code == http.StatusOK {
		return ""
	}
	s, _ := m["error"].(string)
	return s
}

// Device authorizations are not kept for ever: once its code has expired,
// pending, denied or redeemed, a device authorization answers a late poll
// as RFC 8628 §3.5 has it for oauth.DeviceCodeKept, then it is deleted
// with its user code by a later device authorization, and its code is
// unknown.
func TestExpiredDeviceAuthorizationsArePruned(t *testing.T) {
	e := newOAuthEnv(t)
	pending := e.deviceAuth("orders:read")
	denied := e.deviceAuth("orders:read")
	if err := e.deny(denied["user_code"].(string), "acct-48213"); err != nil {
		t.Fatal(err)
	}
	redeemed := e.deviceAuth("orders:read")
	if err := e.approve(redeemed["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	if got := e.pollCode(redeemed); got != "" {
		t.Fatalf("redeem: %s", got)
	}

	e.advance(oauth.DeviceCodeTTL + time.Minute)
	e.deviceAuth("orders:read") // prunes what is due
	for _, c := range []struct {
		name string
		da   map[string]any
		want string
	}{{"pending", pending, oauth.ExpiredToken}, {"denied", denied, oauth.AccessDenied}, {"redeemed", redeemed, oauth.InvalidGrant}} {
		if got := e.pollCode(c.da); got != c.want {
			t.Fatalf("a late poll of the %s code, a minute after it expired: %q, want %q", c.name, got, c.want)
		}
	}

	e.advance(oauth.DeviceCodeKept)
	e.deviceAuth("orders:read")
	st, err := e.st.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.DeviceAuthorizations != 2 {
		t.Fatalf("%d device authorizations kept, want 2: the last two; the three expired %s ago pruned", st.DeviceAuthorizations, oauth.DeviceCodeKept)
	}
	if got := e.pollCode(pending); got != oauth.InvalidGrant {
		t.Fatalf("a poll of a pruned code: %q, want invalid_grant", got)
	}
	if err := e.approve(pending["user_code"].(string), "acct-48213", []string{"orders:read"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("approving a pruned user code: %v, want not found", err)
	}
}

// A personal agent has at most oauth.MaxPending device authorizations
// pending for one of its users: the next is answered 429 with Retry-After
// (PACT §6, as a rate limit of a (personal agent, sub)) and slow_down, until
// one is answered or expires. Its other users are not held back.
func TestPendingDeviceAuthorizationsAreCappedPerAgentSub(t *testing.T) {
	e := newOAuthEnv(t)
	var first map[string]any
	for i := range oauth.MaxPending {
		da := e.deviceAuth("orders:read")
		if i == 0 {
			first = da
		}
		e.advance(time.Second)
	}
	form := url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read"}}
	code, m, h := e.post("/oauth/device_authorization", form, e.jwt())
	wait := oauth.DeviceCodeTTL - time.Duration(oauth.MaxPending)*time.Second
	if code != http.StatusTooManyRequests || m["error"] != oauth.SlowDown || h.Get("Retry-After") != strconv.Itoa(int(wait/time.Second)) {
		t.Fatalf("device authorization %d pending for u1: %d %v Retry-After %q; want 429 slow_down, Retry-After %d",
			oauth.MaxPending+1, code, m, h.Get("Retry-After"), int(wait/time.Second))
	}
	e.deviceAuthAs("u2", "orders:read")

	if err := e.deny(first["user_code"].(string), "acct-48213"); err != nil {
		t.Fatal(err)
	}
	e.deviceAuth("orders:read") // the denied one's place
	if code, m, _ := e.post("/oauth/device_authorization", form, e.jwt()); code != http.StatusTooManyRequests {
		t.Fatalf("past the cap again: %d %v", code, m)
	}
	e.advance(wait + time.Second)
	e.deviceAuth("orders:read") // the expired ones' places
}

// A personal agent signs whatever sub it likes, so besides the bound for
// one sub its pending device authorizations are bounded for all its subs
// together: here by the request JWTs they keep
// (oauth.MaxPendingBytesPerAgent), each padded to near the 16 KiB a JWT
// may have. Past it the agent is answered as past the bound for one sub, 429
// with Retry-After and slow_down, saying which bound it met; the places
// come back as the authorizations expire.
func TestPendingDeviceAuthorizationsAreBoundedPerAgent(t *testing.T) {
	e := newOAuthEnv(t)
	pad := strings.Repeat("p", 11<<10) // some 15 KiB of JWT
	form := url.Values{"client_id": {e.sc.PA.ID}, "scope": {"orders:read"}}
	ask := func(i int) (int, map[string]any, http.Header) {
		now := e.clock()
		jwt := e.sc.PA.Key.Sign(map[string]any{"iss": e.sc.PA.ID, "sub": fmt.Sprintf("user-%d", i), "aud": e.sc.Audience,
			"iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix(), "pad": pad})
		e.advance(20 * time.Millisecond) // within the agent's rate limit
		return e.post("/oauth/device_authorization", form, jwt)
	}
	start := e.clock()
	most := oauth.MaxPendingBytesPerAgent / len(pad) // each JWT is longer than its pad
	var accepted int
	for ; accepted <= most; accepted++ {
		code, m, h := ask(accepted)
		if code == http.StatusOK {
			continue
		}
		wait := int(math.Ceil(start.Add(oauth.DeviceCodeTTL).Sub(e.clock()).Seconds()))
		if code != http.StatusTooManyRequests || m["error"] != oauth.SlowDown || !strings.Contains(m["error_description"].(string), "request JWTs") ||
			h.Get("Retry-After") != strconv.Itoa(wait) {
			t.Fatalf("device authorization %d, past the agent's bound: %d %v Retry-After %q; want 429 slow_down naming the bound, Retry-After %d",
				accepted+1, code, m, h.Get("Retry-After"), wait)
		}
		break
	}
	if accepted <= oauth.MaxPending || accepted > most {
		t.Fatalf("%d pending for the agent's users together, want more than %d (one sub's) and at most %d", accepted, oauth.MaxPending, most)
	}
	e.advance(oauth.DeviceCodeTTL)
	if code, m, _ := ask(accepted); code != http.StatusOK {
		t.Fatalf("once the pending ones expired: %d %v", code, m)
	}
}

// unregistered is a key source that knows no registered agent: every
// agent it takes is one taken under provider.openAgents.
type unregistered struct{ verifier.KeySource }

func (unregistered) Registered(string) bool { return false }

// A device authorization asked by a personal agent no one registered is
// kept as an open agent's, counted among its brand's open agents'
// (oauth.MaxPendingOpenPerBrand); one asked by a registered agent is not.
func TestAnOpenAgentsDeviceAuthorizationIsKeptAsOpen(t *testing.T) {
	e := newOAuthEnv(t)
	stored := func(da map[string]any) oauth.DeviceAuthorization {
		t.Helper()
		d, _, err := e.st.StartConsent(store.ConsentStart{Brand: e.brand.ID, User: "acct-48213", UserCode: da["user_code"].(string),
			AssertionID: "idp\x00" + da["user_code"].(string), AssertionExpires: e.clock().Add(time.Hour),
			Ticket: "ct_t", Cookie: "c", TicketExpires: e.clock().Add(time.Hour)}, e.clock())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := stored(e.deviceAuth("orders:read")); d.Open {
		t.Error("a registered agent's device authorization is kept as an open agent's")
	}
	e.cfg.Keys = unregistered{e.cfg.Keys}
	p, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.live.Store(p)
	if d := stored(e.deviceAuthAs("u2", "orders:read")); !d.Open {
		t.Error("an unregistered agent's device authorization is not kept as an open agent's")
	}
}
