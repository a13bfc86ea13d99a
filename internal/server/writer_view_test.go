package server_test

import (
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
)

// A writer key cannot read rows (API.md's role table): posting a receipt
// or a refusal again answers the stored row, whose dispute reads as it
// was written, none, not what support recorded of it since, and an
// incident's row its retain-until as written (none: held), not the one
// its closing set. A reader still sees both.
func TestAWriterPostingAgainDoesNotReadTheDispute(t *testing.T) {
	e := newEnv(t, jose.ES256)
	r := e.sc.Mint(pacttest.Spec{})
	refusal := map[string]any{"claimedPrincipal": "acct-30418", "claimedAgent": "MyHelper", "action": map[string]any{"tool": "change_address", "target": "acct-30418"},
		"reason": "no receipt", "observedAt": "2026-10-06T17:20:10Z"}
	const note = "customer acct-48213 called from +1-555-0100: never approved"
	for _, tc := range []struct {
		name, path string
		body       any
	}{{"receipt", "/v1/receipts", post(r)}, {"refusal", "/v1/refusals", refusal}} {
		var first appendReply
		if code := e.call(t, "POST", tc.path, "writer", tc.body, &first); code != 200 || first.Row.DisputeStatus != "DISPUTE_STATUS_NONE" {
			t.Fatalf("%s: %d, dispute %q", tc.name, code, first.Row.DisputeStatus)
		}
		if code := e.call(t, "POST", "/v1/rows/"+first.Row.ID+"/disputes", "support", map[string]any{"status": "DISPUTE_STATUS_OPEN", "note": note}, nil); code != 200 {
			t.Fatalf("%s: dispute = %d", tc.name, code)
		}
		var again appendReply
		if code := e.call(t, "POST", tc.path, "writer", tc.body, &again); code != 200 || again.Row.ID != first.Row.ID {
			t.Fatalf("%s posted again: %d, row %s", tc.name, code, again.Row.ID)
		}
		if again.Row.DisputeStatus != "DISPUTE_STATUS_NONE" || len(again.Row.DisputeEvents) != 0 {
			t.Errorf("%s posted again: the writer key read the dispute: status %s, events %+v", tc.name, again.Row.DisputeStatus, again.Row.DisputeEvents)
		}
		var read Row
		if code := e.call(t, "GET", "/v1/rows/"+first.Row.ID, "support", nil, &struct{ Row *Row }{&read}); code != 200 || read.DisputeStatus != "DISPUTE_STATUS_OPEN" || len(read.DisputeEvents) != 1 {
			t.Errorf("%s read by support: %d, dispute %s, %d events", tc.name, code, read.DisputeStatus, len(read.DisputeEvents))
		}
	}

	incident := post(e.sc.Mint(pacttest.Spec{Target: "I-1", At: time.Now().UTC().AddDate(-2, 0, 0).Truncate(time.Second), ScopesUsed: []string{"plan:change"}}))
	var inc appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", incident, &inc); code != 200 || inc.Row.Status != "ROW_STATUS_INCIDENT" || inc.Row.RetainUntil != "" {
		t.Fatalf("the incident's row: %d %s, until %q", code, inc.Row.Status, inc.Row.RetainUntil)
	}
	if code := e.call(t, "POST", "/v1/incidents/"+inc.Row.IncidentID+":close", "admin", map[string]any{"note": "platform fixed its scope handling"}, nil); code != 200 {
		t.Fatalf("close = %d", code)
	}
	var again appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", incident, &again); code != 200 || again.Row.ID != inc.Row.ID || again.Row.RetainUntil != "" {
		t.Errorf("the incident's row posted again after its close: %d, until %q; want none, as written", code, again.Row.RetainUntil)
	}
	var read Row
	if code := e.call(t, "GET", "/v1/rows/"+inc.Row.ID, "auditor", nil, &struct{ Row *Row }{&read}); code != 200 || read.RetainUntil == "" {
		t.Errorf("the incident's row read by an auditor: %d, until %q; want the closing's", code, read.RetainUntil)
	}
}

// A key may hold the writer role and a reading role. Posting a receipt or
// refusal again, alone or in a batch, still answers the row as it was
// written: an append is not recorded in the access log, so its answer
// carries nothing a reader recorded of the row since. The key reads the
// dispute with GetRow, which is recorded.
func TestAnAppendAnswersAsWrittenToAKeyThatAlsoReads(t *testing.T) {
	const opsKey = "test-ops-writer-support-key"
	e := newEnv(t, jose.ES256, func(c *config.Config) {
		c.APIKeys = append(c.APIKeys, config.APIKey{Name: "ops-key", SHA256: config.HashKey(opsKey), Roles: []string{config.RoleWriter, config.RoleSupport}})
	})
	r := e.sc.Mint(pacttest.Spec{})
	refusal := map[string]any{"claimedPrincipal": "acct-30418", "claimedAgent": "MyHelper", "action": map[string]any{"tool": "change_address", "target": "acct-30418"},
		"reason": "no receipt", "observedAt": "2026-10-06T17:20:10Z"}
	const note = "customer acct-48213 called from +1-555-0100: never approved"
	for _, tc := range []struct {
		name, path string
		body       any
	}{{"receipt", "/v1/receipts", post(r)}, {"refusal", "/v1/refusals", refusal}} {
		var first appendReply
		if code := e.call(t, "POST", tc.path, "writer", tc.body, &first); code != 200 {
			t.Fatalf("%s: %d", tc.name, code)
		}
		if code := e.call(t, "POST", "/v1/rows/"+first.Row.ID+"/disputes", "support", map[string]any{"status": "DISPUTE_STATUS_OPEN", "note": note}, nil); code != 200 {
			t.Fatalf("%s: dispute = %d", tc.name, code)
		}
		var again appendReply
		if code := e.call(t, "POST", tc.path, opsKey, tc.body, &again); code != 200 || again.Row.ID != first.Row.ID {
			t.Fatalf("%s posted again: %d, row %s", tc.name, code, again.Row.ID)
		}
		if again.Row.DisputeStatus != "DISPUTE_STATUS_NONE" || len(again.Row.DisputeEvents) != 0 {
			t.Errorf("%s posted again by a writer and support key: dispute %s, events %+v; want none, as written", tc.name, again.Row.DisputeStatus, again.Row.DisputeEvents)
		}
		var read Row
		if code := e.call(t, "GET", "/v1/rows/"+first.Row.ID, opsKey, nil, &struct{ Row *Row }{&read}); code != 200 || len(read.DisputeEvents) != 1 || read.DisputeEvents[0].Note != note {
			t.Errorf("%s read by the same key: %d, %d events", tc.name, code, len(read.DisputeEvents))
		}
	}
	var batch struct {
		Results []struct {
			Response *appendReply `json:"response"`
		} `json:"results"`
	}
	if code := e.call(t, "POST", "/v1/receipts:batch", opsKey, map[string]any{"receipts": []any{post(r)}}, &batch); code != 200 || len(batch.Results) != 1 || batch.Results[0].Response == nil {
		t.Fatalf("batch = %d %+v", code, batch.Results)
	}
	if got := batch.Results[0].Response.Row; got.DisputeStatus != "DISPUTE_STATUS_NONE" || len(got.DisputeEvents) != 0 {
		t.Errorf("posted again in a batch: dispute %s, events %+v; want none, as written", got.DisputeStatus, got.DisputeEvents)
	}
}
