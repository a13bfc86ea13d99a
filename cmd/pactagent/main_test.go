package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
)

// A conversation through pactagent with ledgerd's Provider: the agent
// registers by issuer and JWKS, fetches the card, and keeps the context.
func TestConversationThroughPactagent(t *testing.T) {
	dir := t.TempDir()
	// The agent's issuer is where it serves its JWKS.
	jwksSrv := httptest.NewServer(nil)
	defer jwksSrv.Close()
	issuer := jwksSrv.URL
	var out bytes.Buffer
	if err := run([]string{"init", "--dir", dir, "--issuer", issuer, "--audience", "urn:test:provider"}, &out); err != nil {
		t.Fatal(err)
	}
	h, err := jwksHandler(dir)
	if err != nil {
		t.Fatal(err)
	}
	jwksSrv.Config.Handler = h

	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.Provider.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Audience = "urn:test:provider"
	cfg.AllowInsecureLoopbackJWKS = true
	cfg.Agents = []config.Agent{{Issuer: issuer, JWKSURI: issuer + "/.well-known/jwks.json"}}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()

	card := "http://" + srv.ProviderAddr() + "/a2a/acme/.well-known/agent-card.json"
	say := func(args ...string) string {
		t.Helper()
		var b bytes.Buffer
		if err := run(append([]string{"send", "--dir", dir, "--card", card, "--user", "jane"}, args...), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	first := say("Where is order A-88213?")
	if !strings.Contains(first, "email") {
		t.Fatalf("turn 1: %s", first)
	}
	second := say("jane@example.com")
	if !strings.Contains(second, "shipped") {
		t.Fatalf("turn 2 did not continue the context: %s", second)
	}
	ctxLine := func(s string) string { return s[strings.LastIndex(s, "(context "):] }
	if ctxLine(first) != ctxLine(second) {
		t.Fatalf("contexts differ: %s / %s", first, second)
	}
	if fresh := say("--new", "hello"); ctxLine(fresh) == ctxLine(first) {
		t.Fatalf("--new kept the context")
	}
	// Closed by the brand: the next message starts a new conversation.
	say("thanks, bye")
	if after := say("hello again"); ctxLine(after) == ctxLine(first) {
		t.Fatalf("a closed context was reused")
	}
	// An unregistered agent is refused.
	other := t.TempDir()
	if err := run([]string{"init", "--dir", other, "--issuer", "http://127.0.0.1:1", "--audience", "urn:test:provider"}, &out); err != nil {
		t.Fatal(err)
	}
	err = run([]string{"send", "--dir", other, "--card", card, "--user", "jane", "hi"}, &out)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unregistered agent: %v", err)
	}
	if err := run([]string{"send", "--dir", dir}, &out); err == nil {
		t.Fatal("send without arguments accepted")
	}
}
