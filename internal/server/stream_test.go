package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// request is r as AppendReceipt takes it.
func request(r *pacttest.Receipt) *ledgerv1.AppendReceiptRequest {
	return &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
		Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
}

// openStream opens an AppendReceiptStream with role's key.
func openStream(t *testing.T, e *env, role string) ledgerv1.LedgerService_AppendReceiptStreamClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s, err := ledgerv1.NewLedgerServiceClient(dial(t, e)).AppendReceiptStream(authCtx(ctx, role))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// send sends receipt with seq on s.
func send(t *testing.T, s ledgerv1.LedgerService_AppendReceiptStreamClient, seq uint64, receipt *ledgerv1.AppendReceiptRequest) {
	t.Helper()
	if err := s.Send(&ledgerv1.AppendReceiptStreamRequest{Seq: seq, Receipt: receipt}); err != nil {
		t.Fatalf("send %d: %v", seq, err)
	}
}

// answers receives n answers from s, by seq; each seq is answered once.
func answers(t *testing.T, s ledgerv1.LedgerService_AppendReceiptStreamClient, n int) map[uint64]*ledgerv1.AppendReceiptResult {
	t.Helper()
	got := map[uint64]*ledgerv1.AppendReceiptResult{}
	for range n {
		a, err := s.Recv()
		if err != nil {
			t.Fatalf("after %d answers of %d: %v", len(got), n, err)
		}
		if _, twice := got[a.GetSeq()]; twice {
			t.Fatalf("seq %d answered twice", a.GetSeq())
		}
		got[a.GetSeq()] = a.GetResult()
	}
	return got
}

// brief is r in a few words, for a test's failure.
func brief(r *ledgerv1.AppendReceiptResult) string {
	if r.GetCode() != 0 {
		return fmt.Sprintf("%v: %s", codes.Code(r.GetCode()), r.GetMessage())
	}
	return fmt.Sprintf("%v, row %s", r.GetResponse().GetOutcome(), r.GetResponse().GetRow().GetId())
}

// A stream answers each receipt as AppendReceipt would, once, with its
// seq: rows recorded, each receipt sent again right behind itself found
// (a grant's receipts are recorded in the order they came), unparseable
// receipts refused without the others. The writer closing its side ends
// the stream with OK once all is answered, the rows read back, and the
// answers are counted by code on /metrics.
func TestAppendReceiptStream(t *testing.T) {
	e := newEnv(t, jose.ES256)
	s := openStream(t, e, "writer")
	grants := []string{"a2agrant_7Q2F", "a2agrant_other", "a2agrant_third"}
	const n = 24
	for i := range n {
		req := request(e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("A-4%03d", i), GrantID: grants[i%len(grants)]}))
		send(t, s, uint64(2*i), req)
		send(t, s, uint64(2*i+1), req) // the same receipt again, right behind it
	}
	send(t, s, 1000, &ledgerv1.AppendReceiptRequest{ReceiptJws: "not a compact JWS"})
	send(t, s, 1001, nil) // no receipt at all
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got := answers(t, s, 2*n+2)
	if a, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after every answer: %v, %v; want the stream's end", a, err)
	}
	for i := range n {
		first, again := got[uint64(2*i)], got[uint64(2*i+1)]
		if first.GetCode() != 0 || first.GetResponse().GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED || first.GetResponse().GetRow().GetActions()[0].GetTarget() != fmt.Sprintf("A-4%03d", i) {
			t.Errorf("receipt %d: %s", i, brief(first))
		}
		if again.GetCode() != 0 || again.GetResponse().GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_ALREADY_RECORDED || again.GetResponse().GetRow().GetId() != first.GetResponse().GetRow().GetId() {
			t.Errorf("receipt %d sent again behind itself: %s (first: %s)", i, brief(again), brief(first))
		}
	}
	for _, seq := range []uint64{1000, 1001} {
		if r := got[seq]; r.GetCode() != int32(codes.InvalidArgument) || r.GetResponse() != nil || r.GetMessage() == "" {
			t.Errorf("unparseable receipt %d: %s", seq, brief(r))
		}
	}
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	for _, seq := range []uint64{0, 2*n - 2} {
		row := got[seq].GetResponse().GetRow()
		if rep, err := c.GetRow(authCtx(context.Background(), "support"), &ledgerv1.GetRowRequest{Id: row.GetId()}); err != nil || rep.GetRow().GetStatus() != row.GetStatus() {
			t.Errorf("row of %d read back: %v, %v", seq, rep, err)
		}
	}
	m := scrape(t, e)
	if ok, bad := m[`pactledger_stream_receipts_total{code="OK"}`], m[`pactledger_stream_receipts_total{code="InvalidArgument"}`]; ok != 2*n || bad != 2 {
		t.Errorf("pactledger_stream_receipts_total: OK %v, InvalidArgument %v; want %d and 2", ok, bad, 2*n)
	}
}

