package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/store"
)

// TestProviderOutboxSetAside: `ledgerctl provider outbox` lists what the
// embedded Provider set aside, naming each entry and saying why, and
// `provider outbox retry` puts entries back in its outbox. Only an admin
// key may do either.
func TestProviderOutboxSetAside(t *testing.T) {
	f := start(t)
	f.stop()
	st, err := store.Open(filepath.Join(f.cfg.DataDir, "provider.db"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	err = st.Enqueue(
		pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: "eyJhbGciOiJFUzI1NiJ9.e30.sig", DelegationToken: "eyJ0b2tlbiI6MX0.e30.sig", ContextID: "ctx-1", MessageID: "m-7",
			Actions: []pipeline.Action{{Tool: "cancel_order", Target: "A-5531"}}}},
		pipeline.Item{Refusal: &pipeline.Refusal{ClaimedPrincipal: "acct-1", ClaimedAgent: "https://agent.example", Action: pipeline.RefusedAction{Tool: "change_address", Target: "acct-1"},
			Reason: "no delegation token", ObservedAt: at}},
		pipeline.Revoked("a2agrant_9", at, "revoked by the user"),
	)
	for seq := uint64(1); err == nil && seq <= 3; seq++ {
		err = st.SetAside(seq, fmt.Sprintf("rejected by the ledger: HTTP 400: entry %d", seq))
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f.serve(t)

	code, out, errs := f.ctl(t, "admin", "provider", "outbox")
	if code != 0 {
		t.Fatalf("provider outbox: %d %s %s", code, out, errs)
	}
	for _, want := range []string{
		"waiting for the ledger  0", "set aside               3",
		"receipt sha256:", "context ctx-1; message m-7; tools cancel_order", "rejected by the ledger: HTTP 400: entry 1",
		"tool change_address; target acct-1; principal acct-1; agent https://agent.example; observed 2026-12-01 09:30:00Z",
		"revocation", "grant a2agrant_9; revoked 2026-12-01 09:30:00Z",
		"ledgerctl provider outbox retry SEQ",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("provider outbox does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "eyJ") {
		t.Fatalf("provider outbox shows a token or a JWS:\n%s", out)
	}
	if code, out, _ := f.ctl(t, "admin", "provider", "outbox", "--limit", "2"); code != 0 || !strings.Contains(out, "(more: --page 2, or --all)") || strings.Contains(out, "a2agrant_9") {
		t.Fatalf("provider outbox --limit 2: %d %s", code, out)
	}

	for _, role := range []string{"support", "auditor", "writer"} {
		if code, _, errs := f.ctl(t, role, "provider", "outbox"); code != exitAuth || !strings.Contains(errs, "not allowed") {
			t.Fatalf("%s reading the Provider's outbox: %d %s", role, code, errs)
		}
		if code, _, _ := f.ctl(t, role, "provider", "outbox", "retry", "--all"); code != exitAuth {
			t.Fatalf("%s retrying: %d", role, code)
		}
	}
	for _, args := range [][]string{{}, {"x"}, {"0"}, {"1", "--all"}, {"1", "2"}} {
		if code, _, _ := f.ctl(t, "admin", append([]string{"provider", "outbox", "retry"}, args...)...); code != exitUsage {
			t.Fatalf("retry %v: %d, want a usage error", args, code)
		}
	}
	if code, _, errs := f.ctl(t, "admin", "provider", "outbox", "retry", "99"); code != exitNotFound || !strings.Contains(errs, "no entry 99 set aside") {
		t.Fatalf("retry of an entry not set aside: %d %s", code, errs)
	}

	if code, out, errs := f.ctl(t, "admin", "provider", "outbox", "retry", "2"); code != 0 || !strings.Contains(out, "1 entry put back in the Provider's outbox") {
		t.Fatalf("retry 2: %d %s %s", code, out, errs)
	}
	code, out, _ = f.ctl(t, "admin", "--json", "provider", "outbox")
	var rep struct {
		Depth, SetAsideCount int
		SetAside             []struct{ Seq, Kind string }
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("--json provider outbox: %d %v %s", code, err, out)
	}
	if rep.Depth != 1 || rep.SetAsideCount != 2 || len(rep.SetAside) != 2 || rep.SetAside[0].Seq != "1" || rep.SetAside[1].Kind != "revocation" {
		t.Fatalf("after retry 2: %s", out)
	}
	if code, out, _ := f.ctl(t, "admin", "provider", "outbox", "retry", "--all"); code != 0 || !strings.Contains(out, "2 entries put back") {
		t.Fatalf("retry --all: %d %s", code, out)
	}
	if code, out, _ := f.ctl(t, "admin", "provider", "outbox"); code != 0 || !strings.Contains(out, "waiting for the ledger  3") || !strings.Contains(out, "set aside               0") {
		t.Fatalf("after retry --all: %d %s", code, out)
	}
}
