package server_test

import (
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
)

// A replica that runs no Provider, on the same configuration as the one
// that does (provider.enabled false, provider.baseUrl the Provider's
// public URL), trusts the Provider's brands as the Provider's own replica
// does: their keys fetched from the Provider's JWKS, their tools'
// retention classes from the same brand files. The Provider's receipts
// posted to it land AUTHORIZED, in the classes the brand files name.
func TestAReplicaWithoutTheProviderTrustsItsBrands(t *testing.T) {
	addr := freeAddr(t)
	s := newShop(t, func(c *config.Config) { c.Provider.LedgerURL = "http://" + addr })
	replica := newEnv(t, jose.ES256, func(c *config.Config) {
		off := false
		c.Provider.Enabled = &off
		c.Provider.BaseURL = "http://" + s.srv.ProviderAddr()
		c.Provider.BrandsDir = s.cfg.Provider.BrandsDir
		c.Brands = nil
		c.Agents = []config.Agent{{Issuer: s.sc.PA.ID, JWKSURI: s.sc.PA.JWKS.URL()}}
		c.Listen.HTTP = addr
	})

	at := s.token(t)
	s.send(t, at, "o1", "what is the status of order A-88213?")
	waitDepth(t, s, 0, 60*time.Second)
	var list struct{ Rows []Row }
	if code := replica.call(t, "GET", "/v1/rows?target=A-88213", "support", nil, &list); code != 200 || len(list.Rows) != 1 {
		t.Fatalf("rows on the replica: %d %+v", code, list.Rows)
	}
	r := list.Rows[0]
	if r.Status != "ROW_STATUS_AUTHORIZED" || r.RetentionClass != "RETENTION_CLASS_READ_ONLY" {
		t.Fatalf("the Provider's receipt on a replica without the Provider: %s, %s; checks %+v", r.Status, r.RetentionClass, r.Verifier.Checks)
	}
}
