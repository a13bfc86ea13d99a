package provider

import (
	"encoding/json"
	"strings"
	"testing"
)

// While what waits for the ledger fills the outbox's bound, a delegated
// turn, whose receipt would be queued, is answered INTERNAL with
// Retry-After and kept nothing of: no reply is served without its record.
// Once the ledger takes what waits, the same request is served.
func TestADelegatedTurnPastTheOutboxBoundIsRefused(t *testing.T) {
	e := newOAuthEnv(t)
	read := e.deviceToken([]string{"orders:read"}, []string{"orders:read"})["access_token"].(string)
	e.st.LimitOutbox(1)
	code, out, hdr := e.send(read, "", "m1", "what is the status of A-5531?")
	if code != 500 || hdr.Get("Retry-After") != "60" || !strings.Contains(mustJSON(t, out), "retry later") {
		t.Fatalf("a turn past the outbox's bound: %d %v (Retry-After %q)", code, out, hdr.Get("Retry-After"))
	}
	if outbox, actionLog, _ := e.counts(); outbox != 0 || actionLog != 0 {
		t.Fatalf("the refused turn kept %d outbox entries and %d action logs", outbox, actionLog)
	}
	e.st.LimitOutbox(1 << 20)
	if code, out, _ := e.send(read, "", "m1", "what is the status of A-5531?"); code != 200 || out["message"].(map[string]any)["metadata"] == nil {
		t.Fatalf("the same request with room in the outbox: %d %v", code, out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
