package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pgtest"
)

// Two replicas given one leases.holder (a config file they share) hold
// leases and outbox claims under names of their own: a lease is taken
// again at once by its holder, and a claim is its holder's to renew, so
// under one name the two would take each other's leases from one
// another and both work on one claimed entry, out of its order. Each
// lease is held by one of them, and stays with it while it renews.
func TestTwoReplicasGivenOneHolderNameHoldUnderNamesOfTheirOwn(t *testing.T) {
	pgtest.Available(t)
	dsn := pgtest.CreateDB(t)
	const leaseTTL = 1500 * time.Millisecond
	e := newEnv(t, dsn, leaseTTL, 0)
	twin := func(c *config.Config) { c.Leases.Holder = "twin" }
	a, b := e.startInProcess("a", twin), e.startInProcess("b", twin)
	ha, hb := a.srv.Ledger().Holder(), b.srv.Ledger().Holder()
	if ha == hb || !strings.HasPrefix(ha, "twin-") || !strings.HasPrefix(hb, "twin-") {
		t.Fatalf("two replicas named twin hold as %q and %q: want twin and a suffix of each one's own", ha, hb)
	}
	var first map[string]lease
	poll(t, "every singleton's lease held", 30*time.Second, func() bool {
		first = holders(t, dsn)
		for _, name := range singletons {
			if l := first[name]; !l.live || l.holder != ha && l.holder != hb {
				return false
			}
		}
		return true
	})
	// Renewed every ttl/3: once each lease was renewed past a whole
	// lease period, the same holders under the same tokens (one that
	// took another's lease would hold it under a new token).
	var until map[string]time.Time
	poll(t, "every lease renewed for a whole lease period", 30*time.Second, func() bool {
		now := expiries(t, dsn)
		if until == nil {
			until = now
			return false
		}
		for _, name := range singletons {
			if !now[name].After(until[name].Add(leaseTTL)) {
				return false
			}
		}
		return true
	})
	for _, name := range singletons {
		if now := holders(t, dsn)[name]; now.holder != first[name].holder || now.token != first[name].token || !now.live {
			t.Errorf("lease %s: held by %s under token %d, then by %s under token %d (live %v): want it kept", name, first[name].holder, first[name].token, now.holder, now.token, now.live)
		}
	}
}

// expiries returns when each lease in the database expires.
func expiries(t *testing.T, dsn string) map[string]time.Time {
	t.Helper()
	var names []string
	var at []time.Time
	queryRow(t, dsn, "SELECT coalesce(array_agg(name ORDER BY name), '{}'), coalesce(array_agg(expires_at ORDER BY name), '{}') FROM leases", nil, &names, &at)
	out := map[string]time.Time{}
	for i, n := range names {
		out[n] = at[i]
	}
	return out
}
