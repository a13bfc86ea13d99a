package console_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The playbook's worked scenario in a browser: a support lead signs in,
// finds order A-5531, opens a dispute, runs the drill and gets six passed
// pulls and the reply for the customer.
func TestSupportLeadAnswersTheDisputeInTheBrowser(t *testing.T) {
	e := newEnv(t, nil)
	row := e.playbook(t)
	ctx := browser(t)
	e.signIn(t, ctx, config.RoleSupport)
	if got := text(t, ctx, "who-name"); got != "support-key" {
		t.Fatalf("signed in as %q", got)
	}

	err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("q"), "A-5531"),
		chromedp.Click(chromedp.ID("search-btn")),
		chromedp.WaitVisible(chromedp.ID("matched")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, "matched"); !strings.Contains(got, "1 row for order A-5531") {
		t.Fatalf("search says %q", got)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS("a.row-link")),
		chromedp.WaitVisible(chromedp.ID("row-id")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, "row-id"); got != row.GetId() {
		t.Fatalf("row page shows %q, want %s", got, row.GetId())
	}
	if got := text(t, ctx, "row-status"); got != "authorized" {
		t.Fatalf("status %q", got)
	}
	if n, bad := count(t, ctx, "#checks li.check"), count(t, ctx, "#checks li.check.bad"); n < 9 || bad != 0 {
		t.Fatalf("%d checks listed (%d failed), want the nine, none failed", n, bad)
	}
	// The row can show before the page's deferred script has run; it runs
	// its DOMContentLoaded handlers, which add the local times, by the
	// time the document is complete.
	loaded(t, ctx, "row")
	if n := count(t, ctx, "time.utc + span.local"); n == 0 {
		t.Fatal("no local time beside the UTC times")
	}

	// Open the dispute.
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("dispute-choice"), "DISPUTE_STATUS_OPEN"),
		chromedp.SendKeys(chromedp.ID("dispute-note"), "customer: never approved the cancel"),
		chromedp.Click(chromedp.ID("dispute-add")),
		chromedp.WaitVisible(chromedp.ID("dispute-timeline")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, "dispute-status"); got != "open" {
		t.Fatalf("dispute status %q", got)
	}
	if ev := text(t, ctx, "dispute-timeline"); !strings.Contains(ev, "support-key") || !strings.Contains(ev, "never approved the cancel") {
		t.Fatalf("timeline %q", ev)
	}
	got, err := e.client.GetRow(as(config.RoleAuditor), &ledgerv1.GetRowRequest{Id: row.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if evs := got.GetRow().GetDisputeEvents(); len(evs) != 1 || evs[0].GetBy() != "support-key" || evs[0].GetStatus() != ledgerv1.DisputeStatus_DISPUTE_STATUS_OPEN {
		t.Fatalf("API dispute events %v", evs)
	}

	// Run the drill.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("run-drill")),
		chromedp.WaitVisible(chromedp.ID("reply")),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The reply's paragraphs show as the stored reply's line breaks once
	// the stylesheet applies.
	loaded(t, ctx, "drill report")
	if got := text(t, ctx, "score"); got != "6/6 passed" {
		t.Fatalf("score %q", got)
	}
	if n := count(t, ctx, `li.pull[data-passed="true"]`); n != 6 {
		t.Fatalf("%d passed pulls shown, want 6", n)
	}
	if n := count(t, ctx, `li.pull svg.bar rect.fill`); n != 6 {
		t.Fatalf("%d elapsed-time bars, want 6", n)
	}
	reply := text(t, ctx, "reply")
	for _, want := range []string{"13:07 UTC", "orders:read, orders:cancel", e.sc.PA.ID} {
		if !strings.Contains(reply, want) {
			t.Errorf("reply lacks %q: %s", want, reply)
		}
	}
	id := text(t, ctx, "report-id")
	rep, err := e.client.GetDrill(as(config.RoleAuditor), &ledgerv1.GetDrillRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetReport().GetReply() != reply || rep.GetReport().GetRunBy() != "support-key" {
		t.Fatalf("stored report %s: run by %q, reply %q; the page shows %q", id, rep.GetReport().GetRunBy(), rep.GetReport().GetReply(), reply)
	}
	if n := count(t, ctx, `button[data-copy="reply"]`); n != 1 {
		t.Fatal("no copy button for the reply")
	}

	// Every action is logged with the key's name.
	logs := e.logs.String()
	for _, action := range []string{"sign in", "search", "view row", "append dispute event", "run drill", "view drill report"} {
		if !strings.Contains(logs, `action="`+action+`" key=support-key`) && !strings.Contains(logs, "action="+action+" key=support-key") {
			t.Errorf("no log line for %q by support-key in:\n%s", action, logs)
		}
	}
	if strings.Contains(logs, keys[config.RoleSupport]) {
		t.Error("the key itself was logged")
	}

	// Sign out: the session is gone.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("sign-out")),
		chromedp.WaitVisible(chromedp.ID("signin-notice")),
		chromedp.Navigate(e.web.URL+"/console/rows/"+row.GetId()),
		chromedp.WaitVisible(chromedp.ID("key")),
	)
	if err != nil {
		t.Fatal(err)
	}
}

// An auditor reads the same rows without dispute or drill buttons, exports
// a grant's rows as CSV and JSON that match the API, and a forged dispute
// or drill post with a valid CSRF token is refused by the API.
func TestAuditorExportsAGrantAndCannotDispute(t *testing.T) {
	e := newEnv(t, nil)
	row := e.playbook(t)
	at := time.Date(2026, 10, 7, 13, 40, 0, 0, time.UTC)
	e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5532", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at}))
	e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-10977", GrantID: "a2agrant_OTHER", Target: "B-1", At: at}))
	ctx := browser(t)
	e.signIn(t, ctx, config.RoleAuditor)

	err := chromedp.Do(ctx,
		chromedp.Navigate(e.web.URL+"/console/rows/"+row.GetId()),
		chromedp.WaitVisible(chromedp.ID("row-id")),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, sel := range []string{"#dispute-form", "#dispute-add", "#run-drill", `a[href="/console/drill"]`} {
		if n := count(t, ctx, sel); n != 0 {
			t.Errorf("auditor sees %s", sel)
		}
	}
	if n := count(t, ctx, "#verify"); n != 1 {
		t.Error("auditor has no verify button")
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("verify")),
		chromedp.WaitVisible(chromedp.ID("verify-result")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, "verify-same"); got != "same result as at write time" {
		t.Fatalf("verify says %q", got)
	}

	// The grant page and its exports.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("row-grant")),
		chromedp.WaitVisible(chromedp.ID("grant-rows")),
	)
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.client.GetGrant(as(config.RoleAuditor), &ledgerv1.GetGrantRequest{GrantId: "a2agrant_7Q2F"})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, ctx, "#grant-rows tbody tr"); n != len(g.GetRows()) || n != 2 {
		t.Fatalf("grant page shows %d rows, API has %d", n, len(g.GetRows()))
	}
	csvText := fetch(t, ctx, "export-csv")
	recs, err := csv.NewReader(strings.NewReader(csvText)).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v\n%s", err, csvText)
	}
	if len(recs) != len(g.GetRows())+1 || strings.Join(recs[0], ",") != "rowId,status,issuedAt,principal,agentPlatform,actions,scopesUsed,retentionClass,retainUntil,disputeStatus,writerOnlyTargets,agentClaimed,principalClaimed" {
		t.Fatalf("CSV has %d records, header %v", len(recs), recs[0])
	}
	for i, r := range g.GetRows() {
		rec := recs[i+1]
		want := []string{r.GetId(), strings.ToLower(strings.TrimPrefix(r.GetStatus().String(), "ROW_STATUS_")), r.GetIssuedAt().AsTime().Format(time.RFC3339), r.GetPrincipal(), r.GetAgent().GetPlatform(),
			r.GetActions()[0].GetTool() + " " + r.GetActions()[0].GetTarget(), strings.Join(r.GetScopesUsed(), " "),
			strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(r.GetRetentionClass().String(), "RETENTION_CLASS_")), "_", " "),
			r.GetRetainUntil().AsTime().Format(time.RFC3339), "none", "", "false", "false"}
		if strings.Join(rec, "|") != strings.Join(want, "|") {
			t.Errorf("CSV row %d:\n got %q\nwant %q", i, rec, want)
		}
	}
	var exp struct {
		GrantID string `json:"grantId"`
		Rows    []struct {
			RowID  string `json:"rowId"`
			Status string `json:"status"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(fetch(t, ctx, "export-json")), &exp); err != nil {
		t.Fatal(err)
	}
	if exp.GrantID != "a2agrant_7Q2F" || len(exp.Rows) != 2 || exp.Rows[0].RowID != g.GetRows()[0].GetId() {
		t.Fatalf("JSON export %+v", exp)
	}

	// A forged dispute post and a forged drill post, with the session's
	// valid CSRF token: the API refuses both, nothing is written.
	for _, forged := range []struct{ path, body string }{
		{"/console/rows/" + row.GetId() + "/disputes", "status=DISPUTE_STATUS_RESOLVED_CUSTOMER_AUTHORIZED&note=forged"},
		{"/console/drill", "row=" + row.GetId()},
	} {
		js := `(async () => { const t = document.querySelector('input[name=csrf]').value;
			const r = await fetch(` + jsString(forged.path) + `, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
				body: 'csrf=' + encodeURIComponent(t) + '&' + ` + jsString(forged.body) + `});
			return r.status + ' ' + (await r.text()).includes('Not allowed for your key'); })()`
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if got != "403 true" {
			t.Errorf("forged post to %s: %s", forged.path, got)
		}
	}
	after, err := e.client.GetRow(as(config.RoleAuditor), &ledgerv1.GetRowRequest{Id: row.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after.GetRow().GetDisputeEvents()); n != 0 {
		t.Fatalf("a forged post appended %d dispute events", n)
	}
	drills, err := e.client.ListDrills(as(config.RoleAuditor), &ledgerv1.ListDrillsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(drills.GetReports()); n != 0 {
		t.Fatalf("a forged post ran %d drills", n)
	}
	if logs := e.logs.String(); !strings.Contains(logs, `key=auditor-key`) || !strings.Contains(logs, "outcome=PermissionDenied") {
		t.Fatalf("refusals not logged with the key's name:\n%s", logs)
	}
}

// fetch downloads the href of the link with id through the browser's
// session and returns the body.
func fetch(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	js := `(async () => { const r = await fetch(document.getElementById(` + jsString(id) + `).href); return r.status + '\n' + await r.text(); })()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ := strings.Cut(got, "\n")
	if code != "200" {
		t.Fatalf("download #%s = %s: %s", id, code, body)
	}
	return body
}

