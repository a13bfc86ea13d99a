// Package firefox starts headless Firefox for browser tests and drives it
// over WebDriver BiDi (https://w3c.github.io/webdriver-bidi/), which
// Firefox speaks natively on the port given by --remote-debugging-port: no
// geckodriver. It covers what the tests need: navigate and wait for the
// load, run a function in the page, click and type with real input
// events, set the viewport, take a screenshot, and collect the page's
// Content-Security-Policy violations.
//
// `make test` installs Firefox when missing (scripts/ensure-firefox) and
// sets PACTLEDGER_FIREFOX, so a Firefox test cannot be skipped there; a
// plain `go test` without Firefox skips it and says why.
package firefox

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvRequired names the environment variable that makes a missing Firefox
// fail a test instead of skipping it (`make test` sets it).
const EnvRequired = "PACTLEDGER_FIREFOX"

// origin is the Origin the BiDi client sends; Firefox is told to allow it.
const origin = "http://127.0.0.1"

// prefs keep the browser off the network but for loopback, with the
// environment variable MOZ_DISABLE_NONLOCAL_CONNECTIONS (see Start): every
// other host goes to a proxy on a closed loopback port, with no fallback to
// a direct connection, and the services that call home at start are off.
// The remote agent adds its own recommended preferences for automation.
// Checked with strace: no DNS query and no connection off loopback.
var prefs = map[string]any{
	"network.proxy.type":                           1,
	"network.proxy.http":                           "127.0.0.1",
	"network.proxy.http_port":                      9,
	"network.proxy.ssl":                            "127.0.0.1",
	"network.proxy.ssl_port":                       9,
	"network.proxy.share_proxy_settings":           true,
	"network.proxy.allow_hijacking_localhost":      false,
	"network.proxy.failover_direct":                false, // else its own requests go direct when the proxy refuses
	"network.proxy.no_proxies_on":                  "localhost, 127.0.0.1",
	"network.trr.mode":                             5,
	"network.dns.disablePrefetch":                  true,
	"network.predictor.enabled":                    false,
	"network.http.speculative-parallel-limit":      0,
	"network.captive-portal-service.enabled":       false,
	"network.connectivity-service.enabled":         false,
	"app.update.disabledForTesting":                true,
	"app.normandy.enabled":                         false,
	"messaging-system.rsexperimentloader.enabled":  false,
	"datareporting.policy.dataSubmissionEnabled":   false,
	"toolkit.telemetry.enabled":                    false,
	"browser.safebrowsing.malware.enabled":         false,
	"browser.safebrowsing.phishing.enabled":        false,
	"browser.newtabpage.enabled":                   false,
	"browser.startup.page":                         0,
	"browser.shell.checkDefaultBrowser":            false,
	"extensions.update.enabled":                    false,
	"extensions.getAddons.cache.enabled":           false,
	"browser.region.network.url":                   "",
	"browser.search.update":                        false,
	"services.settings.server":                     "http://127.0.0.1:9/v1",
	"browser.topsites.contile.enabled":             false,
	"security.OCSP.enabled":                        0,
	"browser.aboutwelcome.enabled":                 false,
	"datareporting.healthreport.uploadEnabled":     false,
	"browser.ping-centre.telemetry":                false,
	"browser.newtabpage.activity-stream.telemetry": false,
}

var listening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

// Page is the one tab of a Firefox started by Start.
type Page struct {
	c  *conn
	id string // the top-level browsing context
}

