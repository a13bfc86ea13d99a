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

// An agent platform that no signature vouches for reads "claimed" after
// it in a search's rows, on its page and on its grant's page, whose
// exports say so in a column of their own: a refusal's without a
// verified request JWT, and a forged receipt's, whose customer is marked
// too. A receipt's whose signature verified, and a refusal's whose
// request JWT verified, are not marked.
func TestAClaimedAgentIsMarked(t *testing.T) {
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
	f := e.sc.Mint(pacttest.Spec{User: "acct-99999", Target: "A-5531", At: at.Add(time.Second)})
	f.ReceiptJWS = pacttest.TamperSignature(f.ReceiptJWS)
	forged := e.record(t, f)
	if forged.GetStatus() != ledgerv1.RowStatus_ROW_STATUS_UNAUTHORIZED || forged.GetGrantId() != grant {
		t.Fatalf("the forged receipt: %v", forged)
	}
	const mark = `<span class="target-source writer" title="No signature vouches for this agent platform: the name the writer claimed">claimed</span>`
	const customerMark = `<span class="target-source writer" title="No signature vouches for this customer: the receipt's signature failed, so it is the writer's word">claimed</span>`
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
	for page, marks := range map[string]int{"/console/search?by=principal&q=acct-48213": 1, "/console/grant?id=" + grant: 2} {
		code, body := c.get(t, page)
		body = html.UnescapeString(body)
		if code != http.StatusOK || strings.Count(body, mark) != marks || !strings.Contains(rowOf(body, claimed.GetId()), "https://agent.example"+mark) {
			t.Errorf("%s = %d; want %d marks, one after the claimed agent's platform:\n%s", page, code, marks, body)
		}
	}
	for _, page := range []string{"/console/search?by=principal&q=acct-99999", "/console/grant?id=" + grant} {
		code, body := c.get(t, page)
		row := rowOf(html.UnescapeString(body), forged.GetId())
		if code != http.StatusOK || !strings.Contains(row, "acct-99999</a>"+customerMark) && !strings.Contains(row, "acct-99999"+customerMark) || !strings.Contains(row, forged.GetAgent().GetPlatform()+mark) {
			t.Errorf("%s = %d; want the forged receipt's customer and agent platform marked:\n%s", page, code, row)
		}
	}
	for _, tc := range []struct {
		row            *ledgerv1.Row
		want, customer bool
	}{{claimed, true, false}, {signed, false, false}, {receipt, false, false}, {forged, true, true}} {
		code, body := c.get(t, "/console/rows/"+tc.row.GetId())
		body = html.UnescapeString(body)
		if got, cust := strings.Contains(body, mark), strings.Contains(body, customerMark); code != http.StatusOK || got != tc.want || cust != tc.customer {
			t.Errorf("row page of %s (%s) = %d: agent marked %v, customer %v; want %v, %v", tc.row.GetId()[:12], tc.row.GetAgent().GetPlatform(), code, got, cust, tc.want, tc.customer)
		}
	}

	code, body := c.get(t, "/console/grant/export?id="+grant+"&format=csv")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if code != http.StatusOK || err != nil || len(recs) < 4 || recs[0][11] != "agentClaimed" || recs[0][12] != "principalClaimed" {
		t.Fatalf("CSV export = %d (%v):\n%s", code, err, body)
	}
	word := map[bool]string{true: "true", false: "false"}
	for _, rec := range recs[1:] {
		if want := word[rec[0] == claimed.GetId() || rec[0] == forged.GetId()]; rec[11] != want {
			t.Errorf("CSV row %q: agentClaimed %q, want %q", rec, rec[11], want)
		}
		if want := word[rec[0] == forged.GetId()]; rec[12] != want {
			t.Errorf("CSV row %q: principalClaimed %q, want %q", rec, rec[12], want)
		}
	}
	code, body = c.get(t, "/console/grant/export?id="+grant+"&format=json")
	var exp struct {
		Rows []struct {
			RowID            string `json:"rowId"`
			AgentClaimed     *bool  `json:"agentClaimed"`
			PrincipalClaimed *bool  `json:"principalClaimed"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &exp); code != http.StatusOK || err != nil || len(exp.Rows) < 3 {
		t.Fatalf("JSON export = %d (%v):\n%s", code, err, body)
	}
	for _, r := range exp.Rows {
		if r.AgentClaimed == nil || *r.AgentClaimed != (r.RowID == claimed.GetId() || r.RowID == forged.GetId()) {
			t.Errorf("JSON row %s: agentClaimed %v", r.RowID, r.AgentClaimed)
		}
		if r.PrincipalClaimed == nil || *r.PrincipalClaimed != (r.RowID == forged.GetId()) {
			t.Errorf("JSON row %s: principalClaimed %v", r.RowID, r.PrincipalClaimed)
		}
	}
}
