package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// refusingLedger is a ledger that refuses every entry as invalid input:
// the Provider sets each aside.
func refusingLedger(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":3,"message":"invalid input: refused","details":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A personal agent asks, round after round, for account actions without
// a grant, and the ledger refuses every refusal as invalid: set aside,
// the refusals keep their room in their share of the outbox, so that
// what the Provider holds for the ledger stays within the share however
// many rounds come (past it each is answered and counted, not
// recorded), and the metrics show the bytes set aside.
func TestRefusalsTheLedgerRefusesStayWithinTheirShare(t *testing.T) {
	s := newShop(t, func(c *config.Config) {
		c.Provider.LedgerURL = refusingLedger(t)
		c.Provider.RateLimits = config.RateLimits{}
		c.Provider.OutboxMaxBytes = 40000
	})
	for round := range 4 {
		for i := range 30 {
			if code, text := s.askWithoutGrant(t, fmt.Sprint("u", i%10), fmt.Sprint("r", round, "-", i)); code != 200 {
				t.Fatalf("round %d, ask %d: %d %.80s", round, i, code, text)
			}
		}
		waitDepth(t, s, 0, 20*time.Second)
	}
	// Half of outboxMaxBytes (40,000) by default; a refusal takes about
	// 630 bytes.
	if n, b := s.p.PipelineSetAside(), s.p.PipelineSetAsideBytes(); n == 0 || n > 20000/500 || b > 20000 {
		t.Fatalf("%d refusals set aside, %d bytes, after 120 asks: more than their share of 20000 bytes", n, b)
	}
	m := scrape(t, s.env)
	if m["pactledger_provider_pipeline_set_aside_bytes"] != float64(s.p.PipelineSetAsideBytes()) || m["pactledger_provider_pipeline_set_aside"] != float64(s.p.PipelineSetAside()) {
		t.Fatalf("metrics: %v bytes set aside in %v entries; want %d in %d", m["pactledger_provider_pipeline_set_aside_bytes"], m["pactledger_provider_pipeline_set_aside"], s.p.PipelineSetAsideBytes(), s.p.PipelineSetAside())
	}
	if m[notRecorded("outbox")] == 0 {
		t.Fatal("no refusal was counted as not recorded for want of room")
	}
}
