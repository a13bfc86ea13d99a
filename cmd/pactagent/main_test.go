package main

import (
	"bytes"
	"errors"
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
	if err := run([]string{"init", "--dir", other, "--issuer", "http://127.0.0.1:1", "--audience", "urn:test:provider", "--provider", card}, &out); err != nil {
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

// serve listens where the issuer's jwksUri points when the issuer is
// plain HTTP on this machine, and says so when --listen is elsewhere.
func TestListenAddr(t *testing.T) {
	for _, tc := range []struct{ flag, issuer, addr, note string }{
		{"", "http://127.0.0.1:18099", "127.0.0.1:18099", ""},
		{"", "http://localhost:9000", "localhost:9000", ""},
		{"", "http://[::1]:9001", "[::1]:9001", ""},
		{"", "https://agent.example", defaultListen, ""},
		{"", "http://127.0.0.1", defaultListen, ""},
		{"127.0.0.1:18099", "http://127.0.0.1:18099", "127.0.0.1:18099", ""},
		{"127.0.0.1:18111", "http://127.0.0.1:18099", "127.0.0.1:18111", "not on 127.0.0.1:18111"},
		{"0.0.0.0:8443", "https://agent.example", "0.0.0.0:8443", ""},
	} {
		addr, note := listenAddr(tc.flag, tc.issuer)
		if addr != tc.addr || (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("--listen %q, issuer %s: %s %q, want %s %q", tc.flag, tc.issuer, addr, note, tc.addr, tc.note)
		}
	}
}

// A flag after the text is a usage error that says where flags go ("--"
// ends the flags); help is the usage, not an error.
func TestFlagsAfterTheTextAndHelp(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"send", "--dir", t.TempDir(), "--card", "x", "hello", "--user", "jane"}, &out)
	var u usageErr
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "--user after the text: flags go before it") {
		t.Errorf("a flag after the text: %v", err)
	}
	err = run([]string{"send", "--dir", t.TempDir(), "--card", "x", "--user", "jane", "--", "what does --user do"}, &out)
	if errors.As(err, &u) {
		t.Errorf("a flag's name in the text after --: %v", err)
	}
	out.Reset()
	if err := run([]string{"--help"}, &out); err != nil || !strings.Contains(out.String(), "pactagent serve") {
		t.Errorf("--help: %v %q", err, out.String())
	}
}
