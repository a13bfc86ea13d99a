package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/console"
)

// The session cookie is HttpOnly, SameSite=Strict, scoped to the console,
// Secure when configured so, and carries a random id, never the key.
func TestSessionCookie(t *testing.T) {
	for _, secure := range []bool{false, true} {
		var opts []envOpt
		if secure {
			opts = append(opts, withSecure())
		}
		e := newEnv(t, nil, opts...)
		c := e.newWebClient(t)
		if code, _ := c.get(t, "/console/signin"); code != 200 {
			t.Fatal(code)
		}
		resp, _ := c.post(t, "/console/signin", url.Values{"csrf": {c.csrf}, "key": {keys[config.RoleSupport]}})
		var ck *http.Cookie
		for _, k := range resp.Cookies() {
			if k.Name == "pactledger_console" {
				ck = k
			}
		}
		if ck == nil {
			t.Fatal("no session cookie")
		}
		// Behind a TLS-terminating proxy cookies are Secure too.
		req, _ := http.NewRequest("GET", e.web.URL+"/console/signin", nil)
		req.Header.Set("X-Forwarded-Proto", "https")
		pr, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		pr.Body.Close()
		if cks := pr.Cookies(); len(cks) != 1 || !cks[0].Secure || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode {
			t.Errorf("sign-in cookie behind TLS: %+v", cks)
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != console.Prefix || ck.Secure != secure {
			t.Errorf("cookie %+v (secure config %v)", ck, secure)
		}
		if strings.Contains(ck.Value, keys[config.RoleSupport]) || len(ck.Value) < 40 {
			t.Errorf("cookie value %q", ck.Value)
		}
	}
}

// A session ends after its idle time; a request after that goes back to
// sign-in, and a post does nothing.
func TestSessionEndsWhenIdle(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 10, 9, 9, 5, 0, 0, time.UTC)
	e := newEnv(t, nil, withClock(&now, &mu))
	row := e.playbook(t)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	advance(console.DefaultSessionTTL - time.Second)
	if code, _ := c.get(t, "/console/rows/"+row.GetId()); code != 200 {
		t.Fatalf("within the idle time: %d", code)
	}
	advance(console.DefaultSessionTTL - time.Second) // idle time counts from the last request
	if code, _ := c.get(t, "/console/search"); code != 200 {
		t.Fatalf("still active: %d", code)
	}
	advance(console.DefaultSessionTTL)
	rowPage := "/console/rows/" + row.GetId()
	resp, err := c.Get(c.base + rowPage)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	signin := "/console/signin?ended=1&next=" + url.QueryEscape(rowPage)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != signin {
		t.Fatalf("after the idle time: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	post, body := c.post(t, rowPage+"/disputes", url.Values{"status": {"DISPUTE_STATUS_OPEN"}, "csrf": {c.csrf}})
	if post.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `href="/console/signin?next=`+url.QueryEscape(rowPage)+`"`) {
		t.Fatalf("post after the session ended = %d", post.StatusCode)
	}
	// Signing in again returns to the row.
	if code, _ := c.get(t, signin); code != http.StatusOK {
		t.Fatalf("sign-in page: %d", code)
	}
	resp, _ = c.post(t, "/console/signin", url.Values{"csrf": {c.csrf}, "key": {keys[config.RoleSupport]}, "next": {rowPage}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != rowPage {
		t.Fatalf("signed in again: %d to %q, want the row", resp.StatusCode, resp.Header.Get("Location"))
	}
}

var (
	inlineScript = regexp.MustCompile(`<script(?:\s[^>]*)?>`)
	styleAttr    = regexp.MustCompile(`\sstyle=`)
	formTag      = regexp.MustCompile(`(?s)<form[^>]*method="post"[^>]*>.*?</form>`)
)

// Every page has the strict CSP and nothing inline that it would block;
// every post form carries the CSRF token.
func TestPagesAreStrict(t *testing.T) {
	e := newEnv(t, nil)
	row := e.playbook(t)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleAdmin)
	for _, p := range []string{"/console/signin", "/console/search", "/console/search?q=A-5531", "/console/search?q=nothing-here",
		"/console/rows/" + row.GetId(), "/console/drill", "/console/drills", "/console/grant", "/console/grant?id=a2agrant_7Q2F",
		"/console/incidents", "/console/nope"} {
		resp, err := c.Get(c.base + p)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			b.WriteString(string(buf[:n]))
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		body := b.String()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "style-src 'self'") ||
			!strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		for _, m := range inlineScript.FindAllString(body, -1) {
			if !strings.Contains(m, `src="/console/assets/`) {
				t.Errorf("%s: inline script %s", p, m)
			}
		}
		if styleAttr.MatchString(body) || strings.Contains(body, "<style") {
			t.Errorf("%s: inline style", p)
		}
		if strings.Contains(body, "//cdn") || strings.Contains(body, `src="http`) || strings.Contains(body, `href="http`) {
			t.Errorf("%s: refers outside", p)
		}
		for _, f := range formTag.FindAllString(body, -1) {
			if !strings.Contains(f, `name="csrf"`) {
				t.Errorf("%s: form without CSRF token: %s", p, f)
			}
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
		if h := resp.Header.Get("Strict-Transport-Security"); h != "" {
			t.Errorf("%s over plain HTTP: Strict-Transport-Security %q", p, h)
		}
	}
	// Behind a proxy that ends TLS, browsers are told to keep to HTTPS.
	req, _ := http.NewRequest("GET", c.base+"/console/signin", nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(h, "max-age=") {
		t.Errorf("over HTTPS at a proxy: Strict-Transport-Security %q", h)
	}
	for _, a := range []string{"/console/assets/console.css", "/console/assets/console.js"} {
		if code, _ := c.get(t, a); code != 200 {
			t.Errorf("%s = %d", a, code)
		}
	}
}

// A note is bounded by the API's bytes, and the refusal says so: 2,000
// accented letters (4,000 bytes) are taken, 2,100 (4,200 bytes) refused
// with the limit in bytes.
func TestNoteBoundInBytes(t *testing.T) {
	_, row, c := newSupportLead(t)
	path := "/console/rows/" + row.GetId() + "/disputes"
	post, body := c.post(t, path, url.Values{"status": {"DISPUTE_STATUS_OPEN"}, "note": {strings.Repeat("é", 2100)}, "csrf": {c.csrf}})
	if post.StatusCode != http.StatusBadRequest || !strings.Contains(body, "at most 4096 bytes") {
		t.Fatalf("a note of 4,200 bytes: %d", post.StatusCode)
	}
	if post, _ := c.post(t, path, url.Values{"status": {"DISPUTE_STATUS_OPEN"}, "note": {strings.Repeat("é", 2000)}, "csrf": {c.csrf}}); post.StatusCode >= 400 {
		t.Fatalf("a note of 4,000 bytes: %d", post.StatusCode)
	}
}

// A row is found by the start of its id, as the tables print it, in the
// search box and in a row's address, in either case.
func TestRowByTheStartOfItsID(t *testing.T) {
	_, row, c := newSupportLead(t)
	want := "/console/rows/" + row.GetId()
	for _, path := range []string{"/console/search?q=" + row.GetId()[:12], "/console/search?q=" + strings.ToUpper(row.GetId()[:12]),
		"/console/search?q=" + strings.ToUpper(row.GetId()), "/console/rows/" + row.GetId()[:12], "/console/rows/" + strings.ToUpper(row.GetId()[:8])} {
		if code, to := c.redirect(t, path); code != http.StatusSeeOther || to != want {
			t.Errorf("%s: %d to %q, want the row's page", path, code, to)
		}
	}
	if code, _ := c.get(t, "/console/rows/"+row.GetId()[:7]); code != http.StatusNotFound {
		t.Errorf("7 characters: %d, want 404", code)
	}
}

// A monthly drill's sample is 1 to 100 rows: 0 is refused, as the form
// says.
func TestMonthlySampleOfZeroRefused(t *testing.T) {
	_, _, c := newSupportLead(t)
	c.get(t, "/console/drill")
	if post, body := c.post(t, "/console/drill", url.Values{"monthly": {"1"}, "sample": {"0"}, "csrf": {c.csrf}}); post.StatusCode != http.StatusBadRequest || !strings.Contains(body, "from 1 to 100") {
		t.Errorf("a sample of 0: %d", post.StatusCode)
	}
}

// An error page leads back to where the request came from: a mistyped
// grant to the Grant form, a missing report to the drills, an incident to
// the incidents; a re-run's address opened again shows the row.
func TestErrorPagesLeadBack(t *testing.T) {
	_, row, c := newSupportLead(t)
	for path, back := range map[string]string{
		"/console/grant?id=nope":      `href="/console/grant" id="back"`,
		"/console/drills/nope":        `href="/console/drills" id="back"`,
		"/console/incidents/INC-9999": `href="/console/incidents" id="back"`,
	} {
		if code, body := c.get(t, path); code < 400 || !strings.Contains(body, back) {
			t.Errorf("%s: %d, want a way back %s", path, code, back)
		}
	}
	if code, to := c.redirect(t, "/console/rows/"+row.GetId()+"/verify"); code != http.StatusSeeOther || to != "/console/rows/"+row.GetId() {
		t.Errorf("GET of a re-run's address: %d to %q", code, to)
	}
}
