package main

import (
	"bytes"
	"strings"
	"testing"
)

// A conversation through pactagent with ledgerd's Provider: the agent
// registers by issuer and JWKS, fetches the card, and keeps the context.
func TestConversationThroughPactagent(t *testing.T) {
	e := newE2E(t) // the agent registers by its issuer, where it serves its JWKS
	dir, card := e.dir, e.card
	var out bytes.Buffer
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
	err := run([]string{"send", "--dir", other, "--card", card, "--user", "jane", "hi"}, &out)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("unregistered agent: %v", err)
	}
	if err := run([]string{"send", "--dir", dir}, &out); err == nil {
		t.Fatal("send without arguments accepted")
	}
}
