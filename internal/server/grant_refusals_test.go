package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// sendRaw sends one message under the delegation token and returns the
// status and body.
func (s *shop) sendRaw(t testing.TB, at, id, text string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []map[string]any{{"text": text}}}})
	req, _ := http.NewRequest("POST", s.base+"/message:send", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.paJWT())
	req.Header.Set("X-A2A-User-Delegation", "Bearer "+at)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// The refusals the Provider records under a delegation token are the
// grant's rows in the ledger: the step-up of a turn that needs a scope the
// grant lacks, and the request of an agent that keeps using the token
// after the User revoked the grant (the playbook's signal of an agent
// acting after revocation). GetGrant lists them with the grant's receipt,
// and each keeps the token the agent sent as evidence.
func TestRefusalsUnderAGrantAreTheGrantsRows(t *testing.T) {
	s := newShop(t)
	at := s.token(t)
	grant := pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "cancel order A-5531")
	if code, body := s.sendRaw(t, at, "m2", "please refund order A-88213"); code != 200 || !strings.Contains(body, "TASK_STATE_AUTH_REQUIRED") {
		t.Fatalf("a turn beyond the grant: %d %s, want a step-up task", code, body)
	}
	if err := s.p.RevokeGrant("shop", "acct-48213", grant); err != nil {
		t.Fatal(err)
	}
	// The agent keeps acting under the revoked grant's token.
	if code, body := s.sendRaw(t, at, "m3", "cancel order A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("a request under the revoked grant: %d %s", code, body)
	}
	waitDepth(t, s, 0, 15*time.Second)

	var view struct {
		GrantID    string
		Principals []string
		Rows       []Row
		RowCount   int
		Revocation struct{ RevokedAt string }
	}
	if code := s.call(t, "GET", "/v1/grants/"+grant, "support", nil, &view); code != 200 {
		t.Fatalf("GetGrant: %d", code)
	}
	var refusals []Row
	for _, r := range view.Rows {
		if r.Kind == "ROW_KIND_REFUSAL" {
			refusals = append(refusals, r)
		}
	}
	if view.RowCount != 3 || len(refusals) != 2 {
		var kinds []string
		for _, r := range view.Rows {
			kinds = append(kinds, r.Kind+" "+r.Status)
		}
		t.Fatalf("grant %s lists %d rows %v, want its receipt and its two refusals", grant, view.RowCount, kinds)
	}
	if !slices.Equal(view.Principals, []string{"acct-48213"}) {
		t.Fatalf("grant principals %v", view.Principals)
	}
	for _, r := range refusals {
		if r.GrantID != grant || r.Principal != "acct-48213" || r.Brand != s.base || r.Status != "ROW_STATUS_UNAUTHORIZED" ||
			r.check("delegation_token").Result != "CHECK_RESULT_PASS" || r.check("bindings").Result != "CHECK_RESULT_PASS" || r.BrandKey.JwksSnapshot == "" ||
			r.check("request_signature").Result != "CHECK_RESULT_PASS" || r.Agent.Platform != s.sc.PA.ID {
			t.Fatalf("refusal row %+v", r)
		}
		var ev struct{ DelegationToken string }
		if code := s.call(t, "GET", "/v1/rows/"+r.ID+"/evidence", "support", nil, &ev); code != 200 || ev.DelegationToken != verifier.Canonical(at) {
			t.Fatalf("the refusal's evidence: %d, token %q, want the token the agent sent", code, ev.DelegationToken)
		}
	}
	// Newest first: the request after the revocation, then the step-up.
	after, stepUp := refusals[0], refusals[1]
	if !strings.Contains(after.check("receipt_signature").Detail, "revoked") || after.check("grant_not_revoked").Result != "CHECK_RESULT_FAIL" {
		t.Fatalf("the refusal after the revocation %+v, want its grant_not_revoked check failed", after)
	}
	if !strings.Contains(stepUp.check("receipt_signature").Detail, "step-up") || stepUp.check("grant_not_revoked").Result != "CHECK_RESULT_PASS" {
		t.Fatalf("the step-up's refusal %+v, want it before the revocation", stepUp)
	}
}
