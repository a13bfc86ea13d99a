package drill_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A writer re-posts one real look-up of the customer's, made after the
// disputed cancel, over and over with made-up limits and the
// disputed order as its logged target: each post is its own DUPLICATE
// row, read-only, dated (by a signature) after the cancel. A dispute
// drill reads the newest rows first and stops after 10,000 (here 200): it
// must not tell the customer the look-ups are the only records held, nor
// pass.
func TestLookUpsPostedOverAndOverDoNotHideTheDisputedAction(t *testing.T) {
	drill.SetMaxScanned(t, 200)
	e := newEnv(t, time.Now)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	cancel := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", At: at}))
	look := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at.Add(time.Minute)})
	if first := e.append(t, look); first.Class.String() != "read_only" {
		t.Fatalf("look-up recorded in class %v", first.Class)
	}
	const posts, workers = 300, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < posts; i += workers {
				row, _, err := e.l.AppendReceipt(context.Background(), ledger.ReceiptInput{ReceiptJWS: look.ReceiptJWS, RequestJWT: look.RequestJWT,
					DelegationToken: look.DelegationToken, Actions: look.Actions, Limits: &ledger.Limits{AmountMax: fmt.Sprint(i + 1)}})
				if err == nil && row.Status != ledger.Duplicate {
					err = fmt.Errorf("post %d recorded %v", i, row.Status)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rep.Reply, "only records") || !strings.Contains(rep.Reply, "did not cover") {
		t.Errorf("reply %q: the cancel %s is held too; want the records not covered said", rep.Reply, cancel.ID[:12])
	}
	if rep.ChecksTotal == 0 || rep.ChecksPassed == rep.ChecksTotal {
		t.Errorf("checks %d/%d, note %q: a drill that did not read every row needs a person", rep.ChecksPassed, rep.ChecksTotal, rep.Note)
	}
}