// A bad key gets a clear message on the sign-in page, and so does a key
// whose role cannot read.
func TestBadKeyShowsAClearError(t *testing.T) {
	e := newEnv(t, nil)
	ctx := browser(t)
	for _, c := range []struct{ key, want string }{
		{"not-a-key", "This ledger does not know that key"},
		{keys[config.RoleWriter], "Key writer-key has the role writer, which cannot read the ledger"},
	} {
		err := chromedp.Do(ctx,
			chromedp.Navigate(e.web.URL+"/console/signin"),
			chromedp.WaitVisible(chromedp.ID("key")),
			chromedp.SendKeys(chromedp.ID("key"), c.key),
			chromedp.Click(chromedp.ID("sign-in")),
			chromedp.WaitVisible(chromedp.ID("signin-error")),
		)
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, ctx, "signin-error"); !strings.Contains(got, c.want) {
			t.Errorf("sign-in with %q says %q", c.key, got)
		}
		if n := count(t, ctx, "#who-name"); n != 0 {
			t.Errorf("signed in with %q", c.key)
		}
	}
}

// A post without the session's CSRF token (or with another) is refused and
// nothing is written; so is a sign-in without the form's token and a
// cross-origin post.
func TestPostWithoutCSRFTokenIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	row := e.playbook(t)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	path := "/console/rows/" + row.GetId() + "/disputes"
	for name, form := range map[string]url.Values{
		"no token":    {"status": {"DISPUTE_STATUS_OPEN"}, "note": {"x"}},
		"wrong token": {"status": {"DISPUTE_STATUS_OPEN"}, "note": {"x"}, "csrf": {"AAAA" + c.csrf[4:]}},
	} {
		resp, body := c.post(t, path, form)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "security token") {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
	}
	resp, body := c.post(t, path, url.Values{"status": {"DISPUTE_STATUS_OPEN"}, "note": {"x"}, "csrf": {c.csrf}},
		"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "the form was sent from another site") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("cross-origin post with the token = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	got, err := e.client.GetRow(as(config.RoleAuditor), &ledgerv1.GetRowRequest{Id: row.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.GetRow().GetDisputeEvents()); n != 0 {
		t.Fatalf("%d dispute events appended without a token", n)
	}
	// With the token it works.
	resp, _ = c.post(t, path, url.Values{"status": {"DISPUTE_STATUS_OPEN"}, "note": {"x"}, "csrf": {c.csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("post with the token = %d", resp.StatusCode)
	}
	if !strings.Contains(e.logs.String(), `action="refused: no valid CSRF token" key=support-key`) {
		t.Errorf("refusal not logged:\n%s", e.logs.String())
	}

	// Sign-in without the form's token.
	c2 := e.newWebClient(t)
	resp, body = c2.post(t, "/console/signin", url.Values{"key": {keys[config.RoleSupport]}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not sent from this page") {
		t.Fatalf("sign-in without a token = %d", resp.StatusCode)
	}
	if len(resp.Cookies()) > 0 {
		for _, ck := range resp.Cookies() {
			if ck.Name == "pactledger_console" && ck.Value != "" {
				t.Fatal("a session was started without the sign-in token")
			}
		}
	}
}
