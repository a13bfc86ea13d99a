package console_test

import (
	"encoding/csv"
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The row page says under each target what vouches for it: the signed
// args for the pipeline's post of a receipt, marked as a warning the
// action log alone for a real receipt a writer posted with its action
// filed under another order.
func TestRowPageSaysWhereATargetComesFrom(t *testing.T) {
	e := newEnv(t, nil)
	signed, movedRow := signedAndMoved(t, e)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	for _, tc := range []struct {
		id, want, not string
	}{
		{signed.GetId(), `<span class="target-source">named in the signed args</span>`, "target-source writer"},
		{movedRow.GetId(), `<span class="target-source writer">the action log's alone — the signed args do not name it</span>`, "named in the signed args"},
	} {
		code, body := c.get(t, "/console/rows/"+tc.id)
		body = html.UnescapeString(body)
		if code != http.StatusOK || !strings.Contains(body, tc.want) || strings.Contains(body, tc.not) {
			t.Errorf("row page %s = %d; want %q, not %q:\n%s", tc.id[:12], code, tc.want, tc.not, body)
		}
	}
}

// A search by order marks each target that is the writer's word alone,
// so a lead reading the list sees which rows the customer's agent did
// not file under the order; a target the signed args name is not marked.
func TestSearchMarksATargetTheWriterAloneGives(t *testing.T) {
	e := newEnv(t, nil)
	e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "B-8888"}))
	moved := e.sc.Mint(pacttest.Spec{User: "acct-30011", Target: "A-6000"})
	moved.Actions[0].Target = "B-8888"
	e.record(t, moved)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	code, body := c.get(t, "/console/search?by=target&q=B-8888")
	body = html.UnescapeString(body)
	const mark = `<span class="target-source writer" title="B-8888: the action log's alone — the signed args do not name it">the writer's word alone</span>`
	if code != http.StatusOK || strings.Count(body, mark) != 1 || strings.Count(body, "<tr>") != 3 {
		t.Errorf("search for B-8888 = %d; want two rows and one mark %q:\n%s", code, mark, body)
	}
	// The marked row is the one the writer moved.
	i := strings.Index(body, mark)
	if row := body[strings.LastIndex(body[:i], "<tr>"):i]; i < 0 || !strings.Contains(row, "acct-30011") {
		t.Errorf("the mark is not on acct-30011's row:\n%s", body)
	}
}

// The grant page marks each target that is the writer's word alone, as
// the search does, so an auditor reading a grant's rows sees which of
// them the customer's agent did not file under their order.
func TestGrantPageMarksATargetTheWriterAloneGives(t *testing.T) {
	e := newEnv(t, nil)
	signed, movedRow := signedAndMoved(t, e)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleAuditor)
	code, body := c.get(t, "/console/grant?id=a2agrant_7Q2F")
	body = html.UnescapeString(body)
	const mark = `<span class="target-source writer" title="B-8888: the action log's alone — the signed args do not name it">the writer's word alone</span>`
	if code != http.StatusOK || strings.Count(body, mark) != 1 {
		t.Fatalf("grant page = %d; want one mark %q:\n%s", code, mark, body)
	}
	i := strings.Index(body, mark)
	row := body[strings.LastIndex(body[:i], "<tr "):i]
	if !strings.Contains(row, `data-row="`+movedRow.GetId()+`"`) || !strings.Contains(row, "cancel_order B-8888") {
		t.Errorf("the mark is not after B-8888 on the moved row:\n%s", row)
	}
	if j := strings.Index(body, `data-row="`+signed.GetId()+`"`); j < 0 || !strings.Contains(body[j:], "cancel_order A-5531</") {
		t.Errorf("the signed row does not list cancel_order A-5531 unmarked:\n%s", body)
	}
}

// The grant's CSV and JSON exports name, in a column after those the
// page shows, the targets of each row that are the writer's word alone,
// each once; the columns before it are as they were.
func TestGrantExportNamesTheTargetsTheWriterAloneGives(t *testing.T) {
	e := newEnv(t, nil)
	signed, movedRow := signedAndMoved(t, e)
	want := map[string]string{signed.GetId(): "", movedRow.GetId(): "B-8888"}
	c := e.newWebClient(t)
	c.signIn(t, config.RoleAuditor)

	code, body := c.get(t, "/console/grant/export?id=a2agrant_7Q2F&format=csv")
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if code != http.StatusOK || err != nil || len(recs) != 3 {
		t.Fatalf("CSV export = %d (%v):\n%s", code, err, body)
	}
	const header = "rowId,status,issuedAt,principal,agentPlatform,actions,scopesUsed,retentionClass,retainUntil,disputeStatus,writerOnlyTargets,agentClaimed,principalClaimed"
	if got := strings.Join(recs[0], ","); got != header {
		t.Errorf("CSV header %s; want %s", got, header)
	}
	for _, rec := range recs[1:] {
		if w, ok := want[rec[0]]; !ok || len(rec) != 13 || rec[10] != w {
			t.Errorf("CSV row %q: want its writerOnlyTargets column %q", rec, w)
		}
	}

	code, body = c.get(t, "/console/grant/export?id=a2agrant_7Q2F&format=json")
	var exp struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(body), &exp); code != http.StatusOK || err != nil || len(exp.Rows) != 2 {
		t.Fatalf("JSON export = %d (%v):\n%s", code, err, body)
	}
	for _, r := range exp.Rows {
		if w := want[r["rowId"].(string)]; r["writerOnlyTargets"] != w || r["actions"] == nil {
			t.Errorf("JSON row %v: want writerOnlyTargets %q", r, w)
		}
	}
}

// signedAndMoved records two receipts of acct-48213's under its grant:
// one filed under A-5531 as its signed args name it, the other, whose
// signed args name A-6000, filed under B-8888 by the writer.
func signedAndMoved(t *testing.T, e *env) (signed, moved *ledgerv1.Row) {
	t.Helper()
	signed = e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	m := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-6000"})
	m.Actions[0].Target = "B-8888"
	return signed, e.record(t, m)
}
