package provider

import (
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brandlogin"
)

// A grant the User revokes while a turn under it runs (the agent has
// answered, nothing is kept yet) stops the turn: the order is not
// cancelled, no receipt says the User approved the cancel, and the agent
// is told its token no longer holds (401 invalid_token, PACT §5.5).
func TestGrantRevokedDuringATurnStopsIt(t *testing.T) {
	e := newOAuthEnv(t)
	a := &holdAgent{}
	e.p.cfg.Agent = a
	at := e.deviceToken([]string{"orders:read", "orders:cancel"}, []string{"orders:read", "orders:cancel"})["access_token"].(string)
	grant := claimsOf(t, at).GrantID

	code, out := e.heldTurn(a, at, "", "m1", "please cancel A-5531", func() {
		if err := brandlogin.RevokeGrant(e.st, "shop", "acct-48213", grant, e.clock()); err != nil {
			t.Fatal(err)
		}
	})
	if code != 401 {
		t.Errorf("a turn whose grant was revoked before it was kept: %d %v", code, out)
	}
	if _, _, status := e.counts(); status == "cancelled" {
		t.Errorf("order A-5531 was cancelled after the User revoked the grant")
	}
	for _, it := range e.outbox() {
		if it.Receipt != nil {
			t.Errorf("a receipt was queued for a turn whose grant was revoked before it was kept: %d actions", len(it.Receipt.Actions))
		}
	}
}

// A delegated turn that needs a scope the token lacks answers a step-up
// task, and the action it refused is on record for the ledger, as the
// same action asked under PACT §3 alone is.
func TestStepUpUnderDelegationIsARefusalOnRecord(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	code, out, _ := e.send(read, "", "m1", "please cancel A-5531")
	if task, _ := out["task"].(map[string]any); code != 200 || task == nil {
		t.Fatalf("step-up: %d %v", code, out)
	}
	var refused []string
	for _, it := range e.outbox() {
		if it.Receipt != nil {
			t.Errorf("a receipt was queued for a turn that was refused")
		}
		if it.Refusal != nil {
			refused = append(refused, it.Refusal.Action.Tool+" "+it.Refusal.Action.Target+": "+it.Refusal.Reason)
		}
	}
	if len(refused) != 1 || !strings.HasPrefix(refused[0], "cancel_order A-5531") {
		t.Fatalf("refusals on record: %q, want the cancel of A-5531 refused for want of orders:cancel", refused)
	}
}
