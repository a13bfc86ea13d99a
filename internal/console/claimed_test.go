package console_test

import (
	"encoding/csv"
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A refusal's agent platform that no signature vouches for reads
// "claimed" after it in a search's rows, on its page and on its grant's
// page, whose exports say so in a column of their own; a receipt's, and
// a refusal's whose request JWT verified, are not marked.
func TestARefusalsClaimedAgentIsMarked(t *testing.T) {
	e := newEnv(t, nil)
	receipt := e.playbook(t)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	r := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", At: at})
	refuse := func(req *ledgerv1.AppendRefusalRequest) *ledgerv1.Row {
		t.Helper()
		req.ClaimedPrincipal, req.Reason, req.DelegationToken = "acct-48213", "over the grant's limits", r.DelegationToken
		req.Action, req.ObservedAt = &ledgerv1.RefusalAction{Tool: "cancel_order", Target: "A-5531"}, timestamppb.New(at)
		resp, err := e.client.AppendRefusal(as(config.RoleWriter), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetRow()
	}
	claimed := refuse(&ledgerv1.AppendRefusalRequest{ClaimedAgent: "https://agent.example"})
	signed := refuse(&ledgerv1.AppendRefusalRequest{RequestJwt: r.RequestJWT})
	if claimed.GetGrantId() == "" || claimed.GetGrantId() != signed.GetGrantId() || signed.GetAgent().GetPlatform() == "" {
		t.Fatalf("the refusals: %v\n%v", claimed, signed)
	}
	grant := claimed.GetGrantId()
	const mark = `<span class="target-source writer" title="A refusal's agent platform that no signature vouches for: the name the writer claimed">claimed</span>`
	c := e.newWebClient(t)
	c.signIn(t, config.RoleAuditor)

	// rowOf is the part of a page's table that is row id's.
	rowOf := func(body, id string) string {
		i := strings.Index(body, id)
		if i < 0 {
			return ""
		}
		start := strings.LastIndex(body[:i], "<tr")
		end := strings.Index(body[i:], "</tr>")
		if start < 0 || end < 0 {
			return ""
		}
		return body[start : i+end]
	}
	for _, page := range []string{"/console/search?by=principal&q=acct-48213", "/console/grant?id=" + grant} {
		code, body := c.get(t, page)
		body = html.UnescapeString(body)
		if code != http.StatusOK || strings.Count(body, mark) != 1 || !strings.Contains(rowOf(body, claimed.GetId()), "https://agent.example"+mark) {
			t.Errorf("%s = %d; want one mark, after the claimed agent's platform:\n%s", page, code, body)
		}
	}
	for _, tc := range []struct {
		row  *ledgerv1.Row
		want bool
	}{{claimed, true}, {signed, false}, {receipt, false}} {
		code, body := c.get(t, "/console/rows/"+tc.row.GetId())
		if got := strings.Contains(html.UnescapeString(body), mark); code != http.StatusOK || got != tc.want {
			t.Errorf("row page of %s (%s) = %d: marked %v, want %v", tc.row.GetId()[:12], tc.row.GetAgent().GetPlatform(), code, got, tc.want)
		}
	}

	code, body := c.get(t, "/console/grant/export?id="+grant+"&format=csv")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if code != http.StatusOK || err != nil || len(recs) < 3 || recs[0][11] != "agentClaimed" {
		t.Fatalf("CSV export = %d (%v):\n%s", code, err, body)
	}
	for _, rec := range recs[1:] {
		if want := map[bool]string{true: "true", false: "false"}[rec[0] == claimed.GetId()]; rec[11] != want {
			t.Errorf("CSV row %q: agentClaimed %q, want %q", rec, rec[11], want)
		}
	}
	code, body = c.get(t, "/console/grant/export?id="+grant+"&format=json")
	var exp struct {
		Rows []struct {
			RowID        string `json:"rowId"`
			AgentClaimed *bool  `json:"agentClaimed"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &exp); code != http.StatusOK || err != nil || len(exp.Rows) < 3 {
		t.Fatalf("JSON export = %d (%v):\n%s", code, err, body)
	}
	for _, r := range exp.Rows {
		if r.AgentClaimed == nil || *r.AgentClaimed != (r.RowID == claimed.GetId()) {
			t.Errorf("JSON row %s: agentClaimed %v", r.RowID, r.AgentClaimed)
		}
	}
}
