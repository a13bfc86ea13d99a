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

// A writer posts forged receipts (a broken signature: UNAUTHORIZED rows)
// under the customer's order for other principals, dated after the
// disputed cancel. The drill's lookup by order and customer reads at most
// 10,000 rows (here 200), matching or not: it must stop there and say a
// person is needed, not read every forged row, nor answer that nothing
// about the order is held.
func TestForgedRowsOfOtherPrincipalsStopTheLookup(t *testing.T) {
	drill.SetMaxScanned(t, 200)
	e := newEnv(t, time.Now)
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", At: at}))
	for i := range 250 {
		r := e.sc.Mint(pacttest.Spec{User: fmt.Sprintf("acct-%d", 90000+i), GrantID: fmt.Sprintf("a2agrant_forged%d", i), Target: "A-5531", At: at.Add(time.Duration(i+1) * time.Second)})
		r.ReceiptJWS = pacttest.TamperSignature(r.ReceiptJWS)
		if row := e.append(t, r); row.Status != ledger.Unauthorized {
			t.Fatalf("forged receipt %d recorded %v", i, row.Status)
		}
	}
	rep, err := e.r.Run(context.Background(), drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Note, "the lookup stopped after reading 200 rows") {
		t.Errorf("note %q: want the lookup stopped after reading 200 rows", rep.Note)
	}
	for i, p := range rep.Pulls {
		if p.Passed || i == 0 && (p.Name != drill.PullReceiptRow || !strings.HasPrefix(p.Detail, "needs a person: the lookup stopped after reading 200 rows")) {
			t.Errorf("pull %s: passed %v, %q; want the receipt row needing a person, the lookup stopped, and no pull passed", p.Name, p.Passed, p.Detail)
		}
	}
	if len(rep.Pulls) == 0 || strings.Contains(rep.Reply, "found no record") || strings.Contains(rep.Reply, "We hold more records about") || !strings.Contains(rep.Reply, "more records than this check could read, and it found none yet about") {
		t.Errorf("reply %q, %d pulls: want the records not covered said", rep.Reply, len(rep.Pulls))
	}
}
