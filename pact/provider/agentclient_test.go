package provider

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/a2a"
	"github.com/pactledger/pactledger/pact/client"
	"github.com/pactledger/pactledger/verifier"
)

// agentClient is a personal agent's client for the env's Provider: its
// JWTs, sent only to the Provider's origin, receipts checked at the env's
// clock.
func (e *oauthEnv) agentClient(issuer string) *client.Client {
	return &client.Client{Issuer: issuer, Token: func(string) (string, error) { return e.jwt(), nil }, Providers: []string{e.srv.URL}, Now: e.clock}
}

// The personal agent's receipt check: a genuine receipt verifies against
// the Brand's published keys and the grant's delegation token; edited
// claims, an edited JWS, a receipt for another agent, or one checked
// against another grant's token do not.
func TestClientVerifiesReceipts(t *testing.T) {
	e := newOAuthEnv(t)
	ctx := context.Background()
	c := e.agentClient(e.sc.PA.ID)
	card, err := c.FetchCard(ctx, e.base+"/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	flow, ok := card.Delegation()
	if !ok || flow.MetadataURL == "" || flow.Scopes["orders:cancel"] != "Cancel an order that has not shipped" {
		t.Fatalf("delegation from the card: %+v", flow)
	}
	srv, err := c.CheckFlow(ctx, flow)
	if err != nil {
		t.Fatal(err)
	}
	ts := &client.TokenSet{AccessToken: e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)}
	r, err := c.SendDelegated(ctx, e.base, "u1", "", "m1", "status of A-5531", ts.AccessToken)
	if err != nil || r.Message == nil {
		t.Fatalf("send: %v %+v", err, r)
	}
	rc, err := c.VerifyGrantReceipt(ctx, srv, e.base, ts, r.Message)
	if err != nil || rc.Claims.User != "acct-48213" || rc.Claims.Actions[0].Tool != "lookup_orders" || len(rc.SHA256) != 64 || rc.ClockWarning != "" {
		t.Fatalf("genuine receipt: %v %+v", err, rc)
	}
	edit := func(f func(m map[string]any)) *a2a.Message {
		var meta map[string]any
		_ = json.Unmarshal(r.Message.Metadata, &meta)
		f(meta["pact.receipt"].(map[string]any))
		b, _ := json.Marshal(meta)
		m := *r.Message
		m.Metadata = b
		return &m
	}
	claims := edit(func(m map[string]any) { m["claims"].(map[string]any)["user"] = "acct-10977" })
	if _, err := c.VerifyGrantReceipt(ctx, srv, e.base, ts, claims); err == nil || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("edited claims: %v", err)
	}
	jws := edit(func(m map[string]any) {
		parts := strings.Split(m["jws"].(string), ".")
		m["jws"] = parts[0] + "." + b64(`{"user":"acct-10977"}`) + "." + parts[2]
	})
	if _, err := c.VerifyGrantReceipt(ctx, srv, e.base, ts, jws); err == nil {
		t.Fatal("an edited JWS verified")
	}
	other := e.agentClient("https://other-agent.example")
	if _, err := other.VerifyGrantReceipt(ctx, srv, e.base, ts, r.Message); err == nil || !strings.Contains(err.Error(), "not this agent") {
		t.Fatalf("a receipt for another agent: %v", err)
	}
	another := &client.TokenSet{AccessToken: e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)}
	if _, err := c.VerifyGrantReceipt(ctx, srv, e.base, another, r.Message); err == nil || !strings.Contains(err.Error(), "not the token's") {
		t.Fatalf("a receipt checked against another grant's token: %v", err)
	}
	if _, err := c.VerifyGrantReceipt(ctx, srv, e.base, ts, &a2a.Message{}); !errors.Is(err, client.ErrNoReceipt) {
		t.Fatalf("no receipt: %v", err)
	}
}

// Every token and receipt the Provider signs is in the low-s form, the
// one a leaf of the ledger's log hashes: the ledger names a row by the
// receipt as posted, so for the Provider's receipts the agent's name for
// a receipt, its row's id and its leaf's receipt hash are one. Half of all ES256 signatures come out high-s,
// so 64 of each all low-s does not happen by chance.
func TestTheProviderSignsInTheLowSForm(t *testing.T) {
	k, err := newES256Key()
	if err != nil {
		t.Fatal(err)
	}
	sk, err := newSigningKey(k)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		for what, sign := range map[string]func(any) (string, error){"receipt": sk.signReceipt, "delegation token": sk.sign} {
			jws, err := sign(map[string]any{"n": i})
			if err != nil {
				t.Fatal(err)
			}
			if low := verifier.Canonical(jws); low != jws {
				t.Fatalf("%s %d is signed in the high-s form: %s, its low-s form %s", what, i, jws, low)
			}
			if _, err := verifier.ParseCompact(jws); err != nil {
				t.Fatalf("%s %d: %v", what, i, err)
			}
		}
	}
}
