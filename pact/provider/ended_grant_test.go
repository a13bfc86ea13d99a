package provider

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/brandlogin"
	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
)

// A request under a delegation token whose grant has ended (PACT §5.5) is
// answered 401 invalid_token before it runs, and the attempt is on record
// for the ledger as a refusal (oauth.go, recordEndedGrant). These tests
// cover the expired grant, the operations on a task, and the one refusal a
// grant a minute; emitter_test.go covers message:send under a revoked
// grant.

const (
	invalidToken = `Bearer realm="a2a", error="invalid_token"`
	cancelA5531  = `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"please cancel A-5531"}]}}`
)

var ordersReadCancel = []string{"orders:read", "orders:cancel"}

// call makes a request of the personal agent with method on op, the path
// after the brand's A2A base (message:send, tasks/{id}:cancel), under the
// delegation token. It returns the status, the WWW-Authenticate header and
// the personal-agent JWT it sent.
func (e *oauthEnv) call(method, op, delegation, body string) (code int, authenticate, paJWT string) {
	e.t.Helper()
	paJWT = e.jwt()
	req, err := http.NewRequest(method, e.base+"/"+op, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+paJWT)
	req.Header.Set("X-A2A-User-Delegation", "Bearer "+delegation)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header.Get("WWW-Authenticate"), paJWT
}

// endedGrant is a delegation token of a grant of orders:read and
// orders:cancel that has ended, and the grant.
type endedGrant struct {
	token string
	grant oauth.Grant
	// ended is how the refusal's reason says the grant ended.
	ended string
}

// reason is the reason a refusal of a request under the grant gives.
func (g endedGrant) reason() string {
	return "request under delegation grant " + g.grant.ID + " (scopes orders:read orders:cancel), which " + g.ended +
		": refused with 401 invalid_token before it ran"
}

// revokedGrant is a token of a grant that the User then revokes, at the
// clock's time.
func (e *oauthEnv) revokedGrant() endedGrant {
	e.t.Helper()
	at := e.deviceToken(ordersReadCancel, ordersReadCancel)["access_token"].(string)
	g, err := e.st.Grant(claimsOf(e.t, at).GrantID)
	if err != nil {
		e.t.Fatal(err)
	}
	revokedAt := e.clock()
	if err := brandlogin.RevokeGrant(e.st, "shop", "acct-48213", g.ID, revokedAt); err != nil {
		e.t.Fatal(err)
	}
	return endedGrant{token: at, grant: g, ended: "was revoked at " + revokedAt.UTC().Format(time.RFC3339)}
}

// expiredGrant is the last token of a grant, refreshed in the grant's
// last half hour so that it ends with the grant (oauth.NewDelegationClaims),
// with the clock moved a second past the grant's expiry: the grant is
// over, the token still within its leeway (oauth.DelegationLeeway).
func (e *oauthEnv) expiredGrant() endedGrant {
	e.t.Helper()
	tok := e.deviceToken(ordersReadCancel, ordersReadCancel)
	g, err := e.st.Grant(claimsOf(e.t, tok["access_token"].(string)).GrantID)
	if err != nil {
		e.t.Fatal(err)
	}
	e.advance(g.Expires.Sub(e.clock()) - 30*time.Minute)
	code, last, _ := e.post("/oauth/token", url.Values{"client_id": {e.sc.PA.ID}, "grant_type": {"refresh_token"},
		"refresh_token": {tok["refresh_token"].(string)}}, e.jwt())
	if code != 200 {
		e.t.Fatalf("refresh in the grant's last half hour: %d %v", code, last)
	}
	at := last["access_token"].(string)
	if c := claimsOf(e.t, at); c.GrantID != g.ID || !c.Expiry.Time().Equal(g.Expires.Truncate(time.Second)) {
		e.t.Fatalf("the refreshed token names grant %s and ends at %s, want grant %s ending with it at %s",
			c.GrantID, c.Expiry.Time(), g.ID, g.Expires)
	}
	e.advance(g.Expires.Sub(e.clock()) + time.Second)
	return endedGrant{token: at, grant: g, ended: "expired at " + g.Expires.UTC().Format(time.RFC3339)}
}

