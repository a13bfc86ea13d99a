package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/firefox"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// ff drives one Firefox tab for a test, failing it on any error.
type ff struct {
	t   *testing.T
	ctx context.Context
	p   *firefox.Page
}

func (f ff) open(url, ready string) {
	f.t.Helper()
	if err := f.p.Navigate(f.ctx, url); err != nil {
		f.t.Fatal(err)
	}
	if err := f.p.WaitFor(f.ctx, ready); err != nil {
		f.t.Fatal(err)
	}
	f.clean(url)
}

func (f ff) typeInto(css, s string) {
	f.t.Helper()
	if err := f.p.Type(f.ctx, css, s); err != nil {
		f.t.Fatal(err)
	}
}

// click clicks css and waits for the next page, on which ready is true.
func (f ff) click(css, ready string) {
	f.t.Helper()
	if err := f.p.ClickAndWait(f.ctx, css, ready); err != nil {
		f.t.Fatal(err)
	}
	f.clean("after clicking " + css)
}

func (f ff) text(id string) string {
	f.t.Helper()
	var s string
	if err := f.p.Call(f.ctx, `(id) => document.getElementById(id).textContent`, &s, id); err != nil {
		f.t.Fatalf("text of #%s: %v", id, err)
	}
	return strings.TrimSpace(s)
}

func (f ff) count(css string) int {
	f.t.Helper()
	var n int
	if err := f.p.Call(f.ctx, `(css) => document.querySelectorAll(css).length`, &n, css); err != nil {
		f.t.Fatalf("count %s: %v", css, err)
	}
	return n
}

