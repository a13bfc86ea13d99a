package verifier_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// TestCachedTokenAfterRevocation records rows through a ledger whose
// verifier caches delegation tokens: once the grant is revoked, a later
// turn with the same (cached) token is recorded with grant_not_revoked
// FAIL, not authorized.
func TestCachedTokenAfterRevocation(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	objects, err := localdir.Open(filepath.Join(t.TempDir(), "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	c := newCached(t, sc, 100)
	l, err := ledger.New(store, objects, c.v, keys, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	first := sc.Mint(pacttest.Spec{At: at, Target: "A-1"})
	turn := func(r *pacttest.Receipt) *ledger.Row {
		t.Helper()
		row, _, err := l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: first.DelegationToken, Actions: r.Actions})
		if err != nil {
			t.Fatal(err)
		}
		return row
	}
	if row := turn(first); row.Status != ledger.Authorized {
		t.Fatalf("first turn: %s, want authorized", row.Status)
	}
	if row := turn(sc.Mint(pacttest.Spec{At: at.Add(time.Minute), Target: "A-2"})); row.Status != ledger.Authorized {
		t.Fatalf("second turn: %s, want authorized", row.Status)
	}
	if _, err := l.RevokeGrant(ctx, first.TokenClaims["grant_id"].(string), at.Add(2*time.Minute), "lost phone", "support", false); err != nil {
		t.Fatal(err)
	}
	row := turn(sc.Mint(pacttest.Spec{At: at.Add(3 * time.Minute), Target: "A-3"}))
	if row.Status == ledger.Authorized {
		t.Fatal("a turn after the revocation was recorded authorized")
	}
	revoked := false
	for _, ch := range row.Verifier.Checks {
		switch {
		case ch.Name == verifier.CheckGrantNotRevoked:
			revoked = ch.Result == verifier.Fail
		case ch.Result == verifier.Fail:
			t.Errorf("%s = FAIL (%s): only the revocation should fail", ch.Name, ch.Detail)
		}
	}
	if !revoked {
		t.Errorf("grant_not_revoked did not fail: %+v", row.Verifier.Checks)
	}
	if h, m := c.hitsMisses(t); h != 2 || m != 1 {
		t.Fatalf("hits %v misses %v: the token should have been checked once and found twice", h, m)
	}
}
