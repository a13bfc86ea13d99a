package postgres_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// TestTwinRequestJWTsPostedAtOnce: a receipt, and another whose request
// JWT is the malleated twin of the first's (the same signature to the
// ledger's dedupe), posted at the same moment to the two replicas of one
// database, forty times. Never both AUTHORIZED: one is the first use of
// the request, the other its duplicate (docs/design/012, rule 1). The
// writes of one replica run in several transactions at once too, so each
// replica's own group commits race as well.
func TestTwinRequestJWTsPostedAtOnce(t *testing.T) {
	sc, a, b, _ := replicasOver(t, func(dir *localdir.Store) *localdir.Store { return dir })
	replicas := []replica{a, b}
	for i := range 40 {
		r := sc.Mint(pacttest.Spec{Target: fmt.Sprint("A-", i)})
		twin := sc.Mint(pacttest.Spec{Target: fmt.Sprint("B-", i), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
		twin.RequestJWT = pacttest.MalleateES256(r.RequestJWT)
		rows := make([]*ledger.Row, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j, x := range []*pacttest.Receipt{r, twin} {
			wg.Go(func() {
				rows[j], _, errs[j] = replicas[(i+j)%2].l.AppendReceipt(t.Context(), ledger.ReceiptInput{ReceiptJWS: x.ReceiptJWS, RequestJWT: x.RequestJWT, DelegationToken: x.DelegationToken, Actions: x.Actions})
			})
		}
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("pair %d, receipt %d: %v", i, j, err)
			}
		}
		first, dup := rows[0], rows[1]
		if first.Verifier.DuplicateOf != "" {
			first, dup = dup, first
		}
		if first.Status != ledger.Authorized || dup.Status == ledger.Authorized || dup.Verifier.DuplicateOf != first.ID {
			t.Fatalf("pair %d: rows %s %s (duplicate of %q) and %s %s (duplicate of %q); want one AUTHORIZED, the other its duplicate",
				i, rows[0].ID, rows[0].Status, rows[0].Verifier.DuplicateOf, rows[1].ID, rows[1].Status, rows[1].Verifier.DuplicateOf)
		}
	}
}
