package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/pact"
)

// shop is ledgerd with its Provider serving a delegating brand "shop",
// posting to the ledger with a writer key.
type shop struct {
	*env
	p    *pact.Provider
	base string
}

// waitDepth waits, at most within, for the Provider's outbox to hold want
// entries.
func waitDepth(t *testing.T, s *shop, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for s.p.PipelineDepth() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the Provider's outbox holds %d entries after %s, want %d", s.p.PipelineDepth(), within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newShop(t testing.TB, more ...func(*config.Config)) *shop {
	brands := t.TempDir()
	builtin, err := os.ReadFile("../../pact/brands/acme.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(brands, "shop.yaml"), []byte(strings.Replace(string(builtin), "id: acme", "id: shop", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "writer.key")
	if err := os.WriteFile(keyFile, []byte(keys["writer"]), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, jose.ES256, func(c *config.Config) {
		c.Provider.BrandsDir = brands
		c.Provider.LedgerKeyFile = keyFile
		for _, m := range more {
			m(c)
		}
	})
	return &shop{env: e, p: e.srv.Provider(), base: "http://" + e.srv.ProviderAddr() + "/a2a/shop"}
}

func (s *shop) paJWT() string { return s.paJWTAs("u1") }

// paJWTAs is the personal agent's JWT for its User sub.
func (s *shop) paJWTAs(sub string) string {
	now := time.Now()
	return s.sc.PA.Key.Sign(map[string]any{"iss": s.sc.PA.ID, "sub": sub, "aud": s.sc.Audience, "iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix()})
}

func (s *shop) form(t testing.TB, path string, v url.Values) map[string]any {
	return s.formAs(t, "u1", path, v)
}

// formAs posts a form as the personal agent's User sub.
func (s *shop) formAs(t testing.TB, sub, path string, v url.Values) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+s.paJWTAs(sub))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return m
}

// token runs the device flow, approved by acct-48213 through the
// Provider's hook (the pages are tested in pact and cmd/pactagent).
func (s *shop) token(t testing.TB) string { return s.tokenAs(t, "u1") }

// tokenAs runs the device flow for the personal agent's User sub. A
// grant replaces the earlier grants of the same agent, sub and Brand
// user (docs/design/036): grants held at once are for different subs.
func (s *shop) tokenAs(t testing.TB, sub string) string {
	t.Helper()
	da := s.formAs(t, sub, "/oauth/device_authorization", url.Values{"client_id": {s.sc.PA.ID}, "scope": {"orders:read orders:cancel"}})
	if err := s.p.Approve(da["user_code"].(string), "acct-48213", []string{"orders:read", "orders:cancel"}); err != nil {
		t.Fatal(err)
	}
	tok := s.formAs(t, sub, "/oauth/token", url.Values{"client_id": {s.sc.PA.ID}, "grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da["device_code"].(string)}})
	at, _ := tok["access_token"].(string)
	if at == "" {
		t.Fatalf("token: %v", tok)
	}
	return at
}

// send sends one message with the token and returns the reply's message id.
func (s *shop) send(t testing.TB, at, id, text string) string {
	t.Helper()
	return s.sendAs(t, "u1", at, id, text)
}

// sendAs sends one message as the personal agent's User sub with the
// token (one of that sub's grants) and returns the reply's message id.
func (s *shop) sendAs(t testing.TB, sub, at, id, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []map[string]any{{"text": text}}}})
	req, _ := http.NewRequest("POST", s.base+"/message:send", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+s.paJWTAs(sub))
	req.Header.Set("X-A2A-User-Delegation", "Bearer "+at)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var out struct{ Message struct{ MessageID string } }
	if res.StatusCode != 200 || !strings.Contains(string(raw), "pact.receipt") || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("send: %d %s", res.StatusCode, raw)
	}
	return out.Message.MessageID
}

