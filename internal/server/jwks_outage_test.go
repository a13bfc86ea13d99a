package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// A ledger that cannot fetch the signers' keys answers UNAVAILABLE and
// records nothing; the Provider's pipeline retries, and once the keys are
// reachable every receipt lands AUTHORIZED. Nothing is ever recorded
// UNAUTHORIZED because a fetch failed.
func TestReceiptsPostedDuringAJWKSOutageLandAuthorized(t *testing.T) {
	// The shop's Provider posts to a second ledgerd, which knows the shop
	// and the personal agent only through a gate that is down at first.
	var down atomic.Bool
	down.Store(true)
	var fetches, refused atomic.Int64
	var providerURL atomic.Value // the shop Provider's base, set below
	var paURL atomic.Value       // the agent's JWKS URL, set below
	relay := func(w http.ResponseWriter, target string) {
		res, err := http.Get(target)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	}
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if down.Load() {
			refused.Add(1)
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		switch r.URL.Path {
		case "/pa/jwks":
			relay(w, paURL.Load().(string))
		case "/brand/jwks":
			relay(w, providerURL.Load().(string)+"/oauth/jwks.json")
		default:
			http.NotFound(w, r)
		}
	}))
	defer gate.Close()

	ledger2 := newEnv(t, "ES256", func(c *config.Config) {
		off := false
		c.Provider.Enabled = &off
		c.Brands, c.Agents = nil, nil
		c.Listen.HTTP = freeAddr(t) // the same address after the restart below
	})
	s := newShop(t, func(c *config.Config) {
		c.Provider.LedgerURL = ledger2.base
	})
	shopBase := s.base
	providerURL.Store(shopBase)
	paURL.Store(s.sc.PA.JWKS.URL())

	// Restart the second ledger trusting the shop and the agent through the
	// gate (its keys are then fetched only from there).
	ledger2.stop()
	ledger2.cfg.Brands = []config.Brand{{InterfaceURL: shopBase, JWKSURI: gate.URL + "/brand/jwks", Issuer: shopBase + "/oauth"}}
	ledger2.cfg.Agents = []config.Agent{{Issuer: s.sc.PA.ID, JWKSURI: gate.URL + "/pa/jwks"}}
	ledger2.start(t)

	at := s.token(t)
	const turns = 5
	for i := range turns {
		s.send(t, at, "o"+string(rune('a'+i)), "what is the status of order A-88213?")
	}
	// The second ledger has answered UNAVAILABLE at least once per receipt
	// and stored nothing.
	deadline := time.Now().Add(20 * time.Second)
	for refused.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the ledger never tried the keys (fetches %d)", fetches.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	var list struct{ Rows []Row }
	if code := ledger2.call(t, "GET", "/v1/rows?target=A-88213", "support", nil, &list); code != 200 || len(list.Rows) != 0 {
		t.Fatalf("rows recorded while the keys were unreachable: %d %+v", code, list.Rows)
	}
	if d := s.p.PipelineDepth(); d == 0 {
		t.Fatal("the Provider's outbox gave up on receipts the ledger could not decide")
	}

	down.Store(false)
	waitDepth(t, s, 0, 60*time.Second)
	ledger2.call(t, "GET", "/v1/rows?target=A-88213&pageSize=100", "support", nil, &list)
	if len(list.Rows) != turns {
		t.Fatalf("rows after the outage: %d, want %d", len(list.Rows), turns)
	}
	for _, r := range list.Rows {
		if r.Status != "ROW_STATUS_AUTHORIZED" {
			t.Fatalf("row after the outage: %+v", r)
		}
	}
}