// A stream is a writer's: a reader's key, or none, is refused before any
// receipt is read.
func TestAppendReceiptStreamRoles(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for role, want := range map[string]codes.Code{"support": codes.PermissionDenied, "": codes.Unauthenticated} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if role != "" {
			ctx = authCtx(ctx, role)
		}
		s, err := ledgerv1.NewLedgerServiceClient(dial(t, e)).AppendReceiptStream(ctx)
		if err == nil {
			_ = s.Send(&ledgerv1.AppendReceiptStreamRequest{Seq: 1, Receipt: request(e.sc.Mint(pacttest.Spec{Target: "A-4900"}))})
			_, err = s.Recv()
		}
		cancel()
		if status.Code(err) != want {
			t.Errorf("as %q: %v, want %v", role, err, want)
		}
	}
	var list struct{ Rows []Row }
	if code := e.call(t, "GET", "/v1/rows?target=A-4900", "auditor", nil, &list); code != 200 || len(list.Rows) != 0 {
		t.Errorf("a refused stream's receipt: %d, %d rows recorded", code, len(list.Rows))
	}
}

// A message over limits.maxBodyBytes ends the stream RESOURCE_EXHAUSTED,
// as it fails a call; the receipts answered before it stay recorded.
func TestAppendReceiptStreamBoundsAMessage(t *testing.T) {
	e := newEnv(t, jose.ES256)
	s := openStream(t, e, "writer")
	send(t, s, 1, request(e.sc.Mint(pacttest.Spec{Target: "A-4950"})))
	if got := answers(t, s, 1)[1]; got.GetCode() != 0 {
		t.Fatalf("a receipt within the bound: %s", brief(got))
	}
	big := request(e.sc.Mint(pacttest.Spec{Target: "A-4951"}))
	big.ContextId = strings.Repeat("x", e.cfg.Limits.MaxBodyBytes)
	_ = s.Send(&ledgerv1.AppendReceiptStreamRequest{Seq: 2, Receipt: big}) // the error, if any, is Recv's
	if a, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("after a message over the bound: %v, %v; want RESOURCE_EXHAUSTED", a, err)
	}
	var list struct{ Rows []Row }
	if code := e.call(t, "GET", "/v1/rows?target=A-4950", "auditor", nil, &list); code != 200 || len(list.Rows) != 1 {
		t.Errorf("the receipt answered before: %d, %d rows", code, len(list.Rows))
	}
}

// A receipt that is to be sent again (its brand's keys cannot be fetched)
// holds its grant's receipts read behind it: answered ABORTED, not
// recorded. Another grant's receipt is recorded meanwhile, and a receipt
// of the held grant read after the answers is recorded.
func TestAppendReceiptStreamHoldsAGrantBehindARetry(t *testing.T) {
	e := newEnv(t, jose.ES256)
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "A-5000"})), nil); code != 200 {
		t.Fatalf("append = %d", code) // the brand's keys are fetched and cached
	}
	unknownKid := e.sc.Mint(pacttest.Spec{Target: "A-5001"})
	unknownKid.ReceiptJWS = pacttest.MustKey("brand-k9", jose.ES256).Sign(unknownKid.Claims)
	jwks := e.sc.Brand.JWKS
	jwks.SetRaw([]byte("not a key set")) // the refetch for brand-k9 fails...
	fetching, release := jwks.Hold()     // ...once the test lets it answer
	defer release()

	s := openStream(t, e, "writer")
	send(t, s, 1, request(unknownKid))
	select { // the first receipt is being recorded
	case <-fetching:
	case <-time.After(time.Minute):
		t.Fatal("the brand's keys were not fetched again")
	}
	send(t, s, 2, request(e.sc.Mint(pacttest.Spec{Target: "A-5002"})))
	send(t, s, 3, request(e.sc.Mint(pacttest.Spec{Target: "A-5003", GrantID: "a2agrant_other"})))
	// Receipts are read in order: the answer to 3 means 2 was read, and
	// waits behind 1.
	if got := answers(t, s, 1); got[3].GetCode() != 0 || got[3].GetResponse().GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
		t.Fatalf("another grant's receipt while the first is held: %s", brief(got[3]))
	}
	release()
	got := answers(t, s, 2)
	if r := got[1]; r.GetCode() != int32(codes.Unavailable) || r.GetRetryDelay() == nil {
		t.Errorf("receipt whose keys cannot be fetched: %s, retry delay %v", brief(r), r.GetRetryDelay())
	}
	if r := got[2]; r.GetCode() != int32(codes.Aborted) || r.GetResponse() != nil || !strings.Contains(r.GetMessage(), "earlier receipt of its grant") {
		t.Errorf("the same grant's receipt behind it: %s", brief(r))
	}
	send(t, s, 4, request(e.sc.Mint(pacttest.Spec{Target: "A-5004"})))
	if got := answers(t, s, 1); got[4].GetCode() != 0 {
		t.Errorf("the grant's next receipt after the answers: %s", brief(got[4]))
	}
	var list struct{ Rows []Row }
	if code := e.call(t, "GET", "/v1/rows?target=A-5002", "auditor", nil, &list); code != 200 || len(list.Rows) != 0 {
		t.Errorf("the receipt that waited: %d, %d rows recorded", code, len(list.Rows))
	}
}

