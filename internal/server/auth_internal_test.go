package server

import (
	"context"
	"testing"

	"github.com/pactledger/pactledger/internal/config"
)

// A request without a key names no caller, over REST as over gRPC, even
// when a configuration that skipped validation holds the hash of the
// empty key (what hashing an unset variable gives).
func TestNoKeyIsNoCaller(t *testing.T) {
	a, err := newAuthenticator([]config.APIKey{{Name: "lead", SHA256: config.HashKey(""), Roles: []string{config.RoleSupport}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, authorization := range []string{"", "Bearer ", "Bearer", "  "} {
		if _, known := a.identify(context.Background(), authorization); known {
			t.Errorf("REST: Authorization %q named key lead", authorization)
		}
		if p, err := a.check("/pactledger.ledger.v1.LedgerService/ListRows", bearerKey(authorization)); err == nil {
			t.Errorf("gRPC: Authorization %q was let in as %s", authorization, p.name)
		}
	}
}
