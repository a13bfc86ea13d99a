package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/firefox"
	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// tab is one browser tab, Chromium or Firefox, as the width test drives
// it.
type tab interface {
	// resize sets the viewport in CSS pixels; phone also emulates a phone
	// where the browser can.
	resize(t *testing.T, w, h int, phone bool)
	// open loads url and waits for its load event.
	open(t *testing.T, url string)
	// click clicks the element matching css and waits for the next page,
	// on which ready is true.
	click(t *testing.T, css, ready string)
	// eval decodes the JSON value of the expression js into out.
	eval(t *testing.T, js string, out any)
}

// cspRecorder is added to every document before its own scripts: it
// records each Content-Security-Policy violation (Firefox tabs have their
// own, from internal/firefox).
const cspRecorder = `(() => { const seen = []; Object.defineProperty(window, "__cspViolations", { value: seen });
  document.addEventListener("securitypolicyviolation", (e) => seen.push(e.effectiveDirective + " blocked " + (e.blockedURI || "inline")), true); })()`

type chromiumTab struct{ ctx context.Context }

func newChromiumTab(t *testing.T) tab {
	ctx := browser(t)
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspRecorder})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	return chromiumTab{ctx}
}

func (c chromiumTab) resize(t *testing.T, w, h int, phone bool) {
	t.Helper()
	opts := []chromedp.EmulateViewportOption{}
	if phone {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateScale(2), chromedp.EmulateTouch)
	}
	if err := chromedp.Do(c.ctx, chromedp.EmulateViewport(int64(w), int64(h), opts...)); err != nil {
		t.Fatal(err)
	}
}

func (c chromiumTab) open(t *testing.T, url string) {
	t.Helper()
	if err := chromedp.Do(c.ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

func (c chromiumTab) click(t *testing.T, css, ready string) {
	t.Helper()
	if _, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](`window.__leaving = true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(c.ctx, chromedp.Click(chromedp.CSS(css))); err != nil {
		t.Fatalf("click %s: %v", css, err)
	}
	// Poll with a deadline; a poll that meets the document going away fails
	// and the next one reads the new document.
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!window.__leaving && document.readyState === "complete" && !!(`+ready+`)`))
		if err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("click %s, wait for %s: %v (last: %v)", css, ready, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (c chromiumTab) eval(t *testing.T, js string, out any) {
	t.Helper()
	s, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`JSON.stringify(`+js+`)`))
	if err != nil {
		t.Fatalf("eval %s: %v", js, err)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("eval %s: %v", js, err)
	}
}

type firefoxTab struct {
	ctx context.Context
	p   *firefox.Page
}

func newFirefoxTab(t *testing.T) tab {
	ctx, p := firefox.Start(t, 2*time.Minute)
	return firefoxTab{ctx, p}
}

func (f firefoxTab) resize(t *testing.T, w, h int, phone bool) {
	t.Helper()
	dpr := 1.0
	if phone {
		dpr = 2
	}
	if err := f.p.SetViewport(f.ctx, w, h, dpr); err != nil {
		t.Fatal(err)
	}
}

