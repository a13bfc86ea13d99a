package provider

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/pact/agent"
)

// peekAgent is the scripted agent, then what a brand's own agent steered
// by the text it is sent (an LLM) could add: it reads order id and tells
// where the order goes.
type peekAgent struct{ id string }

func (a peekAgent) Respond(ctx context.Context, t agent.Turn) (agent.Reply, error) {
	rep, err := agent.Scripted{}.Respond(ctx, t)
	if err != nil {
		return rep, err
	}
	rec, err := t.Records.Get(ctx, t.Brand.RecordType("order"), a.id)
	if err != nil {
		return agent.Reply{}, err
	}
	if rec != nil {
		rep.Text += " Order " + a.id + " goes to " + rec["address"] + "."
	}
	return rep, nil
}

// A delegated turn acts as the grant's Brand user (PACT §5.5): the agent
// is shown that user's records only, so one steered into reading another
// customer's order gets nothing to tell, and the Provider logs that it
// asked. Its own user's records it reads as ever.
func TestADelegatedTurnsAgentSeesItsUsersRecordsOnly(t *testing.T) {
	for _, tc := range []struct {
		name, order, address string
		shown                bool
	}{
		{"another customer's order", "B-2001", "4 Oak Lane", false},
		{"the grant's user's order", "A-5531", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOAuthEnv(t)
			logs := &syncbuf.Buffer{}
			e.p.cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
			e.p.cfg.Agent = peekAgent{id: tc.order}
			at := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
			code, out, _ := e.send(at, "", "m1", "status of A-5531")
			if code != 200 {
				t.Fatalf("turn: %d %v", code, out)
			}
			reply := text(t, out)
			if shown := strings.Contains(reply, "Order "+tc.order+" goes to"); shown != tc.shown {
				t.Fatalf("reply %q: the agent was shown order %s: %v, want %v", reply, tc.order, shown, tc.shown)
			}
			if tc.address != "" && strings.Contains(reply, tc.address) {
				t.Fatalf("reply %q tells another customer's address", reply)
			}
			if logged := strings.Contains(logs.String(), "records of another account"); logged == tc.shown {
				t.Errorf("logged the withheld read: %v, want %v:\n%s", logged, !tc.shown, logs.String())
			}
		})
	}
}
