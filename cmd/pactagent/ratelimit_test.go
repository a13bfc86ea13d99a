package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeBrand serves a card and answers message:send with answer.
func fakeBrand(t *testing.T, answer http.HandlerFunc) (card string) {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/agent-card.json" {
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "Fake Support", "provider": map[string]string{"organization": "Fake Inc"},
				"supportedInterfaces": []map[string]string{{"url": srv.URL, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}}})
			return
		}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/.well-known/agent-card.json"
}

// newAgentDir is a new agent's directory, set up for the Provider that
// serves card.
func newAgentDir(t *testing.T, card string) string {
	t.Helper()
	dir := t.TempDir()
	if err := run([]string{"init", "--dir", dir, "--issuer", "http://127.0.0.1:1", "--audience", "urn:test", "--provider", card}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// On 429 the agent waits what Retry-After says and tries again, a bounded
// number of times, telling the user (PACT §6).
func TestRateLimitedWaitsAndRetries(t *testing.T) {
	var calls, busyFor atomic.Int32
	busyFor.Store(2)
	card := fakeBrand(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= busyFor.Load() {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"message": map[string]any{"messageId": "m", "contextId": "c1", "role": "ROLE_AGENT", "parts": []map[string]string{{"text": "hello"}}}})
	})
	dir := newAgentDir(t, card)
	var out bytes.Buffer
	if err := run([]string{"send", "--dir", dir, "--card", card, "--user", "u", "hi"}, &out); err != nil || !strings.Contains(out.String(), "hello") ||
		strings.Count(out.String(), "busy") != 2 {
		t.Fatalf("after two 429s: %v\n%s", err, out.String())
	}
	calls.Store(0)
	busyFor.Store(100)
	out.Reset()
	err := run([]string{"send", "--dir", dir, "--card", card, "--user", "u", "hi"}, &out)
	if err == nil || !strings.Contains(err.Error(), "HTTP 429") || !strings.Contains(err.Error(), "try again later") || calls.Load() > 5 {
		t.Fatalf("always 429: %v after %d tries\n%s", err, calls.Load(), out.String())
	}
}
