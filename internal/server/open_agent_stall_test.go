package server_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/testseam"
)

// waitRow waits, at most until deadline, for the ledger to hold a row of
// target, and returns it.
func waitRow(t *testing.T, s *shop, target string, deadline time.Time) Row {
	t.Helper()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		var list struct{ Rows []Row }
		s.call(t, "GET", "/v1/rows?target="+target, "support", nil, &list)
		if len(list.Rows) > 0 {
			return list.Rows[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no row of %s in the ledger (the Provider's outbox holds %d entries, %d moved back)", target, s.p.PipelineDepth(), s.p.PipelineMovedBack())
		}
		<-poll.C
	}
}

// An open agent whose discovery fails after the Provider served its turn
// does not hold up the Provider's outbox: the ledger answers its receipt
// undecided for keys ("keys unavailable; retry"), and the pipeline moves
// it to the outbox's end and posts the registered agent's receipt behind
// it. The open agent's receipt stays in the outbox, and is recorded once
// its host answers again.
func TestAnOpenAgentsDeadDiscoveryDoesNotStallThePipeline(t *testing.T) {
	testseam.SetCallersOnLoopback(t)
	k := pacttest.MustKey("open-2026-10", jose.ES256)
	a := pacttest.Party{Key: k, JWKS: pacttest.NewJWKS(k)}
	t.Cleanup(a.JWKS.Close)
	var down atomic.Bool
	var disc *httptest.Server
	disc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() || r.URL.Path != "/.well-known/openid-configuration" {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + disc.URL + `","jwks_uri":"` + a.JWKS.URL() + `"}`))
	}))
	t.Cleanup(disc.Close)
	a.ID = disc.URL

	s := newShop(t, func(c *config.Config) { c.Provider.OpenAgents = true })
	registered := s.sc.PA
	s.sc.PA = a
	at := s.token(t) // the Provider fetched and cached the agent's keys
	down.Store(true) // the agent's host now fails every fetch
	s.send(t, at, "m1", "cancel order A-5531")

	s.sc.PA = registered
	at2 := s.token(t)
	s.send(t, at2, "m2", "what is the status of order A-88213?")

	deadline := time.Now().Add(60 * time.Second)
	if r := waitRow(t, s, "A-88213", deadline); r.Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("the registered agent's row: %+v", r)
	}
	// Its receipt leaves the outbox; the open agent's stays.
	waitDepth(t, s, 1, time.Until(deadline))
	if n := s.p.PipelineMovedBack(); n == 0 {
		t.Fatal("nothing was moved back")
	}
	var list struct{ Rows []Row }
	s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
	if len(list.Rows) != 0 {
		t.Fatalf("the open agent's receipt was recorded while its host was down: %+v", list.Rows)
	}

	down.Store(false) // the agent's host answers again
	if r := waitRow(t, s, "A-5531", deadline); r.Status != "ROW_STATUS_AUTHORIZED" {
		t.Fatalf("the open agent's row: %+v", r)
	}
	waitDepth(t, s, 0, time.Until(deadline))
}
