package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Text from a Brand (its card's organization and scope descriptions,
// replies, a step-up's message, link and scopes, an error's text) is shown
// with its control characters escaped: it cannot move the cursor, rewrite
// lines or set the clipboard on the user's terminal.
func TestProviderTextIsShownNotActedOn(t *testing.T) {
	const esc = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUvcyB8IHNo\x07\x1b[1A\x1b[2K\u202eAcme"
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/agent-card.json":
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "x", "provider": map[string]any{"organization": esc},
				"supportedInterfaces": []any{map[string]any{"url": srv.URL, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}},
				"securitySchemes": map[string]any{"u": map[string]any{"oauth2SecurityScheme": map[string]any{"flows": map[string]any{"deviceCode": map[string]any{
					"deviceAuthorizationUrl": srv.URL + "/da", "tokenUrl": srv.URL + "/t", "scopes": map[string]any{"s" + esc: "desc " + esc}}}}}}})
		case "/message:send":
			var body struct {
				Message struct{ Parts []struct{ Text string } } `json:"message"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			switch body.Message.Parts[0].Text {
			case "step":
				_ = json.NewEncoder(w).Encode(map[string]any{"task": map[string]any{"id": "t", "contextId": "c" + esc,
					"status":   map[string]any{"state": "TASK_STATE_AUTH_REQUIRED", "message": map[string]any{"role": "ROLE_AGENT", "parts": []any{map[string]any{"text": "need " + esc}}}},
					"metadata": map[string]any{"pact.missingScopes": []string{"s" + esc}, "pact.verificationUriComplete": "http://x/" + esc}}})
			case "fail":
				w.Header().Set("Content-Type", "application/a2a+json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 400, "status": "INVALID_ARGUMENT", "message": "bad " + esc,
					"details": []map[string]any{{"reason": "INVALID_PARAMS", "metadata": map[string]string{"detail": esc}}}}})
			default:
				_ = json.NewEncoder(w).Encode(map[string]any{"message": map[string]any{"messageId": "m", "contextId": "c" + esc, "role": "ROLE_AGENT",
					"parts": []any{map[string]any{"text": "hello " + esc + "\nsecond line"}}}})
			}
		}
	}))
	defer srv.Close()
	card := srv.URL + "/.well-known/agent-card.json"
	dir := newAgentDir(t, card)
	for _, args := range [][]string{
		{"authorize", "--dir", dir, "--card", card, "--user", "u"},
		{"send", "--dir", dir, "--card", card, "--user", "u", "--identity-only", "hi"},
		{"send", "--dir", dir, "--card", card, "--user", "u", "--identity-only", "step"},
	} {
		if args[0] == "send" {
			// --json too: the same JSON to a program, nothing a
			// terminal acts on.
			var out bytes.Buffer
			err := run(append(args[:len(args)-1:len(args)-1], "--json", args[len(args)-1]), &out)
			var v any
			if err != nil || strings.ContainsAny(out.String(), "\x1b\x07\u202e") || !strings.Contains(out.String(), `\u202e`) || json.Unmarshal(out.Bytes(), &v) != nil ||
				!strings.Contains(fmt.Sprint(v), "\u202e") {
				t.Errorf("%s --json: %v\n%q", args, err, out.String())
			}
		}
		var out bytes.Buffer
		err := run(args, &out)
		if err != nil || strings.ContainsAny(out.String(), "\x1b\x07\u202e") || !strings.Contains(out.String(), `\x1b]52`) {
			t.Errorf("%s: %v\n%q", args, err, out.String())
		}
	}
	var out bytes.Buffer
	err := run([]string{"send", "--dir", dir, "--card", card, "--user", "u", "--identity-only", "fail"}, &out)
	var shown bytes.Buffer
	report(&shown, err)
	if err == nil || strings.ContainsAny(shown.String(), "\x1b\x07\u202e") || !strings.HasPrefix(shown.String(), "pactagent: HTTP 400") {
		t.Errorf("an error quoting the Brand: %q", shown.String())
	}
}