// When ledgerd shuts down, a stream the writer keeps open stops being
// read, every receipt read is answered, one still being recorded among
// them, and the stream ends UNAVAILABLE (not cut by the shutdown's
// deadline); every receipt answered is there after a restart.
func TestAppendReceiptStreamEndsOnShutdown(t *testing.T) {
	e := newEnv(t, jose.ES256)
	conn := dial(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := ledgerv1.NewLedgerServiceClient(conn).AppendReceiptStream(authCtx(ctx, "writer"))
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	for i := range 10 {
		send(t, s, uint64(i), request(e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("A-6%03d", i)})))
	}
	for _, r := range answers(t, s, 10) {
		acked = append(acked, r.GetResponse().GetRow().GetId())
	}
	// A receipt signed by a key the brand publishes next: recorded once
	// its fetch, held until ledgerd is shutting down, answers.
	k9 := pacttest.MustKey("brand-k9", jose.ES256)
	e.sc.Brand.JWKS.Set(e.sc.Brand.Key, k9)
	fetching, release := e.sc.Brand.JWKS.Hold()
	defer release()
	late := e.sc.Mint(pacttest.Spec{Target: "A-6010"})
	late.ReceiptJWS = k9.Sign(late.Claims)
	send(t, s, 10, request(late))
	select {
	case <-fetching:
	case <-time.After(time.Minute):
		t.Fatal("the brand's keys were not fetched again")
	}
	for i := 11; i < 20; i++ {
		send(t, s, uint64(i), request(e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("A-6%03d", i)})))
	}
	wctx, unwatch := context.WithCancel(ctx) // a watch left open would hold the shutdown up
	defer unwatch()
	health, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := health.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the shutdown: %v, %v", h, err)
	}
	stopped := make(chan struct{})
	go func() { e.stop(); close(stopped) }()
	for { // ledgerd is shutting down once it says it no longer serves
		h, err := health.Recv()
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	unwatch()
	release()
	answered := map[uint64]bool{}
	for {
		a, err := s.Recv()
		if err != nil {
			if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "shutting down") {
				t.Fatalf("the stream ended with %v; want UNAVAILABLE, ledgerd shutting down", err)
			}
			break
		}
		answered[a.GetSeq()] = true
		if a.GetResult().GetCode() != 0 {
			t.Errorf("receipt %d answered during the shutdown: %s", a.GetSeq(), brief(a.GetResult()))
			continue
		}
		acked = append(acked, a.GetResult().GetResponse().GetRow().GetId())
	}
	<-stopped
	if !answered[10] {
		t.Error("the receipt being recorded when the shutdown began was not answered")
	}
	t.Logf("%d of 20 receipts answered", len(acked))
	restartHolds(t, e, acked)
}