// checkRefusal fails the test unless got is the refusal of a request
// under g by the personal agent with the JWT paJWT, on tool and target,
// observed at at.
func (e *oauthEnv) checkRefusal(got *pipeline.Refusal, g endedGrant, paJWT, tool, target string, at time.Time) {
	e.t.Helper()
	var diffs []string
	field := func(name, got, want string) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s %q, want %q", name, got, want))
		}
	}
	field("principal", got.ClaimedPrincipal, "acct-48213")
	field("agent", got.ClaimedAgent, e.sc.PA.ID)
	field("request JWT", got.RequestJWT, paJWT)
	field("tool", got.Action.Tool, tool)
	field("target", got.Action.Target, target)
	field("reason", got.Reason, g.reason())
	field("delegation token", got.DelegationToken, g.token) // the ledger lists the refusal with the grant
	if !got.ObservedAt.Equal(at) {
		diffs = append(diffs, fmt.Sprintf("observed at %s, want %s", got.ObservedAt, at))
	}
	if len(diffs) > 0 {
		e.t.Fatalf("refusal: %s", strings.Join(diffs, "; "))
	}
}

// A request under the last token of a grant that has since expired is
// answered as one under a revoked grant is: 401 invalid_token before it
// runs, and a refusal on record naming the grant and when it expired. A
// second request within the minute adds none, and once the token is past
// its leeway it is a bad token like any other, not an attempt on record.
func TestARequestUnderAnExpiredGrantIsARefusalOnRecord(t *testing.T) {
	e := newOAuthEnv(t)
	g := e.expiredGrant()
	at := e.clock()
	if g.grant.Active(at) {
		t.Fatalf("grant %s is still active at %s (expires %s)", g.grant.ID, at, g.grant.Expires)
	}
	code, authn, pa := e.call(http.MethodPost, "message:send", g.token, cancelA5531)
	if code != 401 || authn != invalidToken {
		t.Fatalf("a request under an expired grant: %d %q, want 401 %q", code, authn, invalidToken)
	}
	items := e.outbox()
	if len(items) != 1 || items[0].Refusal == nil {
		t.Fatalf("outbox %+v, want the refusal alone", items)
	}
	e.checkRefusal(items[0].Refusal, g, pa, "message:send", "", at)
	if _, logged, status := e.counts(); logged != 0 || status == "cancelled" {
		t.Fatalf("the refused request kept %d action log entries, order status %q", logged, status)
	}

	e.advance(20 * time.Second) // the token still within its leeway
	if code, authn, _ := e.call(http.MethodPost, "message:send", g.token, cancelA5531); code != 401 || authn != invalidToken {
		t.Fatalf("a second request under an expired grant: %d %q", code, authn)
	}
	if n := len(e.refusals()); n != 1 {
		t.Fatalf("%d refusals on record for two requests within a minute, want 1", n)
	}

	e.advance(time.Minute) // endedGrantRecordEvery, the token past its leeway
	if code, authn, _ := e.call(http.MethodPost, "message:send", g.token, cancelA5531); code != 401 || authn != invalidToken {
		t.Fatalf("a request with the expired token: %d %q", code, authn)
	}
	if n := len(e.refusals()); n != 1 {
		t.Fatalf("%d refusals on record once the token no longer verifies, want 1", n)
	}
}

