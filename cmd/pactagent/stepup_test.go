package main

import (
	"context"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/customer"
)

// contextOf is the conversation a send's output names.
func contextOf(t *testing.T, out string) string {
	t.Helper()
	i := strings.LastIndex(out, "(context ")
	if i < 0 {
		t.Fatalf("no (context …) line:\n%s", out)
	}
	line, _, _ := strings.Cut(out[i:], "\n")
	return line
}

// A Brand that answers account actions without a token with a step-up
// task (skyways: withoutToken: stepUp). With --identity-only the agent
// shows the task's message and sign-in link and keeps the conversation;
// without, it asks for the missing permission itself, the customer signs
// in with the organization the card names, and the same conversation goes
// on under the new grant.
func TestStepUpWithoutAGrant(t *testing.T) {
	e := newE2E(t)
	sky := strings.Replace(e.card, "/a2a/acme/", "/a2a/skyways/", 1)
	ana := customer.New("ana@example.com", "sky-ana-demo")
	args := func(cmd string, rest ...string) []string {
		return append([]string{cmd, "--dir", e.dir, "--card", sky, "--user", "ana"}, rest...)
	}
	const rebook = "Please rebook SKY-20931 to SK 212 on 2026-12-20 07:05"

	out, err := e.wait(e.start(args("send", "--identity-only", rebook)...))
	if err != nil || !strings.Contains(out, "I need your permission (flights:rebook)") || !linkRe.MatchString(out) ||
		!strings.Contains(out, "sign in with SkyWays Airlines at:") || !strings.Contains(out, "send again without --identity-only") {
		t.Fatalf("identity-only step-up: %v\n%s", err, out)
	}
	first := contextOf(t, out)

	p := e.start(args("send", rebook)...)
	if _, err := ana.Answer(context.Background(), e.link(p), customer.Decision{}); err != nil {
		t.Fatal(err)
	}
	out, err = e.wait(p)
	for _, want := range []string{"I need your permission (flights:rebook)", "sign in with SkyWays Airlines and choose", "Allowed: flights:rebook",
		"Signed in as the SkyWays Airlines account sky-4471", "Booking SKY-20931 is rebooked onto SK 212", "receipt verified"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("step-up without a grant: %v; want %q in\n%s", err, want, out)
		}
	}
	if got := contextOf(t, out); got != first {
		t.Fatalf("the conversation did not go on: %s, then %s", first, got)
	}
	// Under the grant now held, the next turn needs no step-up.
	out, err = e.wait(e.start(args("send", "Please rebook SKY-20931 to SK 214 on 2026-12-21 07:05")...))
	if err != nil || strings.Contains(out, "permission") || !strings.Contains(out, "can no longer be rebooked online") || contextOf(t, out) != first {
		t.Fatalf("after the step-up: %v\n%s", err, out)
	}
}
