package postgres_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"

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

// TestAForgedCopyIsNeverTheOriginalOfTheRealReceipt: a copy of a receipt's
// claims under a signature that fails, posted with the real request JWT,
// before the real receipt or at the same moment on the other replica. The
// real receipt is never recorded as its duplicate: it is AUTHORIZED, a row
// of its own, whichever write the database took first; and the real
// receipt's malleated twin posted after is still its duplicate.
func TestAForgedCopyIsNeverTheOriginalOfTheRealReceipt(t *testing.T) {
	sc, a, b, _ := replicasOver(t, func(dir *localdir.Store) *localdir.Store { return dir })
	replicas := []replica{a, b}
	post := func(l *ledger.Ledger, x *pacttest.Receipt) (*ledger.Row, error) {
		row, _, err := l.AppendReceipt(t.Context(), ledger.ReceiptInput{ReceiptJWS: x.ReceiptJWS, RequestJWT: x.RequestJWT, DelegationToken: x.DelegationToken, Actions: x.Actions})
		return row, err
	}
	forgedCopy := func(r *pacttest.Receipt) *pacttest.Receipt {
		c := *r
		c.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(r.Claims)
		return &c
	}

	real := sc.Mint(pacttest.Spec{Target: "A-5531"})
	f, err := post(a.l, forgedCopy(real))
	if err != nil || f.Status != ledger.Unauthorized {
		t.Fatalf("the forged copy: %v, %v", f, err)
	}
	g, err := post(b.l, real)
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != ledger.Authorized || g.Verifier.DuplicateOf != "" {
		t.Errorf("the real receipt after its forged copy: %v, duplicate of %q; want AUTHORIZED, a row of its own", g.Status, g.Verifier.DuplicateOf)
	}
	twin := *real
	twin.ReceiptJWS = pacttest.MalleateES256(real.ReceiptJWS)
	d, err := post(a.l, &twin)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != ledger.Duplicate || d.Verifier.DuplicateOf != g.ID {
		t.Errorf("the real receipt's twin: %v, duplicate of %q; want DUPLICATE of %s", d.Status, d.Verifier.DuplicateOf, g.ID)
	}
	// The copy took no request JWT: another turn on it duplicates the
	// real receipt's row.
	second := sc.Mint(pacttest.Spec{Target: "A-5532"})
	second.RequestJWT = real.RequestJWT
	s, err := post(a.l, second)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != ledger.Duplicate || s.Verifier.DuplicateOf != g.ID {
		t.Errorf("a second turn on the request JWT: %v, duplicate of %q; want DUPLICATE of %s", s.Status, s.Verifier.DuplicateOf, g.ID)
	}

	for i := range 20 {
		real := sc.Mint(pacttest.Spec{Target: fmt.Sprint("B-", i)})
		rows := make([]*ledger.Row, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j, x := range []*pacttest.Receipt{forgedCopy(real), real} {
			wg.Go(func() { rows[j], errs[j] = post(replicas[(i+j)%2].l, x) })
		}
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("pair %d, receipt %d: %v", i, j, err)
			}
		}
		f, g := rows[0], rows[1]
		if g.Status != ledger.Authorized || g.Verifier.DuplicateOf != "" || f.Status != ledger.Unauthorized || (f.Verifier.DuplicateOf != "" && f.Verifier.DuplicateOf != g.ID) {
			t.Fatalf("pair %d: forged copy %v (duplicate of %q), real receipt %v (duplicate of %q); want the real one AUTHORIZED, a row of its own",
				i, f.Status, f.Verifier.DuplicateOf, g.Status, g.Verifier.DuplicateOf)
		}
	}
}
