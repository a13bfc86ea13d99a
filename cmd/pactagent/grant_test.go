package main

import (
	"context"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/customer"
)

// The agent says which of the Brand's accounts a grant is for, and notices
// when the same user's new grant is for another account. When consent was
// skipped, it prints all the token allows, not only what it asked for.
func TestGrantNamesTheAccount(t *testing.T) {
	e := newE2E(t)
	ctx := context.Background()
	jane := customer.New("jane@example.com", "acme-jane-demo")
	sam := customer.New("sam@example.com", "acme-sam-demo")

	out := e.authorizeAll(jane, "jane")
	if !strings.Contains(out, "Signed in as the Acme Outfitters account acct-48213: pactagent acts for it as jane.") || strings.Contains(out, "Note:") {
		t.Fatalf("authorize as jane:\n%s", out)
	}
	// Already allowed: the token carries the whole grant.
	p := e.start(e.agent("jane", "authorize", "--scope", "orders:read")...)
	if pg, err := jane.Answer(ctx, e.link(p), customer.Decision{}); err != nil || pg.Title != "Already allowed" {
		t.Fatalf("consent not skipped: %v %+v", err, pg)
	}
	out, err := e.wait(p)
	if err != nil || !strings.Contains(out, "Allowed: orders:read orders:cancel (orders:cancel allowed before") {
		t.Fatalf("already allowed: %v\n%s", err, out)
	}
	if g := e.grantFile("jane"); g == nil || g.Token.User != "acct-48213" {
		t.Fatalf("kept grant %+v", g)
	}

	// A conversation, held as Jane's account.
	if out, err := e.wait(e.start(e.agent("jane", "send", "status of A-88213")...)); err != nil || !strings.Contains(out, "shipped") {
		t.Fatalf("send: %v\n%s", err, out)
	}

	// The agent's user jane, signed in at the Brand as Sam.
	p = e.start(e.agent("jane", "authorize", "--scope", "orders:read")...)
	if _, err := sam.Answer(ctx, e.link(p), customer.Decision{}); err != nil {
		t.Fatal(err)
	}
	out, err = e.wait(p)
	if err != nil || !strings.Contains(out, "Acme Outfitters account acct-10977") || !strings.Contains(out, "jane's previous grant here was for account acct-48213") {
		t.Fatalf("authorize as another account: %v\n%s", err, out)
	}
	// The conversation held as Jane's account refuses Sam's token: the
	// agent says to start a new one.
	_, err = e.wait(e.start(e.agent("jane", "send", "status of A-88213")...))
	if err == nil || !strings.Contains(err.Error(), "acts for another user") || !strings.Contains(err.Error(), "send with --new") {
		t.Fatalf("a conversation of another account: %v", err)
	}
	// And the agent's user sam, signed in as Sam too.
	out = e.authorizeAll(sam, "sam")
	if !strings.Contains(out, "jane's grant here is for the same account acct-10977") {
		t.Fatalf("a second user on the same account:\n%s", out)
	}
}
