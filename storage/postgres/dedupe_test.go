package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
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

// TestARealReceiptTakesTheRequestJWTFromAForgedCopyOfAnEarlierVersion: a
// forged copy of a receipt that an earlier version recorded holds the
// request JWT's entries (under both of its hashes, as versions before
// ledger.IndexesRequestJWT wrote them for any first use). The real
// receipt posted after it, on the other replica, takes them over: another
// turn on the request JWT is its duplicate, before and after the copy is
// swept. Then twenty times the real receipt and another turn on its
// request JWT are posted at the same moment to the two replicas: one
// takes the entries over and is the first use, the other is its
// duplicate, never both AUTHORIZED.
func TestARealReceiptTakesTheRequestJWTFromAForgedCopyOfAnEarlierVersion(t *testing.T) {
	dsn := migrated(t)
	sc, a, b, _ := replicasOn(t, dsn, func(dir *localdir.Store) *localdir.Store { return dir })
	replicas := []replica{a, b}
	post := func(l *ledger.Ledger, x *pacttest.Receipt) (*ledger.Row, error) {
		row, _, err := l.AppendReceipt(t.Context(), ledger.ReceiptInput{ReceiptJWS: x.ReceiptJWS, RequestJWT: x.RequestJWT, DelegationToken: x.DelegationToken, Actions: x.Actions})
		return row, err
	}
	turn := func(target, jwt string) *pacttest.Receipt {
		x := sc.Mint(pacttest.Spec{Target: target})
		x.RequestJWT = jwt
		return x
	}
	// forged records a forged copy of r with its request JWT and gives it
	// the entries an earlier version gave it.
	forged := func(r *pacttest.Receipt) *ledger.Row {
		t.Helper()
		c := *r
		c.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(r.Claims)
		f, err := post(a.l, &c)
		if err != nil || f.Status != ledger.Unauthorized {
			t.Fatalf("the forged copy: %v, %v", f, err)
		}
		if got := entries(t, dsn, r.RequestJWT); got != [2]string{} {
			t.Fatalf("this version indexed the forged copy: entries %q", got)
		}
		hashes := verifier.Encodings(r.RequestJWT)
		if n := sqlValue[int64](t, dsn, `
WITH r AS (UPDATE ledger_rows SET request_jwt_twin = $2 WHERE id = $1),
i AS (INSERT INTO request_jwts (sha, row_id) SELECT unnest($3::text[]), $1 RETURNING 1)
SELECT count(*) FROM i`, f.ID, hashes[1], hashes); n != 2 {
			t.Fatalf("%d entries written for the forged copy, want 2", n)
		}
		return f
	}
	heldBy := func(when string, jwt string, id string) {
		t.Helper()
		if got := entries(t, dsn, jwt); got != [2]string{id, id} {
			t.Errorf("%s: the request JWT's entries name %q, want %s", when, got, id)
		}
	}

	real := sc.Mint(pacttest.Spec{Target: "A-1"})
	f := forged(real)
	g, err := post(b.l, real)
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != ledger.Authorized || g.Verifier.DuplicateOf != "" {
		t.Fatalf("the real receipt after its forged copy: %v, duplicate of %q; want AUTHORIZED, a row of its own", g.Status, g.Verifier.DuplicateOf)
	}
	heldBy("after the real receipt", real.RequestJWT, g.ID)
	for i, x := range []*pacttest.Receipt{turn("A-2", real.RequestJWT), turn("A-3", pacttest.MalleateES256(real.RequestJWT))} {
		if i == 1 {
			// Sweeping the copy removes no entry of the real receipt's.
			if err := a.store.Update(t.Context(), func(tx ledger.Tx) error {
				cur, err := tx.Row(f.ID)
				if err != nil {
					return err
				}
				_, err = ledger.SweepRow(tx, cur, ledger.Tombstone{ID: cur.ID, Kind: cur.Kind, Status: cur.Status, Class: cur.Class, RetainUntil: cur.RetainUntil, SweptAt: time.Now()})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			heldBy("after the copy was swept", real.RequestJWT, g.ID)
		}
		s, err := post(replicas[i%2].l, x)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status != ledger.Duplicate || s.Verifier.DuplicateOf != g.ID {
			t.Errorf("turn %d on the request JWT: %v, duplicate of %q; want DUPLICATE of the real receipt's row %s", i+2, s.Status, s.Verifier.DuplicateOf, g.ID)
		}
	}

	for i := range 20 {
		real := sc.Mint(pacttest.Spec{Target: fmt.Sprint("B-", i)})
		forged(real)
		rows := make([]*ledger.Row, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, x := range []*pacttest.Receipt{real, turn(fmt.Sprint("C-", i), real.RequestJWT)} {
			wg.Go(func() {
				<-start
				rows[j], errs[j] = post(replicas[(i+j)%2].l, x)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		first, dup := rows[0], rows[1]
		if first.Verifier.DuplicateOf != "" {
			first, dup = dup, first
		}
		if first.Status != ledger.Authorized || first.Verifier.DuplicateOf != "" || dup.Status != ledger.Duplicate || dup.Verifier.DuplicateOf != first.ID {
			t.Fatalf("pair %d: rows %s %v (duplicate of %q) and %s %v (duplicate of %q); want one AUTHORIZED, the other its duplicate",
				i, rows[0].ID[:12], rows[0].Status, rows[0].Verifier.DuplicateOf, rows[1].ID[:12], rows[1].Status, rows[1].Verifier.DuplicateOf)
		}
		heldBy(fmt.Sprint("pair ", i), real.RequestJWT, first.ID)
	}
}

// entries returns the rows the request-JWT entries of both encodings of
// jwt name in the database at dsn, "" for none.
func entries(t *testing.T, dsn, jwt string) [2]string {
	t.Helper()
	var out [2]string
	for i, sha := range verifier.Encodings(jwt) {
		out[i] = sqlValue[string](t, dsn, "SELECT coalesce((SELECT row_id FROM request_jwts WHERE sha = $1), '')", sha)
	}
	return out
}