// A request on a task under an ended grant's token is on record with the
// operation as the refused action's tool and the task it names as its
// target, for every operation on a task the routes take; an operation
// that names no task has none.
func TestARequestOnATaskUnderAnEndedGrantIsARefusalOnRecord(t *testing.T) {
	ops := []struct {
		name, method, op string
		tool, target     string
	}{
		{"get", http.MethodGet, "tasks/t-1", "tasks", "t-1"},
		{"cancel", http.MethodPost, "tasks/t-1:cancel", "tasks:cancel", "t-1"},
		{"subscribe by POST", http.MethodPost, "tasks/t-1:subscribe", "tasks:subscribe", "t-1"},
		{"subscribe by GET", http.MethodGet, "tasks/t-1:subscribe", "tasks:subscribe", "t-1"},
		{"set push config", http.MethodPost, "tasks/t-1/pushNotificationConfigs", "tasks/pushNotificationConfigs", "t-1"},
		{"list push configs", http.MethodGet, "tasks/t-1/pushNotificationConfigs", "tasks/pushNotificationConfigs", "t-1"},
		{"get push config", http.MethodGet, "tasks/t-1/pushNotificationConfigs/c-1", "tasks/pushNotificationConfigs/c-1", "t-1"},
		{"delete push config", http.MethodDelete, "tasks/t-1/pushNotificationConfigs/c-1", "tasks/pushNotificationConfigs/c-1", "t-1"},
		{"list", http.MethodGet, "tasks", "tasks", ""},
		{"token endpoint", http.MethodPost, "oauth/token", "oauth/token", ""},
	}
	ends := []struct {
		name  string
		ended func(*oauthEnv) endedGrant
	}{
		{"revoked", (*oauthEnv).revokedGrant},
		{"expired", (*oauthEnv).expiredGrant},
	}
	for _, end := range ends {
		for _, c := range ops {
			t.Run(end.name+"/"+c.name, func(t *testing.T) {
				e := newOAuthEnv(t)
				g := end.ended(e)
				at := e.clock()
				code, authn, pa := e.call(c.method, c.op, g.token, "")
				if code != 401 || authn != invalidToken {
					t.Fatalf("%s %s under a grant that %s: %d %q, want 401 %q", c.method, c.op, g.ended, code, authn, invalidToken)
				}
				rs := e.refusals()
				if len(rs) != 1 {
					t.Fatalf("%d refusals on record, want 1: %+v", len(rs), rs)
				}
				e.checkRefusal(rs[0], g, pa, c.tool, c.target, at)
			})
		}
	}
}

// However often a personal agent sends a token of an ended grant, and on
// whichever operation, the grant leaves at most one refusal a minute on
// record: the minute counts from the last refusal on record, not from the
// last attempt, and each grant has its own.
func TestRequestsUnderAnEndedGrantAreOneRefusalAMinute(t *testing.T) {
	e := newOAuthEnv(t)
	a := e.revokedGrant()
	b := e.revokedGrant()
	if a.grant.ID == b.grant.ID {
		t.Fatalf("two device flows made one grant %s", a.grant.ID)
	}
	start := e.clock()
	steps := []struct {
		after  time.Duration // since start
		g      endedGrant
		method string
		op     string
		want   int // refusals on record after the request
	}{
		{0, a, http.MethodGet, "tasks/t-1", 1},
		{30 * time.Second, a, http.MethodPost, "tasks/t-1:cancel", 1},
		{59 * time.Second, a, http.MethodPost, "message:send", 1},
		{time.Minute, a, http.MethodPost, "tasks/t-1:cancel", 2},
		{90 * time.Second, a, http.MethodGet, "tasks/t-1", 2},
		{90 * time.Second, b, http.MethodGet, "tasks/t-2", 3},
		{119 * time.Second, a, http.MethodGet, "tasks/t-1", 3},
		{2 * time.Minute, a, http.MethodGet, "tasks/t-1", 4},
	}
	recorded := 0
	for _, s := range steps {
		e.advance(start.Add(s.after).Sub(e.clock()))
		body := ""
		if s.op == "message:send" {
			body = cancelA5531
		}
		if code, authn, _ := e.call(s.method, s.op, s.g.token, body); code != 401 || authn != invalidToken {
			t.Fatalf("%s %s at +%s: %d %q", s.method, s.op, s.after, code, authn)
		}
		rs := e.refusals()
		if len(rs) != s.want {
			t.Fatalf("%s %s under grant %s at +%s: %d refusals on record, want %d", s.method, s.op, s.g.grant.ID, s.after, len(rs), s.want)
		}
		if s.want > recorded {
			recorded = s.want
			if r := rs[len(rs)-1]; !r.ObservedAt.Equal(e.clock()) || !strings.Contains(r.Reason, s.g.grant.ID) {
				t.Fatalf("the refusal queued at +%s: observed at %s, reason %q", s.after, r.ObservedAt, r.Reason)
			}
		}
	}
}
