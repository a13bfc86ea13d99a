package server_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/testseam"
)

// openAgent is a personal agent no one registered: its issuer serves
// OpenID Connect discovery naming itself and its key set.
type openAgent struct {
	pacttest.Party
	disc *httptest.Server
}

func newOpenAgent(t *testing.T) *openAgent {
	t.Helper()
	k := pacttest.MustKey("open-2026-10", jose.ES256)
	a := &openAgent{Party: pacttest.Party{Key: k, JWKS: pacttest.NewJWKS(k)}}
	t.Cleanup(a.JWKS.Close)
	a.disc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + a.disc.URL + `","jwks_uri":"` + a.JWKS.URL() + `"}`))
	}))
	t.Cleanup(a.disc.Close)
	a.ID = a.disc.URL
	return a
}

// shopWithOpenAgent is a shop whose Provider takes open agents
// (provider.openAgents), with the open agent a acting in it: s.sc.PA is a
// until t ends.
func shopWithOpenAgent(t *testing.T) (*shop, *openAgent) {
	t.Helper()
	// The open agents' addresses are on loopback here: a seam of the
	// tests, which no configuration reaches.
	testseam.SetCallersOnLoopback(t)
	a := newOpenAgent(t)
	s := newShop(t, func(c *config.Config) { c.Provider.OpenAgents = true })
	registered := s.sc.PA
	s.sc.PA = a.Party
	t.Cleanup(func() { s.sc.PA = registered })
	return s, a
}

