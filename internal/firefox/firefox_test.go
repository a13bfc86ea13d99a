package firefox_test

import (
	"bytes"
	"fmt"
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/firefox"
)

const strict = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'"

// site is a small site with a strict CSP: a form that echoes what was
// typed, a script from 'self' that marks the page, and a page with an
// inline script the policy blocks.
func site(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Security-Policy", strict)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"><script src="/app.js" defer></script></head><body>%s</body></html>`, body)
	}
	mux.HandleFunc("GET /app.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `document.addEventListener("DOMContentLoaded", () => document.body.dataset.script = "ran");`)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		page(w, `<form method="post" action="/echo"><input id="name" name="name"><button id="go" type="submit">Go</button></form>`)
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<p id="echo">`+html.EscapeString(r.PostFormValue("name"))+`</p>`)
	})
	mux.HandleFunc("GET /inline", func(w http.ResponseWriter, _ *http.Request) {
		page(w, `<p id="p">x</p><script>document.body.dataset.inline = "ran";</script>`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// Typing, clicking and a form post that loads a new page; the page's own
// script runs under the strict policy and nothing is reported.
func TestTypeClickAndWait(t *testing.T) {
	srv := site(t)
	ctx, p := firefox.Start(t, time.Minute)
	if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `document.body.dataset.script === "ran"`); err != nil {
		t.Fatal(err)
	}
	if err := p.Type(ctx, "#name", "A-5531 ü"); err != nil {
		t.Fatal(err)
	}
	if err := p.ClickAndWait(ctx, "#go", `document.getElementById("echo")`); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := p.Eval(ctx, `document.getElementById("echo").textContent`, &got); err != nil {
		t.Fatal(err)
	}
	if got != "A-5531 ü" {
		t.Fatalf("echo = %q, want what was typed", got)
	}
	v, err := p.CSPViolations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 0 {
		t.Fatalf("violations on a clean page: %v", v)
	}
	var n int
	if err := p.Call(ctx, `(sel, extra) => document.querySelectorAll(sel).length + extra`, &n, "p", 2); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("Call with arguments = %d, want 3", n)
	}
	if err := p.Eval(ctx, `nope.nope`, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("a script error = %v", err)
	}
}

// An inline script under the strict policy is blocked and reported; so is
// a style added later.
func TestCSPViolationsAreReported(t *testing.T) {
	srv := site(t)
	ctx, p := firefox.Start(t, time.Minute)
	if err := p.Navigate(ctx, srv.URL+"/inline"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `window.__cspViolations.length > 0`); err != nil {
		t.Fatal(err)
	}
	var inline string
	if err := p.Eval(ctx, `document.body.dataset.inline || ""`, &inline); err != nil {
		t.Fatal(err)
	}
	if inline != "" {
		t.Fatal("the inline script ran despite the policy")
	}
	v, err := p.CSPViolations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || !strings.HasPrefix(v[0], "script-src-elem blocked inline") {
		t.Fatalf("violations %q", v)
	}
}

// The viewport sets the layout width; a screenshot is a PNG of it.
func TestViewportAndScreenshot(t *testing.T) {
	srv := site(t)
	ctx, p := firefox.Start(t, time.Minute)
	if err := p.SetViewport(ctx, 390, 844, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.Navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	var size struct{ W, H, DPR float64 }
	if err := p.Eval(ctx, `({W: window.innerWidth, H: window.innerHeight, DPR: window.devicePixelRatio})`, &size); err != nil {
		t.Fatal(err)
	}
	if size.W != 390 || size.H != 844 || size.DPR != 2 {
		t.Fatalf("viewport %+v, want 390×844 at 2×", size)
	}
	b, err := p.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if w := img.Bounds().Dx(); w != 780 {
		t.Fatalf("screenshot is %d px wide, want 780", w)
	}
}
