package drill_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A writer posts forged receipts (their signature broken) naming a real
// row's grant at the real row's signed time, more of them than a drill
// reads. The drill of the real row looks for later posts of its receipt
// among the grant's rows at that time; a later post of a receipt whose
// signature verified verifies too, so only the rows a signature vouches
// for are read, and the forged ones do not make the decision need a
// person, in a dispute drill or the monthly one.
func TestForgedRowsAtARowsGrantAndTimeDoNotStopItsDrill(t *testing.T) {
	drill.SetMaxScanned(t, 40)
	e := newEnv(t, time.Now)
	ctx := context.Background()
	real := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))
	for i := range 50 {
		f := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: fmt.Sprintf("Z-%d", i)})
		f.ReceiptJWS = pacttest.TamperSignature(f.ReceiptJWS)
		row, _, err := e.l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: f.ReceiptJWS, RequestJWT: f.RequestJWT, DelegationToken: f.DelegationToken, Actions: f.Actions})
		if err != nil || row.Status != ledger.Unauthorized || !row.IssuedAt.Equal(real.IssuedAt) || row.GrantID != real.GrantID {
			t.Fatalf("forged row %d: %v, %+v", i, err, row)
		}
	}
	for _, req := range []drill.Request{{Target: "A-5531", Principal: "acct-48213"}, {Monthly: true, Sample: 5}} {
		rep, err := e.r.Run(ctx, req, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if d := decisions(rep)[real.ID]; !d.Passed {
			t.Errorf("monthly %v: the real row's decision: %+v; want it passed", req.Monthly, d)
		}
	}
}
