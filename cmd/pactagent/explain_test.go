package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A 401 says what to check: the registration, the audience, and whether
// the agent's JWKS is served (it is not, here).
func TestNotAcceptedSaysWhy(t *testing.T) {
	e := newE2E(t)
	other := t.TempDir()
	var out bytes.Buffer
	if err := run([]string{"init", "--dir", other, "--issuer", "http://127.0.0.1:1", "--audience", "urn:test:provider", "--provider", e.card}, &out); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"send", "--dir", other, "--card", e.card, "--user", "jane", "hi"},
		{"authorize", "--dir", other, "--card", e.card, "--user", "jane", "--scope", "orders:read"},
	} {
		err := run(args, &out)
		for _, want := range []string{"HTTP 401", "not registered", "--audience", "pactagent serve", "http://127.0.0.1:1/.well-known/jwks.json"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want %q", args[0], err, want)
			}
		}
	}
}

// A card address that is not a card says where cards are, and names the
// right one when it was an interface's address.
func TestCardNotFoundSaysWhere(t *testing.T) {
	e := newE2E(t)
	iface := strings.TrimSuffix(e.card, "/.well-known/agent-card.json")
	var out bytes.Buffer
	for _, tc := range []struct{ card, want string }{
		{strings.Replace(e.card, "/a2a/acme/", "/a2a/acmee/", 1), "check the brand id"},
		{iface, "--card " + e.card},
	} {
		err := run([]string{"send", "--dir", e.dir, "--card", tc.card, "--user", "jane", "hi"}, &out)
		if err == nil || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--card %s: %v; want %q", tc.card, err, tc.want)
		}
	}
}

// INVALID_PARAMS about the conversation continued (another account's, or
// one the Brand does not know) suggests --new.
func TestConversationRefusedSuggestsNew(t *testing.T) {
	for _, detail := range []string{"this context acts for another user", "Unknown contextId"} {
		card := fakeBrand(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/a2a+json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 400, "status": "INVALID_ARGUMENT", "message": "Invalid params",
				"details": []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INVALID_PARAMS", "domain": "a2a-protocol.org",
					"metadata": map[string]string{"detail": detail}}}}})
		})
		dir := newAgentDir(t, card)
		iface := strings.TrimSuffix(card, "/.well-known/agent-card.json")
		b, _ := json.Marshal(map[string]string{iface + " u": "c-earlier"})
		if err := os.WriteFile(filepath.Join(dir, "contexts.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		err := run([]string{"send", "--dir", dir, "--card", card, "--user", "u", "hi"}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), detail) || !strings.Contains(err.Error(), "send with --new") {
			t.Errorf("%s: %v", detail, err)
		}
	}
}

// A Provider that could not fetch the agent's keys answers INTERNAL with
// Retry-After: the agent says whether its JWKS answers and when to try
// again.
func TestKeysNotFetchedSaysWhy(t *testing.T) {
	card := fakeBrand(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/a2a+json")
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 500, "status": "INTERNAL", "message": "Internal error",
			"details": []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INTERNAL", "domain": "a2a-protocol.org",
				"metadata": map[string]string{"detail": "the personal agent's keys could not be fetched; retry"}}}}})
	})
	dir := newAgentDir(t, card)
	err := run([]string{"send", "--dir", dir, "--card", card, "--user", "u", "hi"}, &bytes.Buffer{})
	for _, want := range []string{"nothing answers at http://127.0.0.1:1/.well-known/jwks.json", "pactagent serve --dir " + dir, "try again in 10s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q", err, want)
		}
	}
}