// A delegated turn at the embedded Provider lands in the ledger through the
// Provider's pipeline, verified AUTHORIZED with the right retention class.
func TestProviderReceiptsLandInTheLedger(t *testing.T) {
	s := newShop(t)
	s.send(t, s.token(t), "m1", "cancel order A-5531")
	deadline := time.Now().Add(15 * time.Second)
	for {
		var list struct{ Rows []Row }
		s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
		if len(list.Rows) == 1 {
			r := list.Rows[0]
			if r.Status != "ROW_STATUS_AUTHORIZED" || r.RetentionClass != "RETENTION_CLASS_MONEY_MOVED" || r.Principal != "acct-48213" || r.Brand != s.base {
				t.Fatalf("row %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the receipt never reached the ledger (pipeline depth %d)", s.p.PipelineDepth())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The entry leaves the outbox once the ledger's answer is in.
	waitDepth(t, s, 0, time.Until(deadline))
}

// The ledger is unreachable while a burst of delegated turns runs: every
// receipt waits in the Provider's outbox, and when the ledger is back they
// all land, posted in the order they were served, the backlog in
// AppendReceipts calls.
func TestReceiptsSurviveTheLedgerBeingDown(t *testing.T) {
	var mu sync.Mutex
	down := true
	var target *httputil.ReverseProxy
	var dropped atomic.Int64 // posts the unreachable ledger dropped
	var posted []string      // message ids, in the order the ledger received them
	var batches int          // AppendReceipts calls
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		isDown, proxy := down, target
		mu.Unlock()
		if isDown || proxy == nil {
			dropped.Add(1)
			// As an unreachable ledger: the connection drops.
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		if r.URL.Path == "/v1/receipts" || r.URL.Path == "/v1/receipts:batch" {
			b, _ := io.ReadAll(r.Body)
			var p struct {
				MessageID string
				Receipts  []struct{ MessageID string }
			}
			_ = json.Unmarshal(b, &p)
			mu.Lock()
			if r.URL.Path == "/v1/receipts" {
				posted = append(posted, p.MessageID)
			}
			for _, rc := range p.Receipts {
				posted = append(posted, rc.MessageID)
			}
			batches += min(len(p.Receipts), 1)
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(b)))
		}
		proxy.ServeHTTP(w, r)
	}))
	defer gate.Close()
	s := newShop(t, func(c *config.Config) {
		c.Provider.LedgerURL = gate.URL
		c.Provider.RateLimits = config.RateLimits{} // a burst from one user
	})
	u, _ := url.Parse("http://" + s.srv.HTTPAddr())
	mu.Lock()
	target = httputil.NewSingleHostReverseProxy(u)
	mu.Unlock()

	at := s.token(t)
	const burst = 40
	var served []string
	for i := range burst {
		served = append(served, s.send(t, at, "m"+string(rune('A'+i%26))+string(rune('a'+i/26)), "what is the status of order A-88213?"))
	}
	// Wait until the pipeline has tried (and failed) after the last turn.
	tried := dropped.Load()
	deadline := time.Now().Add(30 * time.Second)
	for dropped.Load() == tried {
		if time.Now().After(deadline) {
			t.Fatal("the pipeline never tried the unreachable ledger")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := s.p.PipelineDepth(); d != burst {
		t.Fatalf("outbox depth while the ledger is down: %d, want %d", d, burst)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	waitDepth(t, s, 0, 30*time.Second)
	mu.Lock()
	got := slices.Clone(posted)
	mu.Unlock()
	if !slices.Equal(got, served) {
		t.Fatalf("posted in another order or not all:\n got %v\nwant %v", got, served)
	}
	mu.Lock()
	calls := batches
	mu.Unlock()
	if calls == 0 || calls > burst/2 {
		t.Fatalf("%d AppendReceipts calls for a backlog of %d receipts, want them posted together", calls, burst)
	}
	var list struct{ Rows []Row }
	s.call(t, "GET", "/v1/rows?target=A-88213&pageSize=100", "support", nil, &list)
	if len(list.Rows) != burst {
		t.Fatalf("ledger rows: %d, want %d", len(list.Rows), burst)
	}
	for _, r := range list.Rows {
		if r.Status != "ROW_STATUS_AUTHORIZED" || r.RetentionClass != "RETENTION_CLASS_READ_ONLY" {
			t.Fatalf("row %+v", r)
		}
	}
}
