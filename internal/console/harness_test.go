package console_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/console"
	"github.com/pactledger/pactledger/internal/headless"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// keys are the test API keys, one per role; each key is named <role>-key.
var keys = map[string]string{
	config.RoleWriter:  "test-writer-key",
	config.RoleSupport: "test-support-key",
	config.RoleAuditor: "test-auditor-key",
	config.RoleAdmin:   "test-admin-key",
}

// env is an in-process ledgerd (as internal/server's tests build it) with
// the console mounted on an httptest server, calling ledgerd's gRPC
// listener through the generated client.
type env struct {
	sc     *pacttest.Scenario
	cfg    config.Config
	srv    *server.Server
	client ledgerv1.LedgerServiceClient
	web    *httptest.Server
	logs   *syncbuf.Buffer
}

type envOpt func(*env, *console.Config)

// withClock makes the console's clock read *now.
func withClock(now *time.Time, mu *sync.Mutex) envOpt {
	return func(_ *env, c *console.Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return *now }
	}
}

func withSecure() envOpt { return func(_ *env, c *console.Config) { c.Secure = true } }

// withTrustedProxies makes the console believe X-Forwarded-For from these.
func withTrustedProxies(p ...netip.Prefix) envOpt {
	return func(_ *env, c *console.Config) { c.TrustedProxies = p }
}

// preRecord lets a test write rows into the data directory before ledgerd
// starts (a ledger with another clock).
func newEnv(t *testing.T, pre func(e *env), opts ...envOpt) *env {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	off := false
	cfg.Provider.Enabled = &off
	cfg.DataDir = t.TempDir()
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	for _, role := range config.Roles {
		cfg.APIKeys = append(cfg.APIKeys, config.APIKey{Name: role + "-key", SHA256: config.HashKey(keys[role]), Roles: []string{role}})
	}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	cfg.ShutdownTimeout = config.Duration(5 * time.Second)
	e := &env{sc: sc, cfg: cfg, logs: &syncbuf.Buffer{}}
	if pre != nil {
		pre(e)
	}

	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	e.srv = srv
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = ledgerv1.NewLedgerServiceClient(conn)

	ccfg := console.Config{Client: e.client, Logger: slog.New(slog.NewTextHandler(e.logs, nil))}
	for _, o := range opts {
		o(e, &ccfg)
	}
	h, err := console.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, h)
	e.web = httptest.NewServer(mux)
	t.Cleanup(e.web.Close)
	return e
}

// as is a context carrying role's key, for calls to the API directly.
func as(role string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keys[role])
}

// record appends r through the API as the writer.
func (e *env) record(t *testing.T, r *pacttest.Receipt) *ledgerv1.Row {
	t.Helper()
	req := &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken}
	for _, a := range r.Actions {
		req.Actions = append(req.Actions, &ledgerv1.Action{Tool: a.Tool, Target: a.Target, ArgsJson: a.ArgsJSON})
	}
	resp, err := e.client.AppendReceipt(as(config.RoleWriter), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetRow()
}

// recordBefore writes r into the data directory as a ledger whose clock
// reads at (before ledgerd starts: retention counts from recording).
func (e *env) recordBefore(t *testing.T, at time.Time, r *pacttest.Receipt) *ledger.Row {
	t.Helper()
	l, store := e.ledgerBefore(t, at)
	row, _, err := l.AppendReceipt(context.Background(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
	if err != nil {
		t.Fatal(err)
	}
	// A row recorded that long ago had its objects uploaded long since.
	if err := storetest.DrainOutbox(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	return row
}

// ledgerBefore opens a ledger on the data directory before ledgerd starts,
// whose clock reads at; the caller closes the store.
func (e *env) ledgerBefore(t *testing.T, at time.Time) (*ledger.Ledger, *bolt.Store) {
	t.Helper()
	if err := os.MkdirAll(e.cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := bolt.Open(filepath.Join(e.cfg.DataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := localdir.Open(filepath.Join(e.cfg.DataDir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: e.sc.Audience})
	l, err := ledger.New(store, objects, v, e.sc.Static(at), ledger.Config{Now: func() time.Time { return at }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return l, store
}

// playbook records the worked scenario's row: acct-48213 cancels A-5531
// at 13:12:44 on Oct 7 under a grant of orders:read and orders:cancel.
func (e *env) playbook(t *testing.T) *ledgerv1.Row {
	t.Helper()
	return e.record(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", At: time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)}))
}

// browser starts headless Chromium for a test (skipped without it,
// except under make test).
func browser(t *testing.T) context.Context { return headless.Browser(t, 90*time.Second) }

// signIn signs in through the browser with role's key (or a raw key).
func (e *env) signIn(t *testing.T, ctx context.Context, role string) {
	t.Helper()
	key := keys[role]
	if key == "" {
		key = role
	}
	err := chromedp.Do(ctx,
		chromedp.Navigate(e.web.URL+"/console/"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("who-name")),
	)
	if err != nil {
		t.Fatalf("sign in as %s: %v", role, err)
	}
}

// text is the trimmed text of the element with id.
func text(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id)))
	if err != nil {
		t.Fatalf("text of #%s: %v", id, err)
	}
	return strings.TrimSpace(s)
}

// loaded waits until the page has loaded its stylesheets and scripts: an
// element can be visible before then, and its innerText read without the
// stylesheet's white-space loses the text's line breaks.
func loaded(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the %s page never finished loading: %v", page, err)
	}
}

// count is the number of elements matching a CSS selector.
func count(t *testing.T, ctx context.Context, css string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(css)+`).length`))
	if err != nil {
		t.Fatalf("count %s: %v", css, err)
	}
	return n
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// webClient is a plain HTTP client with a cookie jar for the console.
type webClient struct {
	*http.Client
	base string
	csrf string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// newSupportLead starts the console on the playbook's ledger and signs a
// web client in with the support key.
func newSupportLead(t *testing.T) (*env, *ledgerv1.Row, *webClient) {
	t.Helper()
	e := newEnv(t, nil)
	row := e.playbook(t)
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)
	return e, row, c
}

// redirect fetches path and returns the status and the Location it
// answers with.
func (c *webClient) redirect(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(c.base + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

func (e *env) newWebClient(t *testing.T) *webClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &webClient{Client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, base: e.web.URL}
}

// newWebClientFrom is a web client whose connections come from the
// loopback address from (127.0.0.2, say: all of 127/8 is loopback).
func (e *env) newWebClientFrom(t *testing.T, from string) *webClient {
	t.Helper()
	c := e.newWebClient(t)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	c.Transport = tr
	return c
}

// get fetches path and returns the status and body, remembering the page's
// CSRF token.
func (c *webClient) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := c.Get(c.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindSubmatch(b); m != nil {
		c.csrf = string(m[1])
	}
	return resp.StatusCode, string(b)
}

// post posts a form and returns the response (body read into a string).
func (c *webClient) post(t *testing.T, path string, form url.Values, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", c.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signIn signs c in with role's key and returns the sign-in response.
func (c *webClient) signIn(t *testing.T, role string) *http.Response {
	t.Helper()
	if code, _ := c.get(t, "/console/signin"); code != 200 {
		t.Fatalf("GET signin = %d", code)
	}
	resp, _ := c.post(t, "/console/signin", url.Values{"csrf": {c.csrf}, "key": {keys[role]}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in as %s = %d", role, resp.StatusCode)
	}
	if code, _ := c.get(t, "/console/search"); code != 200 { // the session's CSRF token
		t.Fatalf("search after sign-in = %d", code)
	}
	return resp
}