// Start starts headless Firefox for t with a fresh profile and returns a
// context that ends after timeout or with the test, and its tab. Firefox
// is closed when t ends. Without Firefox the test is skipped, unless
// PACTLEDGER_FIREFOX says it must run.
func Start(t testing.TB, timeout time.Duration) (context.Context, *Page) {
	t.Helper()
	path := lookPath()
	if path == "" {
		if os.Getenv(EnvRequired) != "" {
			t.Fatal("firefox is not installed, but " + EnvRequired + " says it must be (scripts/ensure-firefox installs it)")
		}
		t.Skip("firefox is not installed (make test installs it with scripts/ensure-firefox)")
	}
	dir := t.TempDir()
	profile := filepath.Join(dir, "profile")
	if err := os.Mkdir(profile, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profile, "user.js"), userJS(), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(path, "-headless", "-no-remote", "-profile", profile,
		"--remote-debugging-port", "0", "--remote-allow-origins", origin, "about:blank")
	// MOZ_DISABLE_NONLOCAL_CONNECTIONS is Firefox's own switch for its
	// test suites: connections to anything but loopback are refused, and
	// the remote settings server may be pointed elsewhere (prefs).
	cmd.Env = append(os.Environ(), "HOME="+dir, "MOZ_CRASHREPORTER_DISABLE=1", "MOZ_HEADLESS=1", "MOZ_DISABLE_NONLOCAL_CONNECTIONS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its content processes go with it
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start firefox: %v", err)
	}
	out := &tail{}
	addr := make(chan string, 1)
	go func() { // the endpoint, then the rest of stderr for failure reports
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			out.add(line)
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	var c *conn
	t.Cleanup(func() {
		if c != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.call(ctx, "browser.close", nil, nil)
			cancel()
			_ = c.close()
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("firefox stderr (last lines):\n%s", out.String())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	var ws string
	select {
	case ws = <-addr:
	case <-exited:
		t.Fatalf("firefox exited before listening:\n%s", out.String())
	case <-ctx.Done():
		t.Fatalf("firefox did not start listening for WebDriver BiDi:\n%s", out.String())
	}
	c, err = dial(ctx, strings.TrimSuffix(ws, "/")+"/session", origin)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.call(ctx, "session.new", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
		t.Fatal(err)
	}
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := c.call(ctx, "browsingContext.getTree", map[string]any{"maxDepth": 0}, &tree); err != nil {
		t.Fatal(err)
	}
	if len(tree.Contexts) == 0 {
		t.Fatal("firefox has no tab")
	}
	// Every document reports the CSP violations it sees to the test.
	if err := c.call(ctx, "script.addPreloadScript", map[string]any{"functionDeclaration": cspRecorder}, nil); err != nil {
		t.Fatal(err)
	}
	return ctx, &Page{c: c, id: tree.Contexts[0].Context}
}

// lookPath finds Firefox: Debian's firefox-esr, or firefox.
func lookPath() string {
	for _, name := range []string{"firefox-esr", "firefox"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func userJS() []byte {
	var b strings.Builder
	for k, v := range prefs {
		j, _ := json.Marshal(v)
		fmt.Fprintf(&b, "user_pref(%q, %s);\n", k, j)
	}
	return []byte(b.String())
}

// tail keeps the last lines Firefox wrote.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 100 {
		t.lines = t.lines[1:]
	}
	t.lines = append(t.lines, s)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// cspRecorder runs in every document before its own scripts and records
// each securitypolicyviolation event.
const cspRecorder = `() => {
  const seen = [];
  Object.defineProperty(window, "__cspViolations", { value: seen });
  document.addEventListener("securitypolicyviolation", (e) => {
    seen.push(e.effectiveDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
  }, true);
}`

// Navigate loads url in the tab and returns when its load event has fired.
func (p *Page) Navigate(ctx context.Context, url string) error {
	return p.c.call(ctx, "browsingContext.navigate", map[string]any{"context": p.id, "url": url, "wait": "complete"}, nil)
}

// Call runs the JavaScript function fn in the page with args (each passed
// as its JSON value) and decodes what it returns (or what its promise
// resolves to), as JSON, into out when out is not nil.
func (p *Page) Call(ctx context.Context, fn string, out any, args ...any) error {
	var jargs []any
	for _, a := range args {
		j, err := json.Marshal(a)
		if err != nil {
			return err
		}
		jargs = append(jargs, map[string]any{"type": "string", "value": string(j)})
	}
	decl := `async function (...args) {
  const r = await (` + fn + `)(...args.map((a) => JSON.parse(a)));
  return r === undefined ? "null" : JSON.stringify(r);
}`
	var res struct {
		Type   string `json:"type"`
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := p.c.call(ctx, "script.callFunction", map[string]any{
		"functionDeclaration": decl, "arguments": jargs, "awaitPromise": true,
		"target": map[string]any{"context": p.id},
	}, &res)
	if err != nil {
		return err
	}
	if res.Type == "exception" {
		return fmt.Errorf("script: %s", res.ExceptionDetails.Text)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal([]byte(res.Result.Value), out)
}

// Eval evaluates the JavaScript expression expr and decodes its value as
// JSON into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	return p.Call(ctx, "() => ("+expr+")", out)
}

// WaitFor polls the JavaScript expression cond until it is true, ctx ends
// (the error then says what was awaited, and the last script error if
// any) or 30 s pass.
func (p *Page) WaitFor(ctx context.Context, cond string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		var ok bool
		err := p.Eval(ctx, "!!("+cond+")", &ok)
		if err == nil && ok {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			last = err // a document going away mid-call: try again
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", cond, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", cond, ctx.Err())
		case <-tick.C:
		}
	}
}

// element returns the shared id of the first element matching css,
// scrolled into the middle of the viewport.
func (p *Page) element(ctx context.Context, css string) (string, error) {
	var found bool
	if err := p.Call(ctx, `(css) => { const e = document.querySelector(css); if (!e) return false; e.scrollIntoView({block: "center", inline: "center"}); return true; }`, &found, css); err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("no element matches %s", css)
	}
	var res struct {
		Nodes []struct {
			SharedID string `json:"sharedId"`
		} `json:"nodes"`
	}
	err := p.c.call(ctx, "browsingContext.locateNodes", map[string]any{
		"context": p.id, "locator": map[string]any{"type": "css", "value": css}, "maxNodeCount": 1,
	}, &res)
	if err != nil {
		return "", err
	}
	if len(res.Nodes) == 0 {
		return "", fmt.Errorf("no element matches %s", css)
	}
	return res.Nodes[0].SharedID, nil
}

// Click clicks the middle of the first element matching css with the
// mouse, as a person would.
func (p *Page) Click(ctx context.Context, css string) error {
	id, err := p.element(ctx, css)
	if err != nil {
		return err
	}
	return p.c.call(ctx, "input.performActions", map[string]any{
		"context": p.id,
		"actions": []any{map[string]any{
			"type": "pointer", "id": "mouse", "parameters": map[string]any{"pointerType": "mouse"},
			"actions": []any{
				map[string]any{"type": "pointerMove", "x": 0, "y": 0, "origin": map[string]any{"type": "element", "element": map[string]any{"sharedId": id}}},
				map[string]any{"type": "pointerDown", "button": 0},
				map[string]any{"type": "pointerUp", "button": 0},
			},
		}},
	}, nil)
}

// Type clicks the first element matching css and types text into it, one
// key press per character.
func (p *Page) Type(ctx context.Context, css, text string) error {
	if err := p.Click(ctx, css); err != nil {
		return err
	}
	var keys []any
	for _, r := range text {
		keys = append(keys, map[string]any{"type": "keyDown", "value": string(r)}, map[string]any{"type": "keyUp", "value": string(r)})
	}
	return p.c.call(ctx, "input.performActions", map[string]any{
		"context": p.id,
		"actions": []any{map[string]any{"type": "key", "id": "keyboard", "actions": keys}},
	}, nil)
}

// ClickAndWait clicks the first element matching css, then waits until a
// new document has loaded in the tab and the JavaScript expression ready is
// true in it.
func (p *Page) ClickAndWait(ctx context.Context, css, ready string) error {
	if err := p.Eval(ctx, `window.__leaving = true`, nil); err != nil {
		return err
	}
	if err := p.Click(ctx, css); err != nil {
		return err
	}
	return p.WaitFor(ctx, `!window.__leaving && document.readyState === "complete" && (`+ready+`)`)
}

// SetViewport sets the tab's viewport in CSS pixels and its device pixel
// ratio.
func (p *Page) SetViewport(ctx context.Context, width, height int, dpr float64) error {
	return p.c.call(ctx, "browsingContext.setViewport", map[string]any{
		"context": p.id, "viewport": map[string]any{"width": width, "height": height}, "devicePixelRatio": dpr,
	}, nil)
}

// Screenshot returns a PNG of the whole document.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var res struct {
		Data string `json:"data"`
	}
	if err := p.c.call(ctx, "browsingContext.captureScreenshot", map[string]any{"context": p.id, "origin": "document"}, &res); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(res.Data)
}

// CSPViolations returns the Content-Security-Policy violations the current
// document has reported so far.
func (p *Page) CSPViolations(ctx context.Context) ([]string, error) {
	var v []string
	if err := p.Eval(ctx, `window.__cspViolations`, &v); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, errors.New("the document has no CSP recorder (was it loaded before the browser started?)")
	}
	return v, nil
}
