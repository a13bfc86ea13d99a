package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// `ledgerctl drill --row` on a replayed receipt and on a refusal gives the
// playbook's decisions, not "customer-authorized" or "needs a person".
func TestDrillReplayAndRefusal(t *testing.T) {
	f := start(t)
	c, wctx := f.writer(t)
	r := f.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-7001"})
	post := func(jws string) *ledgerv1.AppendReceiptResponse {
		t.Helper()
		rep, err := c.AppendReceipt(wctx, &ledgerv1.AppendReceiptRequest{ReceiptJws: jws, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	first := post(r.ReceiptJWS).GetRow().GetId()
	rep := post(pacttest.MalleateES256(r.ReceiptJWS))
	if rep.GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_DUPLICATE || rep.GetRow().GetVerifier().GetDuplicateOf() != first {
		t.Fatalf("replay: %v of %q", rep.GetOutcome(), rep.GetRow().GetVerifier().GetDuplicateOf())
	}
	code, out, errs := f.ctl(t, "support", "drill", "--row", rep.GetRow().GetId())
	if code != 0 || !strings.Contains(out, "replay of row "+first) || !strings.Contains(out, "not a second approval") {
		t.Fatalf("drill of the replay: %d %s %s", code, out, errs)
	}

	ref, err := c.AppendRefusal(wctx, &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-30418", ClaimedAgent: "MyHelper",
		Action: &ledgerv1.RefusalAction{Tool: "change_address", Target: "acct-30418"}, Reason: "chat yes, no receipt", ObservedAt: timestamppb.New(time.Now().Add(-time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = f.ctl(t, "support", "drill", "--row", ref.GetRow().GetId())
	if code != 0 || !strings.Contains(out, "rule 1") || strings.Contains(out, "needs a person") || !strings.Contains(out, "no verifiable approval") {
		t.Fatalf("drill of the refusal: %d %s %s", code, out, errs)
	}
}
