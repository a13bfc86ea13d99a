package pact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/pact"
	"github.com/pactledger/pactledger/verifier"
)

type env struct {
	agent pact.Agent
	sc    *pacttest.Scenario
	srv   *httptest.Server
	p     *pact.Provider
	iface string
	dir   string
	key   *pacttest.Key
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir()}
	t.Cleanup(e.sc.Close)
	e.key = e.sc.PA.Key
	e.start(t)
	return e
}

func (e *env) start(t testing.TB) {
	t.Helper()
	brands, err := pact.LoadBrands("")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, e.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: e.sc.Audience})
	var handler http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	e.p, err = pact.New(pact.Config{BaseURL: e.srv.URL, Verifier: v, Keys: reg, Brands: brands, StorePath: filepath.Join(e.dir, "provider.db"), Logger: slog.New(slog.DiscardHandler), Agent: e.agent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.p.Close() })
	handler = e.p
	e.iface = e.srv.URL + "/a2a/acme"
}

// jwt mints a personal-agent JWT; edit changes its claims.
func (e *env) jwt(sub string, edit func(map[string]any)) string {
	now := time.Now()
	c := map[string]any{"iss": e.sc.PA.ID, "sub": sub, "aud": e.sc.Audience, "iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix()}
	if edit != nil {
		edit(c)
	}
	return e.key.Sign(c)
}

type resp struct {
	code int
	hdr  http.Header
	body []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

func (r resp) reason() string {
	var m struct {
		Error struct {
			Code    int
			Status  string
			Message string
			Details []struct {
				Type   string `json:"@type"`
				Reason string
				Domain string
			}
		}
	}
	if json.Unmarshal(r.body, &m) != nil || len(m.Error.Details) == 0 || m.Error.Details[0].Domain != "a2a-protocol.org" ||
		m.Error.Details[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" || m.Error.Code != r.code {
		return ""
	}
	return m.Error.Details[0].Reason
}

func (e *env) do(t *testing.T, method, url, token string, body any) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

func msg(id, ctx, text string) map[string]any {
	m := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []map[string]any{{"text": text}}}
	if ctx != "" {
		m["contextId"] = ctx
	}
	return map[string]any{"message": m}
}

func replyText(t *testing.T, r resp) (string, string) {
	t.Helper()
	var m struct {
		Message struct {
			ContextID string `json:"contextId"`
			Role      string
			Parts     []struct{ Text string }
		}
	}
	if err := json.Unmarshal(r.body, &m); err != nil || m.Message.Role != "ROLE_AGENT" || len(m.Message.Parts) != 1 || m.Message.ContextID == "" {
		t.Fatalf("reply %d %s", r.code, r.body)
	}
	if ct := r.hdr.Get("Content-Type"); ct != pact.ContentType {
		t.Fatalf("content type %q", ct)
	}
	return m.Message.Parts[0].Text, m.Message.ContextID
}

func TestAgentCard(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "GET", e.iface+"/.well-known/agent-card.json", "", nil)
	if r.code != 200 || r.hdr.Get("Content-Type") != pact.ContentType {
		t.Fatalf("card %d %s", r.code, r.hdr.Get("Content-Type"))
	}
	var card struct {
		Name                string
		SupportedInterfaces []struct{ URL, ProtocolBinding, ProtocolVersion string }
		Capabilities        map[string]bool
		SecuritySchemes     map[string]struct {
			HTTPAuthSecurityScheme struct{ Scheme, BearerFormat string } `json:"httpAuthSecurityScheme"`
		}
		SecurityRequirements []struct {
			Schemes map[string]struct{ List []string }
		}
		DefaultInputModes []string
		Skills            []struct{ ID string }
	}
	if err := json.Unmarshal(r.body, &card); err != nil {
		t.Fatal(err)
	}
	if len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0].URL != e.iface || card.SupportedInterfaces[0].ProtocolBinding != "HTTP+JSON" || card.SupportedInterfaces[0].ProtocolVersion != "1.0" {
		t.Fatalf("interfaces %+v", card.SupportedInterfaces)
	}
	s := card.SecuritySchemes["paJwt"].HTTPAuthSecurityScheme
	// The PA-JWT-only requirement comes first and stays (the demo brand also
	// offers delegation, checked in oauth_test.go).
	if _, ok := card.SecurityRequirements[0].Schemes["paJwt"]; s.Scheme != "Bearer" || s.BearerFormat != "JWT" || len(card.SecurityRequirements) == 0 || len(card.SecurityRequirements[0].Schemes) != 1 || !ok {
		t.Fatalf("security %+v %+v", card.SecuritySchemes, card.SecurityRequirements)
	}
	for _, c := range []string{"streaming", "pushNotifications", "extendedAgentCard"} {
		if v, ok := card.Capabilities[c]; !ok || v {
			t.Fatalf("capability %s = %v", c, v)
		}
	}
	if card.Name == "" || len(card.Skills) == 0 || len(card.DefaultInputModes) == 0 {
		t.Fatalf("card %+v", card)
	}
	if r := e.do(t, "GET", e.srv.URL+"/a2a/nobody/.well-known/agent-card.json", "", nil); r.code != 404 || r.reason() != "" || r.hdr.Get("Content-Type") == pact.ContentType {
		t.Fatalf("unknown brand card: %d %s", r.code, r.body)
	}
}

