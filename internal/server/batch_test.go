package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// AppendReceipts answers each receipt as AppendReceipt would, in the
// order they came: a row recorded, one found again, one refused as
// unparseable without the others refused with it, one the brand signed
// beyond its grant recorded as an incident, and the first again, found
// (a grant's receipts are recorded in order). The rows read back as
// AppendReceipt's would.
func TestAppendReceiptsREST(t *testing.T) {
	e := newEnv(t, jose.ES256)
	first := e.sc.Mint(pacttest.Spec{Target: "A-1001"})
	var one appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(first), &one); code != 200 {
		t.Fatalf("append = %d", code)
	}
	second := e.sc.Mint(pacttest.Spec{Target: "A-1002"})
	beyond := e.sc.Mint(pacttest.Spec{Target: "A-1003", Granted: "orders:read"})
	body := map[string]any{"receipts": []any{
		post(second),
		post(first), // recorded already
		map[string]any{"receiptJws": "not a compact JWS"},
		post(beyond),
		post(second), // the same grant's receipts are recorded in order
	}}
	var rep struct {
		Results []struct {
			Response *appendReply `json:"response"`
			Code     *int         `json:"code"`
			Message  *string      `json:"message"`
		} `json:"results"`
	}
	if code := e.call(t, "POST", "/v1/receipts:batch", "writer", body, &rep); code != 200 {
		t.Fatalf("batch = %d", code)
	}
	if len(rep.Results) != 5 {
		t.Fatalf("%d results for 5 receipts: %+v", len(rep.Results), rep.Results)
	}
	r := rep.Results
	for i, res := range r {
		if res.Code == nil || res.Message == nil {
			t.Fatalf("result %d without its code or message: %+v", i, res)
		}
	}
	if *r[0].Code != 0 || r[0].Response == nil || r[0].Response.Outcome != "APPEND_OUTCOME_CREATED" || r[0].Response.Row.Actions[0].Target != "A-1002" || r[0].Response.Row.Status != "ROW_STATUS_AUTHORIZED" {
		t.Errorf("new receipt: %+v", r[0])
	}
	if *r[1].Code != 0 || r[1].Response == nil || r[1].Response.Outcome != "APPEND_OUTCOME_ALREADY_RECORDED" || r[1].Response.Row.ID != one.Row.ID {
		t.Errorf("receipt recorded before: %+v", r[1])
	}
	if *r[2].Code != int(codes.InvalidArgument) || r[2].Response != nil || *r[2].Message == "" {
		t.Errorf("unparseable receipt: %+v", r[2])
	}
	if *r[3].Code != 0 || r[3].Response == nil || r[3].Response.Row.Status != "ROW_STATUS_INCIDENT" {
		t.Errorf("receipt beyond its grant: %+v %+v", r[3], r[3].Response)
	}
	if *r[4].Code != 0 || r[4].Response == nil || r[4].Response.Outcome != "APPEND_OUTCOME_ALREADY_RECORDED" || r[4].Response.Row.ID != r[0].Response.Row.ID {
		t.Errorf("the batch's own receipt again: %+v", r[4])
	}
	for _, res := range []int{0, 3} {
		var got struct{ Row Row }
		id := r[res].Response.Row.ID
		if code := e.call(t, "GET", "/v1/rows/"+id, "support", nil, &got); code != 200 || got.Row.ID != id || got.Row.Status != r[res].Response.Row.Status {
			t.Errorf("GET row %s = %d %+v", id, code, got.Row)
		}
	}

	m := scrape(t, e)
	for code, want := range map[string]float64{"OK": 4, "InvalidArgument": 1, "Unavailable": 0} {
		if got, ok := m[`pactledger_batch_receipts_total{code="`+code+`"}`]; !ok || got != want {
			t.Errorf("pactledger_batch_receipts_total{code=%q} = %v (shown: %v), want %v", code, got, ok, want)
		}
	}

	// The same receipts one at a time answer the same rows.
	var again appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(second), &again); code != 200 || again.Outcome != "APPEND_OUTCOME_ALREADY_RECORDED" || again.Row.ID != r[0].Response.Row.ID {
		t.Errorf("AppendReceipt after the batch = %d %+v", code, again)
	}

	many := make([]any, server.MaxBatchReceipts+1)
	for i := range many {
		many[i] = post(second)
	}
	for name, b := range map[string]map[string]any{"none": {"receipts": []any{}}, "too many": {"receipts": many}} {
		if code := e.call(t, "POST", "/v1/receipts:batch", "writer", b, nil); code != http.StatusBadRequest {
			t.Errorf("batch of %s = %d, want 400", name, code)
		}
	}
}

