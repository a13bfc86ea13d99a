package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// grantReads is a row store that counts the index entries the List calls
// of its write transactions read under one grant.
type grantReads struct {
	ledger.Store
	grant string
	read  *atomic.Int64
}

type grantReadsTx struct {
	ledger.Tx
	s grantReads
}

func (s grantReads) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.Update(ctx, func(tx ledger.Tx) error { return fn(grantReadsTx{tx, s}) })
}

func (tx grantReadsTx) List(q ledger.Query) ([]*ledger.Row, string, error) {
	if q.GrantID != tx.s.grant {
		return tx.Tx.List(q)
	}
	n, outer := 0, q.Read
	q.Read = &n
	rows, next, err := tx.Tx.List(q)
	if outer != nil {
		*outer += n
	}
	tx.s.read.Add(int64(n))
	return rows, next, err
}

// Forged receipts naming a customer's grant (their receipt signature
// fails) do not make the grant's countMax check read more: it reads the
// grant's rows that can count, those a signature vouches for, and no
// number of forged rows under the grant adds to what it reads while it
// holds the row store's write lock (docs/design/012).
func TestForgedRowsUnderAGrantAreNotReadByItsCountMaxCheck(t *testing.T) {
	const grant, forgedRows = "g-crowded", 2000
	var read atomic.Int64
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC),
		wrap: func(s ledger.Store) ledger.Store { return grantReads{Store: s, grant: grant, read: &read} }}
	t.Cleanup(h.sc.Close)
	h.open(t)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	first := h.sc.Mint(pacttest.Spec{Target: "A-1", GrantID: grant, At: at})
	ri := in(first)
	ri.Limits = &ledger.Limits{CountMax: 5}
	if row, _ := h.append(t, ri); row.Status != ledger.Authorized {
		t.Fatalf("the first vouched cancel: %v %+v", row.Status, row.Verifier.Checks)
	}
	forger := pacttest.MustKey("brand-k3", jose.ES256)
	forged := make([]*pacttest.Receipt, forgedRows)
	for i := range forged {
		forged[i] = h.sc.Mint(pacttest.Spec{Target: fmt.Sprint("F-", i), GrantID: grant, At: at})
		forged[i].ReceiptJWS = forger.Sign(forged[i].Claims)
	}
	// Posted by a few writers at once, so that they share commits.
	var wg sync.WaitGroup
	errs := make(chan error, len(forged))
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(forged); i += 16 {
				row, _, err := h.l.AppendReceipt(context.Background(), in(forged[i]))
				if err == nil && (row.Status != ledger.Unauthorized || row.ReceiptVerified()) {
					err = fmt.Errorf("forged receipt %d: %v, receipt verified %v", i, row.Status, row.ReceiptVerified())
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	read.Store(0)
	second := h.sc.Mint(pacttest.Spec{Target: "A-2", GrantID: grant, At: at.Add(time.Second)})
	ri = in(second)
	ri.Limits = &ledger.Limits{CountMax: 5}
	row, _ := h.append(t, ri)
	if c := check(row, "within_limits"); c.Result != verifier.Pass || !strings.Contains(c.Detail, "cancel_order 2 of 5") {
		t.Fatalf("the second vouched cancel under countMax 5, after %d forged ones: %v %+v", forgedRows, row.Status, c)
	}
	// The one vouched row before it, at most.
	n := read.Load()
	t.Logf("the countMax check read %d index entries under the grant, with %d forged rows and 1 vouched row before it", n, forgedRows)
	if n > 1 {
		t.Fatalf("the countMax check read %d index entries under the grant, with %d forged rows and 1 vouched row before it: want 1 at most", n, forgedRows)
	}
}