func (f firefoxTab) open(t *testing.T, url string) {
	t.Helper()
	if err := f.p.Navigate(f.ctx, url); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

func (f firefoxTab) click(t *testing.T, css, ready string) {
	t.Helper()
	if err := f.p.ClickAndWait(f.ctx, css, ready); err != nil {
		t.Fatalf("click %s: %v", css, err)
	}
}

func (f firefoxTab) eval(t *testing.T, js string, out any) {
	t.Helper()
	if err := f.p.Eval(f.ctx, js, out); err != nil {
		t.Fatalf("eval %s: %v", js, err)
	}
}

// browsers are the browsers the console must work in.
var browsers = []struct {
	name string
	open func(t *testing.T) tab
}{
	{"chromium", newChromiumTab},
	{"firefox", newFirefoxTab},
}

// widths are the screens it must work on.
var widths = []struct {
	name  string
	w, h  int
	phone bool
}{
	{"laptop", 1280, 800, false},
	{"phone", 390, 844, true},
}

// layout is what the width test reads from a loaded page.
type layout struct {
	Ready      bool     // the page's own element is there and visible
	Overflow   int      // how far the page is wider than the viewport
	Past       []string // what sticks out
	Wide       []string // elements wider than the box they scroll in
	Times      int      // UTC times on the page
	Local      int      // of those, with the viewer's local time beside them (the page's script ran)
	Cards      int      // tables that become cards on a phone
	Heads      int      // of those, with their header row shown
	Violations []string // Content-Security-Policy violations
}

const readLayout = `(() => {
  const ready = document.querySelector(%s);
  // What sticks out of box c: the innermost elements past its right edge.
  const beyond = (c, right) => [...c.querySelectorAll("*")].filter((e) => e.getBoundingClientRect().right > right + 1 &&
      ![...e.children].some((k) => k.getBoundingClientRect().right > right + 1)).slice(0, 3)
    .map((e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.replace(/ /g, ".") : "") +
      " " + JSON.stringify((e.textContent || "").trim().slice(0, 24)));
  const wide = [];
  for (const e of document.querySelectorAll(".table-wrap, main, section, pre")) {
    if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== "visible") {
      wide.push((e.id || e.className || e.tagName) + " " + e.scrollWidth + ">" + e.clientWidth + ": " + beyond(e, e.getBoundingClientRect().right).join(", "));
    }
  }
  const past = document.documentElement.scrollWidth > window.innerWidth ? beyond(document.body, window.innerWidth) : [];
  const cards = [...document.querySelectorAll("table.cards")];
  return {
    Ready: !!ready && ready.getClientRects().length > 0,
    Overflow: document.documentElement.scrollWidth - window.innerWidth,
    Past: past,
    Wide: wide,
    Times: document.querySelectorAll("time.utc").length,
    Local: document.querySelectorAll("time.utc + span.local").length,
    Cards: cards.length,
    Heads: cards.filter((c) => c.tHead && getComputedStyle(c.tHead).display !== "none").length,
    Violations: window.__cspViolations || ["no CSP recorder in this document"],
  };
})()`

// Every main page, in Chromium and in Firefox, at laptop width and at
// phone width: its content is there, nothing scrolls sideways, tables are
// tables on a laptop and cards on a phone, the page's script ran (local
// times are filled in) and the strict CSP reported nothing.
func TestMainPagesAtLaptopAndPhoneWidth(t *testing.T) {
	e := newEnv(t, nil)
	row := e.playbook(t)
	at := time.Date(2026, 10, 7, 11, 3, 51, 0, time.UTC)
	inc := e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-22760", Target: "plan-9T4K", At: at, ScopesUsed: []string{"plan:change"}}))
	e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at.Add(time.Hour)}))
	if _, err := e.client.RunDrill(as(config.RoleSupport), &ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: 3}}); err != nil {
		t.Fatal(err)
	}
	// Values as long as a writer may post: a customer and a grant id
	// with nothing to break at.
	longUser, longGrant := "acct-"+strings.Repeat("9", 180), "a2agrant_"+strings.Repeat("RBKXdIWNjBs2Crze", 6)
	long := e.record(t, e.sc.Mint(pacttest.Spec{User: longUser, GrantID: longGrant, Target: "A-7777", At: at.Add(2 * time.Hour)}))
	drill, err := e.client.RunDrill(as(config.RoleSupport), &ledgerv1.RunDrillRequest{RowId: row.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	pages := []struct{ name, path, ready string }{
		{"search", "/console/search?q=A-5531", "#matched"},
		{"recent rows", "/console/search", "#results"},
		{"row", "/console/rows/" + row.GetId(), "#row-id"},
		{"drill", "/console/drill", "#drill-run"},
		{"drill report", "/console/drills/" + drill.GetReport().GetId(), "#reply"},
		{"drills", "/console/drills", "#score-chart"},
		{"grant", "/console/grant?id=a2agrant_7Q2F", "#grant-rows"},
		{"incidents", "/console/incidents", "#incidents"},
		{"incident", "/console/incidents/" + inc.GetIncidentId(), "#incident-state"},
		{"search with long values", "/console/search?q=A-7777", "#matched"},
		{"row with long values", "/console/rows/" + long.GetId(), "#row-id"},
	}
	for _, b := range browsers {
		t.Run(b.name, func(t *testing.T) {
			tb := b.open(t)
			for _, w := range widths {
				t.Run(w.name, func(t *testing.T) {
					tb.resize(t, w.w, w.h, w.phone)
					check := func(name, ready string) {
						t.Helper()
						var got layout
						tb.eval(t, fmt.Sprintf(readLayout, jsString(ready)), &got)
						switch {
						case !got.Ready:
							t.Errorf("%s: %s is not shown", name, ready)
						case got.Overflow > 0:
							t.Errorf("%s is %d px wider than the screen: %v", name, got.Overflow, got.Past)
						case len(got.Wide) > 0:
							t.Errorf("%s scrolls sideways inside: %v", name, got.Wide)
						case got.Local != got.Times:
							t.Errorf("%s: %d of %d UTC times have the local time beside them", name, got.Local, got.Times)
						case len(got.Violations) > 0:
							t.Errorf("%s: CSP violations %v", name, got.Violations)
						case w.phone && got.Heads > 0:
							t.Errorf("%s: %d of %d tables keep their header row on a phone", name, got.Heads, got.Cards)
						case !w.phone && got.Heads != got.Cards:
							t.Errorf("%s: %d of %d tables show their header row on a laptop", name, got.Heads, got.Cards)
						}
					}
					tb.open(t, e.web.URL+"/console/signin")
					check("sign-in", "#key")
					var typed bool
					tb.eval(t, `(() => { document.getElementById("key").value = `+jsString(keys[config.RoleAdmin])+`; return true; })()`, &typed)
					tb.click(t, "#sign-in", `document.getElementById("who-name")`)
					for _, p := range pages {
						tb.open(t, e.web.URL+p.path)
						check(p.name, p.ready)
					}
					tb.click(t, "#sign-out", `document.getElementById("signin-notice")`)
				})
			}
		})
	}
}