// Over gRPC, a batch of a receipt's turns: each its own row, and a reader's
// key may not post one.
func TestAppendReceiptsGRPC(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	var req ledgerv1.AppendReceiptsRequest
	for i := range 20 {
		r := e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("A-2%03d", i)})
		req.Receipts = append(req.Receipts, &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.AppendReceipts(authCtx(ctx, "writer"), &req)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for i, res := range resp.GetResults() {
		row := res.GetResponse().GetRow()
		if res.GetCode() != 0 || res.GetResponse().GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED || row.GetActions()[0].GetTarget() != req.Receipts[i].Actions[0].Target {
			t.Fatalf("result %d: %v", i, res)
		}
		ids[row.GetId()] = true
	}
	if len(ids) != 20 {
		t.Fatalf("%d rows for 20 receipts", len(ids))
	}
	if _, err := c.AppendReceipts(authCtx(ctx, "support"), &req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("as support: %v, want PermissionDenied", err)
	}
}

// After a receipt that is to be sent again (its brand's keys cannot be
// fetched), the later receipts of its grant in the same call wait for it:
// not recorded, answered ABORTED, so that sent again in order they are
// recorded in order. Another grant's receipt is recorded.
func TestAppendReceiptsHoldAGrantBehindARetry(t *testing.T) {
	e := newEnv(t, jose.ES256)
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "A-3000"})), nil); code != 200 {
		t.Fatalf("append = %d", code) // the brand's keys are fetched and cached
	}
	unknownKid := e.sc.Mint(pacttest.Spec{Target: "A-3001"})
	unknownKid.ReceiptJWS = pacttest.MustKey("brand-k9", jose.ES256).Sign(unknownKid.Claims)
	e.sc.Brand.JWKS.SetRaw([]byte("not a key set")) // the refetch for brand-k9 fails
	body := map[string]any{"receipts": []any{
		post(unknownKid),
		post(e.sc.Mint(pacttest.Spec{Target: "A-3002"})),
		post(e.sc.Mint(pacttest.Spec{Target: "A-3003", GrantID: "a2agrant_other"})),
	}}
	var rep struct {
		Results []struct {
			Response   *appendReply `json:"response"`
			Code       int          `json:"code"`
			Message    string       `json:"message"`
			RetryDelay *string      `json:"retryDelay"`
		} `json:"results"`
	}
	if code := e.call(t, "POST", "/v1/receipts:batch", "writer", body, &rep); code != 200 || len(rep.Results) != 3 {
		t.Fatalf("batch = %d, %d results", code, len(rep.Results))
	}
	r := rep.Results
	if r[0].Code != int(codes.Unavailable) || r[0].RetryDelay == nil || r[0].Response != nil {
		t.Errorf("receipt whose keys cannot be fetched: %+v", r[0])
	}
	if r[1].Code != int(codes.Aborted) || r[1].Response != nil || !strings.Contains(r[1].Message, "earlier receipt of its grant") {
		t.Errorf("the same grant's next receipt: %+v", r[1])
	}
	if r[2].Code != 0 || r[2].Response == nil || r[2].Response.Outcome != "APPEND_OUTCOME_CREATED" {
		t.Errorf("another grant's receipt: %+v", r[2])
	}
	var list struct{ Rows []Row }
	if code := e.call(t, "GET", "/v1/rows?target=A-3002", "auditor", nil, &list); code != 200 || len(list.Rows) != 0 {
		t.Errorf("the receipt that waited: %d, %d rows recorded", code, len(list.Rows))
	}
}
