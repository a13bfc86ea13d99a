package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// downLedger is a ledger that is down: the Provider's outbox keeps what it
// queues.
func downLedger(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// askWithoutGrant asks for an account action under PACT §3 alone, as the
// personal agent's User sub, and returns the status and the reply's text.
func (s *shop) askWithoutGrant(t testing.TB, sub, id string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []map[string]any{{"text": "please cancel order A-5531"}}}})
	req, _ := http.NewRequest("POST", s.base+"/message:send", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.paJWTAs(sub))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out struct {
		Message struct{ Parts []struct{ Text string } }
	}
	if json.Unmarshal(raw, &out) != nil || len(out.Message.Parts) != 1 {
		return res.StatusCode, string(raw)
	}
	return res.StatusCode, out.Message.Parts[0].Text
}

// notRecorded is the series of refusals of brand shop not recorded for
// reason.
func notRecorded(reason string) string {
	return `pactledger_provider_refusals_not_recorded_total{brand="shop",reason="` + reason + `"}`
}

// One personal agent asks for account actions without a grant, for many
// Users, faster than the Provider's default refusalLimit (20/s, bursts of
// 200, per brand): each is refused in chat as ever, but past the limit no
// refusal is queued for the ledger, and /metrics counts each one not.
func TestIdentityRefusalsPastTheLimitAreNotRecorded(t *testing.T) {
	s := newShop(t, func(c *config.Config) {
		c.Provider.LedgerURL = downLedger(t)
		c.Provider.RateLimits = config.RateLimits{} // the agent's own limits do not bind
	})
	const asks = 600
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[string]int{}
		codes   = map[int]int{}
		before  = scrape(t, s.env)
		started = time.Now()
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= asks; i = next.Add(1) {
				code, text := s.askWithoutGrant(t, fmt.Sprint("u", i%50), fmt.Sprint("m", i))
				mu.Lock()
				codes[code]++
				answers[text]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// A token bucket queues at most its burst and its rate over the time
	// taken.
	maxQueued := 200 + 20*time.Since(started).Seconds() + 1
	if codes[200] != asks || len(answers) != 1 {
		t.Fatalf("answers by status %v, by text %v; want %d answers of one text", codes, answers, asks)
	}
	for text := range answers {
		if !strings.Contains(text, "sign in") {
			t.Fatalf("the answer %q is not the chat refusal", text)
		}
	}
	queued := s.p.PipelineDepth()
	after := scrape(t, s.env)
	dropped := after[notRecorded("rate")] - before[notRecorded("rate")]
	if queued >= asks || float64(queued) > maxQueued || dropped != float64(asks-queued) || after[notRecorded("outbox")] != 0 {
		t.Fatalf("%d refusals queued (at most %.0f), %v not recorded over the rate, %v for want of room; want %d in all",
			queued, maxQueued, dropped, after[notRecorded("outbox")], asks)
	}
}

// fillIdentityShare asks asks times for an account action without a
// grant, more than their refusals' share of the outbox holds: each must
// be answered in chat as ever, the refusals hold no more than their
// share, and those past it are counted as not recorded.
func fillIdentityShare(t *testing.T, s *shop, asks int) {
	t.Helper()
	var failed []string
	for i := range asks {
		if code, text := s.askWithoutGrant(t, fmt.Sprint("u", i%10), fmt.Sprint("f", i)); code != 200 {
			failed = append(failed, fmt.Sprintf("#%d: %d %.80s", i, code, text))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d account actions asked without a grant were not answered in chat, first %s", len(failed), asks, failed[0])
	}
	// Half of outboxMaxBytes (40,000) by default.
	if b := s.p.PipelineBytes(); b > 20000 {
		t.Errorf("the refusals hold %d bytes of the outbox, more than their share of 20000", b)
	}
	if n := scrape(t, s.env)[notRecorded("outbox")]; n == 0 {
		t.Errorf("no refusal was counted as not recorded for want of room")
	}
}

// identityShareShop is a shop whose ledger is down, with an outbox of
// 40,000 bytes: some 60 refusals fill it, 30 their share of it.
func identityShareShop(t *testing.T) *shop {
	return newShop(t, func(c *config.Config) {
		c.Provider.LedgerURL = downLedger(t)
		c.Provider.RateLimits = config.RateLimits{}
		c.Provider.OutboxMaxBytes = 40000
	})
}

// Refusals asked without a grant fill their share of the outbox: a User
// who denies consent still has the denial recorded for the ledger.
func TestADeniedConsentIsRecordedWhenIdentityRefusalsFillTheirShare(t *testing.T) {
	s := identityShareShop(t)
	fillIdentityShare(t, s, 100)
	da := s.form(t, "/oauth/device_authorization", url.Values{"client_id": {s.sc.PA.ID}, "scope": {"orders:read"}})
	code, _ := da["user_code"].(string)
	if code == "" {
		t.Fatalf("device authorization: %v", da)
	}
	depth := s.p.PipelineDepth()
	if err := s.p.Deny(code, "acct-48213"); err != nil {
		t.Fatalf("deny: %v", err)
	}
	if got := s.p.PipelineDepth(); got != depth+1 {
		t.Fatalf("the outbox holds %d entries after the denial, want %d", got, depth+1)
	}
}

// Refusals asked without a grant fill their share of the outbox: delegated
// turns are still served, each with its receipt queued.
func TestDelegatedTurnsAreServedWhenIdentityRefusalsFillTheirShare(t *testing.T) {
	s := identityShareShop(t)
	tok := s.token(t)
	fillIdentityShare(t, s, 100)
	depth := s.p.PipelineDepth()
	for i := range 3 {
		s.send(t, tok, fmt.Sprint("d", i), "what is the status of order A-88213?")
	}
	if got := s.p.PipelineDepth(); got != depth+3 {
		t.Fatalf("the outbox holds %d entries after three delegated turns, want %d", got, depth+3)
	}
}