// ROW_VIEW_BASIC answers what names and classifies the row and leaves the
// rest empty, over gRPC, REST, in batches and on a stream; the row
// recorded is the whole row, and a duplicate's answer names the row it
// duplicates.
func TestRowViewBasic(t *testing.T) {
	e := newEnv(t, jose.ES256)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	basic := func(r *pacttest.Receipt) *ledgerv1.AppendReceiptRequest {
		req := request(r)
		req.View = ledgerv1.RowView_ROW_VIEW_BASIC
		return req
	}
	// isBasic reports what is wrong with row as a basic view of full.
	isBasic := func(row, full *ledgerv1.Row) string {
		switch {
		case row.GetId() != full.GetId() || row.GetReceiptId() != full.GetReceiptId() || row.GetKind() != full.GetKind() || row.GetStatus() != full.GetStatus() ||
			row.GetGrantId() != full.GetGrantId() || row.GetRetentionClass() != full.GetRetentionClass() || !row.GetRecordedAt().AsTime().Equal(full.GetRecordedAt().AsTime()):
			return "a field of the basic view differs from the row's"
		case row.GetPrincipal() != "" || row.GetAgent() != nil || row.GetBrandKey() != nil || len(row.GetActions()) != 0 || len(row.GetVerifier().GetChecks()) != 0 || row.GetEvidenceSha256() != "" || row.GetRetainUntil() != nil:
			return "a field outside the basic view is set"
		case full.GetPrincipal() == "" || len(full.GetVerifier().GetChecks()) == 0 || full.GetEvidenceSha256() == "":
			return "the row read back is not whole"
		}
		return ""
	}
	full := func(id string) *ledgerv1.Row {
		rep, err := c.GetRow(authCtx(ctx, "support"), &ledgerv1.GetRowRequest{Id: id})
		if err != nil {
			t.Fatalf("GetRow %s: %v", id, err)
		}
		return rep.GetRow()
	}

	first := e.sc.Mint(pacttest.Spec{Target: "A-7000"})
	one, err := c.AppendReceipt(authCtx(ctx, "writer"), basic(first))
	if err != nil {
		t.Fatal(err)
	}
	if bad := isBasic(one.GetRow(), full(one.GetRow().GetId())); bad != "" || one.GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
		t.Errorf("AppendReceipt: %s (%v)", bad, one.GetOutcome())
	}
	again := *first // the same receipt with another request JWT: a duplicate
	again.RequestClaims["jti"] = "another-jti"
	again.RequestJWT = e.sc.PA.Key.Sign(again.RequestClaims)
	dup, err := c.AppendReceipts(authCtx(ctx, "writer"), &ledgerv1.AppendReceiptsRequest{Receipts: []*ledgerv1.AppendReceiptRequest{
		basic(&again), request(e.sc.Mint(pacttest.Spec{Target: "A-7001"}))}})
	if err != nil {
		t.Fatal(err)
	}
	d := dup.GetResults()[0].GetResponse()
	if bad := isBasic(d.GetRow(), full(d.GetRow().GetId())); bad != "" || d.GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_DUPLICATE || d.GetRow().GetVerifier().GetDuplicateOf() != one.GetRow().GetId() {
		t.Errorf("AppendReceipts, the duplicate: %s (%v, duplicate of %q)", bad, d.GetOutcome(), d.GetRow().GetVerifier().GetDuplicateOf())
	}
	if row := dup.GetResults()[1].GetResponse().GetRow(); row.GetPrincipal() == "" || len(row.GetVerifier().GetChecks()) == 0 {
		t.Errorf("AppendReceipts, the receipt without a view: not the whole row: %v", row)
	}

	s := openStream(t, e, "writer")
	send(t, s, 1, basic(e.sc.Mint(pacttest.Spec{Target: "A-7002"})))
	if got := answers(t, s, 1)[1].GetResponse(); isBasic(got.GetRow(), full(got.GetRow().GetId())) != "" {
		t.Errorf("AppendReceiptStream: %s", isBasic(got.GetRow(), full(got.GetRow().GetId())))
	}

	body := post(e.sc.Mint(pacttest.Spec{Target: "A-7003"}))
	body["view"] = "ROW_VIEW_BASIC"
	var rest struct {
		Row     map[string]any `json:"row"`
		Outcome string         `json:"outcome"`
	}
	if code := e.call(t, "POST", "/v1/receipts", "writer", body, &rest); code != 200 || rest.Outcome != "APPEND_OUTCOME_CREATED" {
		t.Fatalf("REST = %d, %s", code, rest.Outcome)
	}
	if id, _ := rest.Row["id"].(string); id == "" || rest.Row["principal"] != "" || rest.Row["agent"] != nil || rest.Row["status"] != "ROW_STATUS_AUTHORIZED" || rest.Row["retentionClass"] != "RETENTION_CLASS_MONEY_MOVED" {
		t.Errorf("REST, the basic view: %v", rest.Row)
	}
}