// Under provider.openAgents the embedded Provider grants a personal agent
// no one registered and serves its turns; the ledger checks that agent's
// request JWTs as the Provider did, on the word of the Provider's brand
// that granted it, and keeps the key set it checked with. So the
// agent's receipt is a row whose checks all pass (within_limits is
// skipped: the Provider posts no limits), its refusal (a step-up)
// a row whose request_signature passes, the dispute drill passes, and a
// re-verification after the agent replaced its key still passes from the
// snapshot.
func TestAnOpenAgentsTurnsAreVerifiedRows(t *testing.T) {
	s, a := shopWithOpenAgent(t)
	at := s.token(t)
	grant := pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "cancel order A-5531")
	if code, body := s.sendRaw(t, at, "m2", "please refund order A-88213"); code != 200 || !strings.Contains(body, "TASK_STATE_AUTH_REQUIRED") {
		t.Fatalf("a turn beyond the grant: %d %s, want a step-up task", code, body)
	}
	waitDepth(t, s, 0, 15*time.Second)

	var view struct{ Rows []Row }
	if code := s.call(t, "GET", "/v1/grants/"+grant, "support", nil, &view); code != 200 {
		t.Fatalf("GetGrant: %d", code)
	}
	var receipt, refusal *Row
	for i, r := range view.Rows {
		switch r.Kind {
		case "ROW_KIND_RECEIPT":
			receipt = &view.Rows[i]
		case "ROW_KIND_REFUSAL":
			refusal = &view.Rows[i]
		}
	}
	if receipt == nil || refusal == nil || len(view.Rows) != 2 {
		t.Fatalf("grant %s lists %+v, want its receipt and its refusal", grant, view.Rows)
	}
	if receipt.Status != "ROW_STATUS_AUTHORIZED" || receipt.Agent.Platform != a.ID || receipt.Agent.JwksSnapshot == "" {
		t.Fatalf("the open agent's receipt row %+v", *receipt)
	}
	for _, c := range receipt.Verifier.Checks {
		if c.Result == "CHECK_RESULT_FAIL" || c.Result != "CHECK_RESULT_PASS" && c.Name != "within_limits" {
			t.Errorf("the open agent's receipt row: %s %s (%s)", c.Name, c.Result, c.Detail)
		}
	}
	if refusal.check("request_signature").Result != "CHECK_RESULT_PASS" || refusal.check("bindings").Result != "CHECK_RESULT_PASS" ||
		refusal.check("delegation_token").Result != "CHECK_RESULT_PASS" || refusal.Agent.JwksSnapshot != receipt.Agent.JwksSnapshot {
		t.Fatalf("the open agent's refusal row %+v", *refusal)
	}
	var snap struct{ Jwks []byte }
	if code := s.call(t, "GET", "/v1/jwks-snapshots/"+receipt.Agent.JwksSnapshot, "auditor", nil, &snap); code != 200 || !bytes.Equal(snap.Jwks, a.JWKS.Body()) {
		t.Fatalf("the agent's snapshot: %d %q, want the set it published %q", code, snap.Jwks, a.JWKS.Body())
	}

	var run struct{ Report drillReport }
	if code := s.call(t, "POST", "/v1/drills", "support", map[string]any{"target": "A-5531", "principal": "acct-48213"}, &run); code != 200 {
		t.Fatalf("RunDrill = %d", code)
	}
	if d := run.Report; d.ChecksTotal == 0 || d.ChecksPassed != d.ChecksTotal {
		for _, p := range d.Pulls {
			if !p.Passed {
				t.Errorf("%s failed: %s", p.Name, p.Detail)
			}
		}
		t.Fatalf("the drill of the open agent's action passed %d of %d checks: %s", d.ChecksPassed, d.ChecksTotal, d.Reply)
	}

	// The agent replaces its key: its set no longer holds the one its
	// recorded request JWTs were signed with.
	k2 := pacttest.MustKey("open-2026-11", jose.ES256)
	a.JWKS.Set(k2)
	s.sc.PA.Key = k2
	s.send(t, at, "m3", "what is the status of order A-88213?")
	waitDepth(t, s, 0, 15*time.Second)
	for _, r := range []*Row{receipt, refusal} {
		var v struct {
			Same        bool
			Differences string
		}
		if code := s.call(t, "POST", "/v1/rows/"+r.ID+":verify", "auditor", map[string]any{}, &v); code != 200 || !v.Same {
			t.Fatalf("re-verifying the %s row after the agent's key changed: %d %+v", r.Kind, code, v)
		}
	}
	var rows struct{ Rows []Row }
	s.call(t, "GET", "/v1/rows?target=A-88213", "support", nil, &rows)
	var read *Row
	for i, r := range rows.Rows {
		if r.Kind == "ROW_KIND_RECEIPT" {
			read = &rows.Rows[i]
		}
	}
	if read == nil || read.Status != "ROW_STATUS_AUTHORIZED" || read.Agent.RequestJwtKid != k2.Public().KeyID || read.Agent.JwksSnapshot == receipt.Agent.JwksSnapshot {
		t.Fatalf("the turn under the agent's new key: %+v", rows.Rows)
	}
}

// The ledger takes an open agent only on the word of the Provider's own
// brands: a receipt of another trusted brand that names the same agent,
// its token signed by that brand for it, is checked against the registered
// agents only, and its request_signature fails.
func TestAnOpenAgentIsTakenOnlyUnderTheProvidersBrands(t *testing.T) {
	s, _ := shopWithOpenAgent(t)
	s.send(t, s.token(t), "m1", "cancel order A-5531") // the Provider took the agent
	waitDepth(t, s, 0, 15*time.Second)
	r := s.sc.Mint(pacttest.Spec{Target: "A-5532", At: time.Now().Add(-time.Minute)})
	var rep appendReply
	if code := s.call(t, "POST", "/v1/receipts", "writer", post(r), &rep); code != 200 {
		t.Fatalf("append: %d", code)
	}
	if c := rep.Row.check("request_signature"); rep.Row.Status != "ROW_STATUS_UNAUTHORIZED" || c.Result != "CHECK_RESULT_FAIL" || !strings.Contains(c.Detail, "not registered") ||
		rep.Row.check("delegation_token").Result != "CHECK_RESULT_PASS" || rep.Row.Agent.JwksSnapshot != "" {
		t.Fatalf("another brand's receipt of the open agent: %+v", rep.Row)
	}
}