func TestRoutingBeforeAuthentication(t *testing.T) {
	e := newEnv(t)
	good := e.jwt("u1", nil)
	tests := []struct {
		name, method, url, token string
		code                     int
	}{
		{"unknown brand, valid token", "POST", e.srv.URL + "/a2a/nobody/message:send", good, 404},
		{"unknown route", "POST", e.iface + "/message:shout", "", 404},
		{"wrong method", "GET", e.iface + "/message:send", "", 405},
		{"outside /a2a", "GET", e.srv.URL + "/", "", 404},
		{"no token", "POST", e.iface + "/message:send", "", 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, tc.method, tc.url, tc.token, msg("m1", "", "hi"))
			if r.code != tc.code || r.reason() != "" || r.hdr.Get("Content-Type") == pact.ContentType {
				t.Fatalf("= %d %q %s, want %d with no A2A body", r.code, r.hdr.Get("Content-Type"), r.body, tc.code)
			}
			if tc.code == 401 && r.hdr.Get("WWW-Authenticate") != `Bearer realm="a2a"` {
				t.Fatalf("WWW-Authenticate %q", r.hdr.Get("WWW-Authenticate"))
			}
		})
	}
}

func TestPersonalAgentJWT(t *testing.T) {
	e := newEnv(t)
	other := pacttest.MustKey("pa-2026-09", jose.ES256)
	now := time.Now()
	tests := []struct {
		name  string
		token func() string
		ok    bool
	}{
		{"valid", func() string { return e.jwt("u1", nil) }, true},
		{"RS256 key of the wrong type", func() string {
			return pacttest.MustKey("pa-2026-09", jose.RS256).Sign(map[string]any{"iss": e.sc.PA.ID, "sub": "u", "aud": e.sc.Audience, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
		}, false},
		{"signed by another key", func() string {
			return other.Sign(map[string]any{"iss": e.sc.PA.ID, "sub": "u", "aud": e.sc.Audience, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
		}, false},
		{"unregistered issuer", func() string { return e.jwt("u1", func(c map[string]any) { c["iss"] = "https://unknown.example" }) }, false},
		{"iss differs by a slash", func() string { return e.jwt("u1", func(c map[string]any) { c["iss"] = e.sc.PA.ID + "/" }) }, false},
		{"no sub", func() string { return e.jwt("", func(c map[string]any) { delete(c, "sub") }) }, false},
		{"aud is the interface URL", func() string { return e.jwt("u1", func(c map[string]any) { c["aud"] = e.iface }) }, false},
		{"aud is the card URL", func() string {
			return e.jwt("u1", func(c map[string]any) { c["aud"] = e.iface + "/.well-known/agent-card.json" })
		}, false},
		{"iat 60s ahead", func() string {
			return e.jwt("u1", func(c map[string]any) {
				c["iat"] = now.Add(60 * time.Second).Unix()
				c["exp"] = now.Add(180 * time.Second).Unix()
			})
		}, false},
		{"iat 20s ahead within skew", func() string {
			return e.jwt("u1", func(c map[string]any) { c["iat"] = now.Add(20 * time.Second).Unix() })
		}, true},
		{"exp over 300s after iat", func() string {
			return e.jwt("u1", func(c map[string]any) { c["iat"], c["exp"] = now.Unix(), now.Add(301*time.Second).Unix() })
		}, false},
		{"expired", func() string {
			return e.jwt("u1", func(c map[string]any) {
				c["iat"] = now.Add(-200 * time.Second).Unix()
				c["exp"] = now.Add(-60 * time.Second).Unix()
			})
		}, false},
		{"no exp", func() string { return e.jwt("u1", func(c map[string]any) { delete(c, "exp") }) }, false},
		{"alg none", func() string { return "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ1In0." }, false},
		{"garbage", func() string { return "not-a-jwt" }, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", e.iface+"/message:send", tc.token(), msg("m"+itoa(i), "", "hello"))
			if tc.ok != (r.code == 200) {
				t.Fatalf("= %d %s", r.code, r.body)
			}
			if !tc.ok && (r.code != 401 || len(r.body) != 0 || r.hdr.Get("WWW-Authenticate") != `Bearer realm="a2a"`) {
				t.Fatalf("failure must be a bare 401: %d %q %q", r.code, r.hdr.Get("WWW-Authenticate"), r.body)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestMessageRules(t *testing.T) {
	e := newEnv(t)
	tok := e.jwt("u1", nil)
	send := func(body any) resp { return e.do(t, "POST", e.iface+"/message:send", tok, body) }
	tests := []struct {
		name   string
		body   any
		code   int
		reason string
	}{
		{"bad JSON", `{"message":`, 400, "INVALID_PARAMS"},
		{"no message", `{}`, 400, "INVALID_PARAMS"},
		{"wrong role", map[string]any{"message": map[string]any{"messageId": "x", "role": "ROLE_AGENT", "parts": []map[string]any{{"text": "hi"}}}}, 400, "INVALID_PARAMS"},
		{"file part before blank check", map[string]any{"message": map[string]any{"messageId": "x", "role": "ROLE_USER", "parts": []map[string]any{{"text": " "}, {"url": "https://x/y.png", "mediaType": "image/png"}}}}, 400, "CONTENT_TYPE_NOT_SUPPORTED"},
		{"data part", map[string]any{"message": map[string]any{"messageId": "x", "role": "ROLE_USER", "parts": []map[string]any{{"data": map[string]any{"a": 1}}}}}, 400, "CONTENT_TYPE_NOT_SUPPORTED"},
		{"blank text", map[string]any{"message": map[string]any{"messageId": "x", "role": "ROLE_USER", "parts": []map[string]any{{"text": "  "}}}}, 400, "INVALID_PARAMS"},
		{"no parts", map[string]any{"message": map[string]any{"messageId": "x", "role": "ROLE_USER", "parts": []any{}}}, 400, "INVALID_PARAMS"},
		{"taskId", map[string]any{"message": map[string]any{"messageId": "x", "taskId": "t-1", "role": "ROLE_USER", "parts": []map[string]any{{"text": "hi"}}}}, 404, "TASK_NOT_FOUND"},
		{"unknown contextId", msg("x", "no-such-context", "hi"), 400, "INVALID_PARAMS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := send(tc.body)
			if r.code != tc.code || r.reason() != tc.reason || r.hdr.Get("Content-Type") != pact.ContentType {
				t.Fatalf("= %d %s, want %d %s", r.code, r.body, tc.code, tc.reason)
			}
		})
	}
}

func TestOtherOperations(t *testing.T) {
	e := newEnv(t)
	tok := e.jwt("u1", nil)
	// The messages are A2A's conventional ones (the SDKs fix them), with the
	// task id after a colon; the Provider's reason stays in the details.
	tests := []struct {
		method, path string
		code         int
		reason       string
		message      string
	}{
		{"GET", "/tasks/t-1", 404, "TASK_NOT_FOUND", "Task not found: t-1"},
		{"POST", "/tasks/t-1:cancel", 404, "TASK_NOT_FOUND", "Task not found: t-1"},
		{"POST", "/message:stream", 400, "UNSUPPORTED_OPERATION", "This operation is not supported"},
		{"POST", "/tasks/t-1:subscribe", 400, "UNSUPPORTED_OPERATION", "This operation is not supported"},
		{"GET", "/extendedAgentCard", 400, "UNSUPPORTED_OPERATION", "This operation is not supported"},
		{"POST", "/tasks/t-1/pushNotificationConfigs", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED", "Push Notification is not supported"},
		{"GET", "/tasks/t-1/pushNotificationConfigs/c-1", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED", "Push Notification is not supported"},
		{"GET", "/tasks?pageSize=0", 400, "INVALID_PARAMS", "pageSize must be between 1 and 100"},
		{"GET", "/tasks?pageSize=101", 400, "INVALID_PARAMS", "pageSize must be between 1 and 100"},
	}
	for _, tc := range tests {
		r := e.do(t, tc.method, e.iface+tc.path, tok, nil)
		if r.code != tc.code || r.reason() != tc.reason {
			t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, r.code, r.body, tc.code, tc.reason)
			continue
		}
		var env struct {
			Error struct {
				Message string
				Details []struct{ Metadata map[string]string }
			}
		}
		if err := json.Unmarshal(r.body, &env); err != nil || env.Error.Message != tc.message || len(env.Error.Details) != 1 || env.Error.Details[0].Metadata["detail"] == "" {
			t.Errorf("%s %s: message %q details %+v, want %q and a detail", tc.method, tc.path, env.Error.Message, env.Error.Details, tc.message)
		}
	}
	r := e.do(t, "GET", e.iface+"/tasks", tok, nil)
	m := r.json(t)
	if r.code != 200 || m["pageSize"] != float64(50) || m["totalSize"] != float64(0) || m["nextPageToken"] != "" || len(m["tasks"].([]any)) != 0 {
		t.Fatalf("list tasks: %d %s", r.code, r.body)
	}
	if r := e.do(t, "GET", e.iface+"/tasks?pageSize=7", tok, nil); r.json(t)["pageSize"] != float64(7) {
		t.Fatalf("pageSize 7: %s", r.body)
	}
}

func TestConversationContextsAndRetries(t *testing.T) {
	e := newEnv(t)
	jane := e.jwt("jane", nil)
	send := func(tok, id, ctx, text string) resp {
		return e.do(t, "POST", e.iface+"/message:send", tok, msg(id, ctx, text))
	}
	text, ctx := replyText(t, send(jane, "m1", "", "Where is my order A-88213?"))
	if !strings.Contains(text, "email") {
		t.Fatalf("agent revealed before verifying: %q", text)
	}
	text, ctx2 := replyText(t, send(jane, "m2", ctx, "jane@example.com"))
	if ctx2 != ctx || !strings.Contains(text, "shipped") {
		t.Fatalf("turn 2: %q in %s", text, ctx2)
	}
	// A retry returns the stored reply without re-running the agent.
	again, _ := replyText(t, send(jane, "m2", ctx, "something else entirely"))
	if again != text {
		t.Fatalf("retry re-ran the agent: %q vs %q", again, text)
	}
	// Another sub or another brand cannot use the context, and is told the
	// same as for a context that does not exist.
	sam := e.jwt("sam", nil)
	r := send(sam, "m3", ctx, "hello")
	var m struct{ Error struct{ Message string } }
	_ = json.Unmarshal(r.body, &m)
	if r.code != 400 || r.reason() != "INVALID_PARAMS" || m.Error.Message != "Unknown contextId" {
		t.Fatalf("foreign sub: %d %s", r.code, r.body)
	}
	unknown := send(sam, "m3", "f0c12e6b-0000-0000-0000-000000000000", "hello")
	if string(unknown.body) != string(r.body) {
		t.Fatalf("foreign and unknown contexts differ: %s vs %s", r.body, unknown.body)
	}
	// Closing the conversation: later messages are UNSUPPORTED_OPERATION.
	replyText(t, send(jane, "m4", ctx, "thanks, bye"))
	if r := send(jane, "m5", ctx, "one more thing"); r.code != 400 || r.reason() != "UNSUPPORTED_OPERATION" {
		t.Fatalf("closed context: %d %s", r.code, r.body)
	}
	// Account changes are refused without delegation.
	text, _ = replyText(t, send(jane, "m6", "", "cancel order A-5531"))
	if !strings.Contains(text, "sign in") {
		t.Fatalf("change without a grant: %q", text)
	}
}

func TestConversationsSurviveRestart(t *testing.T) {
	e := newEnv(t)
	tok := e.jwt("jane", nil)
	text, ctx := replyText(t, e.do(t, "POST", e.iface+"/message:send", tok, msg("m1", "", "order A-5531")))
	e.p.Close()
	e.srv.Close()
	e.start(t)
	again, ctx2 := replyText(t, e.do(t, "POST", e.iface+"/message:send", tok, msg("m1", ctx, "order A-5531")))
	if again != text || ctx2 != ctx {
		t.Fatalf("stored reply lost across restart: %q vs %q", again, text)
	}
	text, _ = replyText(t, e.do(t, "POST", e.iface+"/message:send", tok, msg("m2", ctx, "jane@example.com")))
	if !strings.Contains(text, "processing") {
		t.Fatalf("agent state lost across restart: %q", text)
	}
}

// TestConcurrentConversations runs 1,000 conversations at once, two turns
// each, every request with its own freshly signed personal-agent JWT.
func TestConcurrentConversations(t *testing.T) {
	e := newEnv(t)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}}
	post := func(tok string, body any) (int, []byte, error) {
		j, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", e.iface+"/message:send", bytes.NewReader(j))
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := "user-" + itoa(i)
			code, body, err := post(e.jwt(sub, nil), msg("m1", "", "order A-5531"))
			if err != nil || code != 200 {
				errs <- fmt.Sprintf("turn 1 of %s: %d %v %s", sub, code, err, body)
				return
			}
			var r struct{ Message struct{ ContextID string } }
			_ = json.Unmarshal(body, &r)
			code, body, err = post(e.jwt(sub, nil), msg("m2", r.Message.ContextID, "jane@example.com"))
			if err != nil || code != 200 || !strings.Contains(string(body), "processing") {
				errs <- fmt.Sprintf("turn 2 of %s: %d %v %s", sub, code, err, body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// BenchmarkMessageSend measures message:send over HTTP with personal-agent
// JWT verification (ES256) and a durable reply, in parallel. It reports
// messages/s and the p99 latency.
func BenchmarkMessageSend(b *testing.B) {
	e := &env{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: b.TempDir()}
	defer e.sc.Close()
	e.key = e.sc.PA.Key
	e.start(b)
	toks := make([]string, 256)
	for i := range toks {
		toks[i] = e.jwt("bench-"+itoa(i), nil)
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}}
	var mu sync.Mutex
	var lat []time.Duration
	var seq atomic.Int64
	b.ResetTimer()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			j, _ := json.Marshal(msg("m"+itoa(int(i)), "", "hello"))
			req, _ := http.NewRequest("POST", e.iface+"/message:send", bytes.NewReader(j))
			req.Header.Set("Authorization", "Bearer "+toks[i%int64(len(toks))])
			t0 := time.Now()
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
			d := time.Since(t0)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}
	})
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

func TestRateLimitsAndBrandDomain(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	brands, _ := pact.LoadBrands("")
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, sc.Agents())
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p, err := pact.New(pact.Config{BaseURL: "http://provider.test", Verifier: v, Keys: reg, Brands: brands, StorePath: filepath.Join(t.TempDir(), "p.db"),
		Logger: slog.New(slog.DiscardHandler), Now: clock, PerUser: pact.Limit{Rate: 1, Burst: 2}, PerAgent: pact.Limit{Rate: 100, Burst: 3},
		Domains: map[string]string{"support.acme.example": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := httptest.NewServer(p)
	defer srv.Close()
	e := &env{sc: sc, srv: srv, p: p, iface: srv.URL + "/a2a/acme", key: sc.PA.Key}
	send := func(sub, id string) resp {
		return e.do(t, "POST", e.iface+"/message:send", e.jwt(sub, nil), msg(id, "", "hi"))
	}
	for i := range 2 {
		if r := send("u1", "a"+itoa(i)); r.code != 200 {
			t.Fatalf("within burst: %d", r.code)
		}
	}
	r := send("u1", "a3")
	if r.code != 429 || r.hdr.Get("Retry-After") != "1" || len(r.body) != 0 {
		t.Fatalf("over the per-user limit: %d %q %q", r.code, r.hdr.Get("Retry-After"), r.body)
	}
	if r := send("u2", "b1"); r.code != 200 { // another user of the same agent
		t.Fatalf("other user: %d", r.code)
	}
	if r := send("u3", "c1"); r.code != 429 { // the agent's burst of 3 is spent
		t.Fatalf("over the per-agent limit: %d", r.code)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if r := send("u1", "a4"); r.code != 200 {
		t.Fatalf("after waiting: %d", r.code)
	}

	req, _ := http.NewRequest("GET", srv.URL+"/.well-known/agent-card.json", nil)
	req.Host = "support.acme.example"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != pact.ContentType {
		t.Fatalf("card at the brand's domain: %d", res.StatusCode)
	}
	if r := e.do(t, "GET", srv.URL+"/.well-known/agent-card.json", "", nil); r.code != 404 {
		t.Fatalf("card at an unknown host: %d", r.code)
	}
}

// form posts an OAuth form to the brand's path with the personal agent's
// JWT for sub, and returns the status and the JSON answer.
func (e *env) form(t *testing.T, path, sub string, v url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.iface+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+e.jwt(sub, nil))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

// A customer signed in once can deny, one after another, every request
// their personal agent makes under fresh subs, each denial queuing a
// refusal that carries the agent's request JWT. Their denials hold at
// most their share of the outbox (a tenth, DenialOutboxPercent): each is honoured,
// and the rest of the outbox stays for the other customers' delegated
// turns, served with their receipts while the ledger is away.
func TestDenialsLeaveTheOutboxToOtherCustomersTurns(t *testing.T) {
	const maxOutbox = 64 << 10
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	brands, _ := pact.LoadBrands("")
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, sc.Agents())
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	p, err := pact.New(pact.Config{BaseURL: "http://provider.test", Verifier: v, Keys: reg, Brands: brands, StorePath: filepath.Join(t.TempDir(), "p.db"),
		Logger: slog.New(slog.DiscardHandler), MaxOutboxBytes: maxOutbox})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := httptest.NewServer(p)
	defer srv.Close()
	e := &env{sc: sc, srv: srv, p: p, iface: srv.URL + "/a2a/acme", key: sc.PA.Key}
	ask := func(sub string) (deviceCode, userCode string) {
		t.Helper()
		code, da := e.form(t, "/oauth/device_authorization", sub, url.Values{"client_id": {sc.PA.ID}, "scope": {"orders:read"}})
		if code != 200 {
			t.Fatalf("device authorization for %s: %d %v", sub, code, da)
		}
		return da["device_code"].(string), da["user_code"].(string)
	}
	token := func(sub, deviceCode string) (int, map[string]any) {
		t.Helper()
		return e.form(t, "/oauth/token", sub, url.Values{"client_id": {sc.PA.ID}, "grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {deviceCode}})
	}

	// Sam holds a grant.
	dc, uc := ask("sam")
	if err := p.Approve(uc, "acct-10977", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	code, tok := token("sam", dc)
	if code != 200 {
		t.Fatalf("Sam's token: %d %v", code, tok)
	}

	// Jane denies 120 requests of her agent, more than the whole outbox
	// holds.
	var failed []string
	for i := range 120 {
		sub := fmt.Sprint("flood-", i)
		dc, uc := ask(sub)
		if err := p.Deny(uc, "acct-48213"); err != nil {
			failed = append(failed, err.Error())
			continue
		}
		if code, m := token(sub, dc); code != 400 || m["error"] != "access_denied" {
			t.Fatalf("the agent's poll after denial %d: %d %v", i, code, m)
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of 120 denials were not honoured, first: %s", len(failed), failed[0])
	}
	if b := p.PipelineBytes(); b > maxOutbox/10 {
		t.Errorf("the denials hold %d bytes of the outbox, more than their share of a tenth, %d", b, maxOutbox/10)
	}

	// Sam's delegated turn is served, its receipt queued.
	depth := p.PipelineDepth()
	req, _ := http.NewRequest("POST", e.iface+"/message:send", strings.NewReader(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"status of B-2001"}]}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.jwt("sam", nil))
	req.Header.Set("X-A2A-User-Delegation", "Bearer "+tok["access_token"].(string))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "pact.receipt") || p.PipelineDepth() != depth+1 {
		t.Fatalf("another customer's delegated turn after the denials: %d %s, %d entries queued", res.StatusCode, body, p.PipelineDepth()-depth)
	}
}

// slowAgent blocks each turn until released, or fails it.
type slowAgent struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	fail    bool
}

func (a *slowAgent) Respond(ctx context.Context, t pact.Turn) (pact.Reply, error) {
	a.mu.Lock()
	fail := a.fail
	a.mu.Unlock()
	if fail {
		return pact.Reply{}, errors.New("model unavailable")
	}
	a.entered <- struct{}{}
	<-a.release
	return pact.Reply{Text: "done"}, nil
}

func TestRetryWhileRunningAndAgentFailure(t *testing.T) {
	a := &slowAgent{entered: make(chan struct{}), release: make(chan struct{})}
	e := &env{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), agent: a}
	t.Cleanup(e.sc.Close)
	e.key = e.sc.PA.Key
	e.start(t)
	tok := e.jwt("u1", nil)
	var ctxID string
	{
		var m struct{ Message struct{ ContextID string } }
		go func() { <-a.entered; a.release <- struct{}{} }()
		r := e.do(t, "POST", e.iface+"/message:send", tok, msg("m1", "", "hello"))
		_ = json.Unmarshal(r.body, &m)
		ctxID = m.Message.ContextID
	}
	done := make(chan resp)
	go func() { done <- e.do(t, "POST", e.iface+"/message:send", tok, msg("m2", ctxID, "slow turn")) }()
	<-a.entered // the turn is running
	// The same messageId again, while no reply is stored yet.
	r := e.do(t, "POST", e.iface+"/message:send", e.jwt("u1", nil), msg("m2", ctxID, "slow turn"))
	if r.code != 400 || r.reason() != "INVALID_PARAMS" {
		t.Fatalf("retry while running: %d %s", r.code, r.body)
	}
	a.release <- struct{}{}
	if r := <-done; r.code != 200 {
		t.Fatalf("the running turn: %d %s", r.code, r.body)
	}

	a.mu.Lock()
	a.fail = true
	a.mu.Unlock()
	r = e.do(t, "POST", e.iface+"/message:send", tok, msg("m3", ctxID, "this fails"))
	if r.code != 500 || r.reason() != "INTERNAL" {
		t.Fatalf("agent failure: %d %s", r.code, r.body)
	}
}

func TestRequestHeadersAreNotRequired(t *testing.T) {
	e := newEnv(t)
	j, _ := json.Marshal(msg("m1", "", "hello"))
	req, _ := http.NewRequest("POST", e.iface+"/message:send", bytes.NewReader(j))
	req.Header.Set("Authorization", "Bearer "+e.jwt("u1", nil))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("A2A-Version", "0.3")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != pact.ContentType {
		t.Fatalf("= %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

// No replay tracking: the same personal-agent JWT works at two brands and
// twice at one (PACT §3.2: jti MAY be present; Providers need not track it).
func TestTokenReusedAcrossBrands(t *testing.T) {
	dir := t.TempDir()
	builtin, _ := os.ReadFile("brands/acme.yaml")
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), builtin, 0o600); err != nil {
		t.Fatal(err)
	}
	second := strings.Replace(string(builtin), "id: acme", "id: globex", 1)
	if err := os.WriteFile(filepath.Join(dir, "globex.yaml"), []byte(second), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	brands, err := pact.LoadBrands(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, sc.Agents())
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	p, err := pact.New(pact.Config{BaseURL: "http://p", Verifier: v, Keys: reg, Brands: brands, StorePath: filepath.Join(t.TempDir(), "p.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := httptest.NewServer(p)
	defer srv.Close()
	e := &env{sc: sc, srv: srv, p: p, key: sc.PA.Key}
	tok := e.jwt("u1", func(c map[string]any) { c["jti"] = "same" })
	for i, b := range []string{"acme", "globex", "globex"} {
		if r := e.do(t, "POST", srv.URL+"/a2a/"+b+"/message:send", tok, msg("m"+itoa(i), "", "hi")); r.code != 200 {
			t.Fatalf("%s: %d %s", b, r.code, r.body)
		}
	}
	// A context is per Brand: globex's context is unknown at acme.
	_, ctxID := replyText(t, e.do(t, "POST", srv.URL+"/a2a/globex/message:send", tok, msg("g1", "", "hi")))
	if r := e.do(t, "POST", srv.URL+"/a2a/acme/message:send", tok, msg("a9", ctxID, "hi")); r.code != 400 || r.reason() != "INVALID_PARAMS" {
		t.Fatalf("another brand's context: %d %s", r.code, r.body)
	}
}

// An agent whose keys cannot be fetched (nothing cached, the endpoint
// answers garbage) is neither accepted nor rejected: a Provider failure,
// INTERNAL (500) in the A2A envelope (PACT §6), with Retry-After.
func TestPersonalAgentKeysUnavailable(t *testing.T) {
	e := newEnv(t)
	e.sc.PA.JWKS.SetRaw([]byte("<html>maintenance</html>"))
	r := e.do(t, "POST", e.iface+"/message:send", e.jwt("u1", nil), msg("m1", "", "hello"))
	if r.code != 500 || r.reason() != "INTERNAL" || r.hdr.Get("Content-Type") != "application/a2a+json" || r.hdr.Get("Retry-After") == "" ||
		!bytes.Contains(r.body, []byte("could not be fetched")) {
		t.Fatalf("= %d %q %q %s", r.code, r.hdr.Get("Content-Type"), r.hdr.Get("Retry-After"), r.body)
	}
}

// A brand's domain is a host name in any letter case: written with
// capitals in provider.domains it serves the card to requests for that
// host in any case, on any port, with or without the root's dot.
func TestABrandDomainServesItsCardInAnyLetterCase(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	brands, _ := pact.LoadBrands("")
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), nil, sc.Agents())
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	p, err := pact.New(pact.Config{BaseURL: "http://provider.test", Verifier: v, Keys: reg, Brands: brands, StorePath: filepath.Join(t.TempDir(), "p.db"),
		Logger: slog.New(slog.DiscardHandler), Domains: map[string]string{"Support.Acme.Example": "acme", "help.skyways.example": "skyways"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := httptest.NewServer(p)
	defer srv.Close()
	for _, tc := range []struct{ host, brand string }{
		{"support.acme.example", "acme"},
		{"Support.Acme.Example", "acme"},
		{"SUPPORT.ACME.EXAMPLE:8443", "acme"},
		{"support.acme.example.", "acme"},
		{"help.skyways.example:443", "skyways"},
		{"[::1]:8443", ""},
		{"support.acme.example.other", ""},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/.well-known/agent-card.json", nil)
		req.Host = tc.host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var card struct{ SupportedInterfaces []struct{ URL string } }
		_ = json.NewDecoder(res.Body).Decode(&card)
		res.Body.Close()
		switch {
		case tc.brand == "" && res.StatusCode != 404:
			t.Errorf("Host %s: HTTP %d, want 404", tc.host, res.StatusCode)
		case tc.brand != "" && (res.StatusCode != 200 || len(card.SupportedInterfaces) == 0 || card.SupportedInterfaces[0].URL != "http://provider.test/a2a/"+tc.brand):
			t.Errorf("Host %s: HTTP %d, card %+v; want %s's card", tc.host, res.StatusCode, card, tc.brand)
		}
	}
}

// A domain in provider.domains that is not a host name alone (with a
// port, a scheme, a path, an IPv6 literal, blank) stops the start, saying
// so, rather than start a card no request can reach; so do two spellings
// of one host naming different brands.
func TestABrandDomainThatIsNotAHostNameStopsTheStart(t *testing.T) {
	brands, _ := pact.LoadBrands("")
	v, _ := verifier.New(verifier.Config{Audience: "https://ledger.example"})
	reg, _ := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{}), nil, nil)
	for _, tc := range []struct {
		name    string
		domains map[string]string
		want    string
	}{
		{"port", map[string]string{"help.skyways.example:8443": "skyways"}, "without a port"},
		{"scheme", map[string]string{"https://help.skyways.example": "skyways"}, "not a host name"},
		{"path", map[string]string{"help.skyways.example/cards": "skyways"}, "not a host name"},
		{"ipv6", map[string]string{"[::1]": "skyways"}, "not a host name"},
		{"blank", map[string]string{"": "skyways"}, "not a host name"},
		{"label", map[string]string{"-help.skyways.example": "skyways"}, "not a host name"},
		{"twice", map[string]string{"Help.Skyways.Example": "skyways", "help.skyways.example": "acme"}, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pact.New(pact.Config{BaseURL: "http://provider.test", Verifier: v, Keys: reg, Brands: brands, StorePath: filepath.Join(t.TempDir(), "p.db"),
				Logger: slog.New(slog.DiscardHandler), Domains: tc.domains})
			if err == nil {
				p.Close()
				t.Fatalf("started with provider.domains %v", tc.domains)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start: %v, want it to say %q", err, tc.want)
			}
		})
	}
}
