package server_test

import (
	"context"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/verifier"
)

// REST and gRPC answers say what vouches for each action's target: a real
// receipt a writer posted with its action filed under another order is
// AUTHORIZED, and its row, read by id or found by the order it is filed
// under, says the target is the action log's alone; the pipeline's post
// of a receipt says the signed args name it.
func TestAnswersSayWhereATargetComesFrom(t *testing.T) {
	e := newEnv(t, jose.ES256)
	signed := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5000"})
	moved := e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	moved.Actions = []verifier.Action{{Tool: moved.Actions[0].Tool, Target: "B-8888", ArgsJSON: moved.Actions[0].ArgsJSON}}
	want := map[string]string{}
	for _, c := range []struct {
		r      *pacttest.Receipt
		target string
		source string
	}{{signed, "A-5000", "TARGET_SOURCE_SIGNED_ARGS"}, {moved, "B-8888", "TARGET_SOURCE_WRITER"}} {
		var rep appendReply
		if code := e.call(t, "POST", "/v1/receipts", "writer", post(c.r), &rep); code != 200 {
			t.Fatalf("append = %d", code)
		}
		if rep.Row.Status != "ROW_STATUS_AUTHORIZED" || len(rep.Row.Actions) != 1 || rep.Row.Actions[0].TargetSource != c.source {
			t.Fatalf("append of %s: %s %+v; want authorized, its target from %s", c.target, rep.Row.Status, rep.Row.Actions, c.source)
		}
		want[rep.Row.ID] = c.source
		var list struct{ Rows []Row }
		if e.call(t, "GET", "/v1/rows?target="+c.target, "support", nil, &list); len(list.Rows) != 1 || list.Rows[0].Actions[0].TargetSource != c.source {
			t.Errorf("REST rows under %s: %+v; want one, its target from %s", c.target, list.Rows, c.source)
		}
		var got struct{ Row Row }
		if e.call(t, "GET", "/v1/rows/"+rep.Row.ID, "support", nil, &got); got.Row.Actions[0].TargetSource != c.source {
			t.Errorf("REST row %s: actions %+v; want the target from %s", c.target, got.Row.Actions, c.source)
		}
	}
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	ctx := authCtx(context.Background(), "support")
	for id, source := range want {
		rep, err := c.GetRow(ctx, &ledgerv1.GetRowRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.GetRow().GetActions()[0].GetTargetSource().String(); got != source {
			t.Errorf("gRPC row %s: target source %s; want %s", id[:12], got, source)
		}
	}
	list, err := c.ListRows(ctx, &ledgerv1.ListRowsRequest{Target: "B-8888"})
	if err != nil {
		t.Fatal(err)
	}
	if rows := list.GetRows(); len(rows) != 1 || rows[0].GetActions()[0].GetTargetSource() != ledgerv1.TargetSource_TARGET_SOURCE_WRITER {
		t.Errorf("gRPC rows under B-8888: %v; want one, its target the action log's alone", rows)
	}
}
