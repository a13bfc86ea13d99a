package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/customer"
	"github.com/pactledger/pactledger/internal/server"
)

// The Delegated profile end to end, as the README's "See it work" runs it:
// ledgerd on the embedded default, pactagent asking, the customer signing
// in with the Brand and choosing, receipts landing in the ledger, and the
// dispute drill passing on the order.
type e2e struct {
	t       *testing.T
	dir     string // the personal agent's directory
	card    string
	ledger  string // REST base
	support string // support API key
	brand   string // the demo brand's base URL
}

func newE2E(t *testing.T) *e2e {
	e := &e2e{t: t, dir: t.TempDir()}
	jwksSrv := httptest.NewServer(nil)
	t.Cleanup(jwksSrv.Close)
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.Provider.Listen = "127.0.0.1:0"
	cfg.Provider.DevicePollInterval = config.Duration(time.Second)
	cfg.DataDir = t.TempDir()
	cfg.Audience = "urn:test:provider"
	cfg.AllowInsecureLoopbackJWKS = true
	cfg.Agents = []config.Agent{{Issuer: jwksSrv.URL, JWKSURI: jwksSrv.URL + "/.well-known/jwks.json"}}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	key, err := os.ReadFile(filepath.Join(cfg.DataDir, "api-keys", "support.key"))
	if err != nil {
		t.Fatal(err)
	}
	e.support = strings.TrimSpace(string(key))
	e.card = "http://" + srv.ProviderAddr() + "/a2a/acme/.well-known/agent-card.json"
	e.brand = "http://" + srv.ProviderAddr() + "/brands/acme"
	e.ledger = "http://" + srv.HTTPAddr()
	// The agent is set up for the Provider: its audience, and its address.
	var out bytes.Buffer
	if err := run([]string{"init", "--dir", e.dir, "--issuer", jwksSrv.URL, "--audience", "urn:test:provider", "--provider", "http://" + srv.ProviderAddr()}, &out); err != nil {
		t.Fatal(err)
	}
	h, err := jwksHandler(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	jwksSrv.Config.Handler = h
	return e
}

// proc is a pactagent command running in the background.
type proc struct {
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (p *proc) Write(b []byte) (int, error) { p.mu.Lock(); defer p.mu.Unlock(); return p.out.Write(b) }
func (p *proc) String() string              { p.mu.Lock(); defer p.mu.Unlock(); return p.out.String() }

func (e *e2e) start(args ...string) *proc {
	p := &proc{done: make(chan error, 1)}
	go func() { p.done <- run(args, p) }()
	return p
}

var linkRe = regexp.MustCompile(`http://\S+user_code=[A-Z-]+`)

// link waits for the sign-in link the agent shows.
func (e *e2e) link(p *proc) string {
	e.t.Helper()
	for range 200 {
		if l := linkRe.FindString(p.String()); l != "" {
			return l
		}
		select {
		case err := <-p.done:
			e.t.Fatalf("pactagent ended before showing a link: %v\n%s", err, p.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.t.Fatalf("no sign-in link shown:\n%s", p.String())
	return ""
}

func (e *e2e) wait(p *proc) (string, error) {
	e.t.Helper()
	select {
	case err := <-p.done:
		return p.String(), err
	case <-time.After(60 * time.Second):
		e.t.Fatalf("pactagent did not finish:\n%s", p.String())
		return "", nil
	}
}

func (e *e2e) agent(user string, args ...string) []string {
	return append([]string{args[0], "--dir", e.dir, "--card", e.card, "--user", user}, args[1:]...)
}

// rest calls the ledger's REST API with the support key.
func (e *e2e) rest(method, path string, body any, out any) int {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.ledger+path, r)
	req.Header.Set("Authorization", "Bearer "+e.support)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		_ = json.NewDecoder(res.Body).Decode(out)
	}
	return res.StatusCode
}

type row struct {
	ID             string `json:"id"`
	Kind           string `json:"kind"`
	Status         string `json:"status"`
	RetentionClass string `json:"retentionClass"`
	Principal      string `json:"principal"`
	GrantID        string `json:"grantId"`
	Refusal        struct {
		Reason string `json:"reason"`
	} `json:"refusal"`
}

// row waits for the ledger to have the row (the Provider's pipeline posts
// in the background).
func (e *e2e) row(id string) row {
	e.t.Helper()
	for range 200 {
		var out struct{ Row row }
		if e.rest("GET", "/v1/rows/"+id, nil, &out) == 200 {
			return out.Row
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("row %s never reached the ledger", id)
	return row{}
}

// rows waits for rows matching a query.
func (e *e2e) rows(query string, n int) []row {
	e.t.Helper()
	return e.rowsUntil(query, fmt.Sprintf("%d rows at least", n), func(rs []row) bool { return len(rs) >= n })
}

// rowsUntil waits for the rows of query to satisfy done, which want
// describes, and returns them.
func (e *e2e) rowsUntil(query, want string, done func([]row) bool) []row {
	e.t.Helper()
	var out struct{ Rows []row }
	for range 200 {
		e.rest("GET", "/v1/rows?"+query, nil, &out)
		if done(out.Rows) {
			return out.Rows
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("rows %s: %+v, want %s", query, out.Rows, want)
	return nil
}

var receiptRe = regexp.MustCompile(`kept as receipts/([0-9a-f]{64})\.json`)

func (e *e2e) grantFile(user string) *grantFile {
	e.t.Helper()
	a := &agent{dir: e.dir, user: user}
	for k, g := range a.grants() {
		if strings.HasSuffix(k, " "+user) {
			return g
		}
	}
	return nil
}

func (e *e2e) editGrant(user string, edit func(*grantFile)) {
	e.t.Helper()
	b, _ := os.ReadFile(filepath.Join(e.dir, "grants.json"))
	var gs map[string]*grantFile
	if err := json.Unmarshal(b, &gs); err != nil {
		e.t.Fatal(err)
	}
	for k, g := range gs {
		if strings.HasSuffix(k, " "+user) {
			edit(g)
		}
	}
	b, _ = json.Marshal(gs)
	if err := os.WriteFile(filepath.Join(e.dir, "grants.json"), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func TestDelegatedEndToEnd(t *testing.T) {
	e := newE2E(t)
	ctx := context.Background()
	jane := customer.New("jane@example.com", "acme-jane-demo")

	// Partial consent: the agent asks for read and cancel, Jane allows read only.
	p := e.start(e.agent("jane", "authorize", "--scope", "orders:read orders:cancel")...)
	if _, err := jane.Answer(ctx, e.link(p), customer.Decision{Keep: []string{"orders:read"}}); err != nil {
		t.Fatal(err)
	}
	out, err := e.wait(p)
	if err != nil || !strings.Contains(out, "Allowed: orders:read") || !strings.Contains(out, "Not allowed: orders:cancel") {
		t.Fatalf("partial consent: %v\n%s", err, out)
	}
	// The link is to sign in with the organization the card names, not
	// with its support agent.
	if !strings.Contains(out, "sign in with Acme Outfitters and choose") || !strings.Contains(out, "Asking Acme Outfitters for permission") {
		t.Fatalf("who to sign in with:\n%s", out)
	}
	if g := e.grantFile("jane"); g == nil || strings.Join(g.Token.Scopes, " ") != "orders:read" {
		t.Fatalf("kept grant %+v", g)
	}

	// Step-up: cancelling needs orders:cancel; the agent asks again, Jane
	// (still signed in with the Brand) allows, the same conversation goes on.
	p = e.start(e.agent("jane", "send", "Please cancel order A-5531")...)
	if _, err := jane.Answer(ctx, e.link(p), customer.Decision{}); err != nil {
		t.Fatal(err)
	}
	out, err = e.wait(p)
	if err != nil || !strings.Contains(out, "I need your permission (orders:cancel)") || !strings.Contains(out, "Order A-5531 is cancelled") {
		t.Fatalf("step-up: %v\n%s", err, out)
	}
	m := receiptRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no receipt kept:\n%s", out)
	}
	// The receipt lands in the ledger, verified, money moved.
	r := e.row(m[1])
	if r.Status != "ROW_STATUS_AUTHORIZED" || r.RetentionClass != "RETENTION_CLASS_MONEY_MOVED" || r.Principal != "acct-48213" {
		t.Fatalf("ledger row %+v", r)
	}
	// The dispute drill on the order passes, on both its rows: the cancel
	// refused beyond the orders:read grant (the step-up) and the receipt.
	var drill struct {
		Report struct {
			ChecksPassed int    `json:"checksPassed"`
			ChecksTotal  int    `json:"checksTotal"`
			Reply        string `json:"reply"`
		} `json:"report"`
	}
	if code := e.rest("POST", "/v1/drills", map[string]string{"target": "A-5531"}, &drill); code != 200 || drill.Report.ChecksTotal != 12 || drill.Report.ChecksPassed != 12 {
		t.Fatalf("drill: %d %+v", code, drill)
	}
	var list bytes.Buffer
	if err := run([]string{"receipts", "--dir", e.dir}, &list); err != nil || !strings.Contains(list.String(), m[1]) {
		t.Fatalf("receipts: %v %s", err, list.String())
	}
	// Its columns line up, however long the grant ids.
	lines := strings.Split(strings.TrimSpace(list.String()), "\n")
	col := strings.Index(lines[0], "RECEIPT")
	for _, l := range lines[1:] {
		if len(l) < col+64 || strings.Contains(l[col:col+64], " ") || l[col-1] != ' ' {
			t.Fatalf("receipts: the row id is not under RECEIPT:\n%s", list.String())
		}
	}

	// Refresh rotation: the token is near its end; the agent refreshes.
	old := e.grantFile("jane").Token.RefreshToken
	e.editGrant("jane", func(g *grantFile) { g.Token.Expires = time.Now() })
	out, err = e.wait(e.start(e.agent("jane", "send", "What is the status of order A-88213?")...))
	if err != nil || !strings.Contains(out, "shipped") || !strings.Contains(out, "receipt verified") {
		t.Fatalf("after refresh: %v\n%s", err, out)
	}
	if e.grantFile("jane").Token.RefreshToken == old {
		t.Fatal("the refresh token did not rotate")
	}
	// Reusing the spent refresh token once its successor was spent too
	// (a retry of a lost answer is answered within seconds, not then)
	// revokes the grant, at the Provider and in the ledger.
	a, err := connect(e.dir, e.card, "jane", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.Refresh(ctx, &e.grantFile("jane").Server, "jane", e.grantFile("jane").Token.RefreshToken); err != nil {
		t.Fatalf("refresh with the successor: %v", err)
	}
	if _, err := a.c.Refresh(ctx, &e.grantFile("jane").Server, "jane", old); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("reused refresh token: %v", err)
	}
	grant := e.grantFile("jane").Token.GrantID
	out, err = e.wait(e.start(e.agent("jane", "send", "status of A-88213")...))
	if err == nil || !strings.Contains(err.Error(), "refused the delegation token") {
		t.Fatalf("send after refresh reuse: %v\n%s", err, out)
	}
	e.revoked(grant)

	// A tampered token is refused (and the agent drops it).
	e.authorizeAll(jane, "jane")
	e.editGrant("jane", func(g *grantFile) {
		parts := strings.Split(g.Token.AccessToken, ".")
		claims := strings.Replace(parts[1], parts[1][:4], "eyJz", 1)
		g.Token.AccessToken = parts[0] + "." + claims + "." + parts[2]
	})
	if _, err := e.wait(e.start(e.agent("jane", "send", "status of A-88213")...)); err == nil || !strings.Contains(err.Error(), "refused the delegation token") {
		t.Fatalf("tampered token: %v", err)
	}

	// The user revokes the grant on the Brand's account page.
	e.authorizeAll(jane, "jane")
	grant = e.grantFile("jane").Token.GrantID
	if err := jane.Revoke(ctx, e.brand+"/grants", grant); err != nil {
		t.Fatal(err)
	}
	if _, err := e.wait(e.start(e.agent("jane", "send", "status of A-88213")...)); err == nil || !strings.Contains(err.Error(), "refused the delegation token") {
		t.Fatalf("revoked grant: %v", err)
	}
	e.revoked(grant)
	// The attempt under the revoked grant reaches the ledger as a refusal
	// of the grant's customer, naming the grant.
	e.refusal("principal=acct-48213", "request under delegation grant "+grant+" ")

	// Denial: Sam denies; the agent says so and the ledger records a refusal.
	sam := customer.New("sam@example.com", "acme-sam-demo")
	p = e.start(e.agent("sam", "authorize", "--scope", "orders:read")...)
	if _, err := sam.Answer(ctx, e.link(p), customer.Decision{Deny: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.wait(p); err == nil || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("denied: %v", err)
	}
	if rs := e.rows("principal=acct-10977", 1); rs[0].Kind != "ROW_KIND_REFUSAL" || rs[0].RetentionClass != "RETENTION_CLASS_REFUSED" {
		t.Fatalf("refusal row %+v", rs[0])
	}

	// Under §3 alone a change is refused in chat and on record.
	out, err = e.wait(e.start(e.agent("sam", "send", "--identity-only", "cancel order B-2001")...))
	if err != nil || !strings.Contains(out, "can't change orders") {
		t.Fatalf("identity-only change: %v\n%s", err, out)
	}
	e.rows(url.Values{"principal": {"sub sam of " + a.c.Issuer}}.Encode(), 1)
}

// refusal waits for a refusal row among the rows of query whose reason
// holds want.
func (e *e2e) refusal(query, want string) {
	e.t.Helper()
	e.rowsUntil(query, "a refusal whose reason holds "+strconv.Quote(want), func(rs []row) bool {
		return slices.ContainsFunc(rs, func(r row) bool { return r.Kind == "ROW_KIND_REFUSAL" && strings.Contains(r.Refusal.Reason, want) })
	})
}

// authorizeAll runs pactagent authorize for read and cancel and lets the
// customer allow both. It returns what the agent printed.
func (e *e2e) authorizeAll(c *customer.Customer, user string) string {
	e.t.Helper()
	p := e.start(e.agent(user, "authorize", "--scope", "orders:read orders:cancel")...)
	if _, err := c.Answer(context.Background(), e.link(p), customer.Decision{}); err != nil {
		e.t.Fatal(err)
	}
	out, err := e.wait(p)
	if err != nil {
		e.t.Fatalf("authorize: %v\n%s", err, out)
	}
	return out
}

// revoked waits for the ledger to know the grant is revoked.
func (e *e2e) revoked(grant string) {
	e.t.Helper()
	for range 200 {
		var g struct {
			Revocation *struct {
				RevokedAt string `json:"revokedAt"`
			} `json:"revocation"`
		}
		if e.rest("GET", "/v1/grants/"+grant, nil, &g) == 200 && g.Revocation != nil && g.Revocation.RevokedAt != "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("the ledger never learned that grant %s was revoked", grant)
}