// clean checks that the page reported no CSP violation and that its own
// script ran under the policy: every UTC time has the local time beside
// it.
func (f ff) clean(where string) {
	f.t.Helper()
	v, err := f.p.CSPViolations(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(v) > 0 {
		f.t.Errorf("%s: CSP violations %v", where, v)
	}
	// The page has loaded (its DOMContentLoaded handlers have run).
	var n [2]int
	if err := f.p.Eval(f.ctx, `[document.querySelectorAll("time.utc").length, document.querySelectorAll("time.utc + span.local").length]`, &n); err != nil {
		f.t.Fatal(err)
	}
	if n[0] != n[1] {
		f.t.Errorf("%s: the page's script filled in the local time beside %d of %d UTC times", where, n[1], n[0])
	}
}

func (f ff) signIn(e *env, role string) {
	f.t.Helper()
	f.open(e.web.URL+"/console/", `document.getElementById("key")`)
	f.typeInto("#key", keys[role])
	f.click("#sign-in", `document.getElementById("who-name")`)
}

// The playbook's worked scenario in Firefox, as in Chromium: a support lead
// signs in, finds A-5531, opens a dispute, runs the drill and gets six
// passed pulls and the reply; an auditor sees no dispute or drill button
// and the API refuses their forged post. No page reports a CSP violation.
func TestSupportLeadAnswersTheDisputeInFirefox(t *testing.T) {
	e := newEnv(t, nil)
	row := e.playbook(t)
	ctx, p := firefox.Start(t, 2*time.Minute)
	f := ff{t, ctx, p}
	if err := p.SetViewport(ctx, 1280, 800, 1); err != nil {
		t.Fatal(err)
	}

	// A bad key first: a clear message, no session.
	f.open(e.web.URL+"/console/", `document.getElementById("key")`)
	f.typeInto("#key", "not-a-key")
	f.click("#sign-in", `document.getElementById("signin-error")`)
	if got := f.text("signin-error"); !strings.Contains(got, "This ledger does not know that key") {
		t.Fatalf("bad key: %q", got)
	}

	f.signIn(e, config.RoleSupport)
	if got := f.text("who-name"); got != "support-key" {
		t.Fatalf("signed in as %q", got)
	}
	f.typeInto("#q", "A-5531")
	f.click("#search-btn", `document.getElementById("matched")`)
	if got := f.text("matched"); !strings.Contains(got, "1 row for order A-5531") {
		t.Fatalf("search says %q", got)
	}
	f.click("a.row-link", `document.getElementById("row-id")`)
	if got := f.text("row-id"); got != row.GetId() {
		t.Fatalf("row page shows %q, want %s", got, row.GetId())
	}
	if got := f.text("row-status"); got != "authorized" {
		t.Fatalf("status %q", got)
	}
	if n, bad := f.count("#checks li.check"), f.count("#checks li.check.bad"); n < 9 || bad != 0 {
		t.Fatalf("%d checks listed (%d failed), want the nine, none failed", n, bad)
	}
	if n := f.count("time.utc + span.local"); n == 0 {
		t.Fatal("no local time beside the UTC times")
	}

	// Open the dispute: choose from the list, type the note, submit.
	if err := p.Call(ctx, `(v) => { const s = document.getElementById("dispute-choice"); s.value = v; return s.value; }`, nil, "DISPUTE_STATUS_OPEN"); err != nil {
		t.Fatal(err)
	}
	f.typeInto("#dispute-note", "customer: never approved the cancel")
	f.click("#dispute-add", `document.getElementById("dispute-timeline")`)
	if got := f.text("dispute-status"); got != "open" {
		t.Fatalf("dispute status %q", got)
	}
	if ev := f.text("dispute-timeline"); !strings.Contains(ev, "support-key") || !strings.Contains(ev, "never approved the cancel") {
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
	f.click("#run-drill", `document.getElementById("reply")`)
	if got := f.text("score"); got != "6/6 passed" {
		t.Fatalf("score %q", got)
	}
	if n := f.count(`li.pull[data-passed="true"]`); n != 6 {
		t.Fatalf("%d passed pulls shown, want 6", n)
	}
	if n := f.count(`li.pull svg.bar rect.fill`); n != 6 {
		t.Fatalf("%d elapsed-time bars, want 6", n)
	}
	reply := f.text("reply")
	for _, want := range []string{"13:07 UTC", "orders:read, orders:cancel", e.sc.PA.ID} {
		if !strings.Contains(reply, want) {
			t.Errorf("reply lacks %q: %s", want, reply)
		}
	}
	rep, err := e.client.GetDrill(as(config.RoleAuditor), &ledgerv1.GetDrillRequest{Id: f.text("report-id")})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetReport().GetReply() != reply || rep.GetReport().GetRunBy() != "support-key" {
		t.Fatalf("stored report: run by %q, reply %q", rep.GetReport().GetRunBy(), rep.GetReport().GetReply())
	}
	if n := f.count(`button[data-copy="reply"]`); n != 1 {
		t.Fatal("no copy button for the reply")
	}
	f.click("#sign-out", `document.getElementById("signin-notice")`)

	// An auditor: the same row, no dispute or drill button; a forged
	// dispute post with the session's CSRF token is refused by the API.
	f.signIn(e, config.RoleAuditor)
	f.open(e.web.URL+"/console/rows/"+row.GetId(), `document.getElementById("row-id")`)
	for _, sel := range []string{"#dispute-form", "#dispute-add", "#run-drill", `a[href="/console/drill"]`} {
		if n := f.count(sel); n != 0 {
			t.Errorf("auditor sees %s", sel)
		}
	}
	if f.count("#verify") != 1 || f.count("#dispute-timeline") != 1 {
		t.Fatal("auditor does not see the verify button and the dispute timeline")
	}
	var forged string
	err = p.Call(ctx, `async (path) => { const t = document.querySelector("input[name=csrf]").value;
		const r = await fetch(path, {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
			body: "csrf=" + encodeURIComponent(t) + "&status=DISPUTE_STATUS_RESOLVED_CUSTOMER_AUTHORIZED&note=forged"});
		return r.status + " " + (await r.text()).includes("Not allowed for your key"); }`, &forged, "/console/rows/"+row.GetId()+"/disputes")
	if err != nil {
		t.Fatal(err)
	}
	if forged != "403 true" {
		t.Errorf("forged dispute post: %s", forged)
	}
	after, err := e.client.GetRow(as(config.RoleAuditor), &ledgerv1.GetRowRequest{Id: row.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(after.GetRow().GetDisputeEvents()); n != 1 {
		t.Fatalf("%d dispute events after the forged post, want 1", n)
	}
}
