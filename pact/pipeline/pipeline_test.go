package pipeline

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// An outbox entry written before the outbox held refusals and revocations
// (a bare receipt) is still posted as a receipt.
func TestOutboxReadsBareReceipts(t *testing.T) {
	it, err := DecodeItem([]byte(`{"receiptJws":"a.b.c","requestJwt":"x","delegationToken":"y","actions":[]}`))
	if err != nil || it.Receipt == nil || it.Receipt.ReceiptJWS != "a.b.c" {
		t.Fatalf("bare receipt: %v %+v", err, it)
	}
	it, err = DecodeItem([]byte(`{"refusal":{"claimedPrincipal":"p","action":{"tool":"t"},"reason":"r"}}`))
	if err != nil || it.Refusal == nil || it.Receipt != nil {
		t.Fatalf("refusal: %v %+v", err, it)
	}
}

// fakeLedger is the ledger's generated gateway over a service that records
// what the writer RPCs receive.
type fakeLedger struct {
	ledgerv1.UnimplementedLedgerServiceServer
	mu  sync.Mutex
	got []proto.Message
}

func (f *fakeLedger) keep(m proto.Message) {
	f.mu.Lock()
	f.got = append(f.got, m)
	f.mu.Unlock()
}

func (f *fakeLedger) AppendReceipt(_ context.Context, r *ledgerv1.AppendReceiptRequest) (*ledgerv1.AppendReceiptResponse, error) {
	f.keep(r)
	return &ledgerv1.AppendReceiptResponse{}, nil
}

func (f *fakeLedger) AppendRefusal(_ context.Context, r *ledgerv1.AppendRefusalRequest) (*ledgerv1.AppendRefusalResponse, error) {
	f.keep(r)
	return &ledgerv1.AppendRefusalResponse{}, nil
}

func (f *fakeLedger) RevokeGrant(_ context.Context, r *ledgerv1.RevokeGrantRequest) (*ledgerv1.RevokeGrantResponse, error) {
	f.keep(r)
	return &ledgerv1.RevokeGrantResponse{}, nil
}

// gateway is the ledger's generated REST gateway over f.
func (f *fakeLedger) gateway(t *testing.T) *runtime.ServeMux {
	t.Helper()
	mux := runtime.NewServeMux()
	if err := ledgerv1.RegisterLedgerServiceHandlerServer(context.Background(), mux, f); err != nil {
		t.Fatal(err)
	}
	return mux
}

// The pipeline posts the generated ledgerv1 requests through the ledger's
// generated REST gateway and they arrive whole. It fails when the proto
// changes in a way the pipeline does not follow: a renamed or retyped field
// does not build, a moved route does not arrive, and a field the pipeline
// neither sets nor deliberately leaves out fails the coverage check.
func TestPipelineFollowsTheLedgerAPI(t *testing.T) {
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	items := []Item{
		{Receipt: &Receipt{ReceiptJWS: "r.j.s", RequestJWT: "p.a.j", DelegationToken: "d.t.k", ContextID: "c-1", MessageID: "m-1",
			Actions: []Action{{Tool: "rebook_flight", Target: "SKY-20931", ArgsJSON: `{"booking":"SKY-20931"}`}}}},
		{Refusal: &Refusal{ClaimedPrincipal: "sub u1 of https://pa.example", ClaimedAgent: "https://pa.example", RequestJWT: "p.a.j",
			Action: RefusedAction{Tool: "rebook_flight", Target: "SKY-20931"}, Reason: "asked without a grant", ObservedAt: at}},
		{Revocation: &Revocation{GrantID: "a2agrant_Xy-z_1", RevokedAt: at, Note: "revoked by the user"}},
	}
	want := []proto.Message{
		&ledgerv1.AppendReceiptRequest{ReceiptJws: "r.j.s", RequestJwt: "p.a.j", DelegationToken: "d.t.k", ContextId: "c-1", MessageId: "m-1",
			Actions: []*ledgerv1.Action{{Tool: "rebook_flight", Target: "SKY-20931", ArgsJson: `{"booking":"SKY-20931"}`}}},
		&ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "sub u1 of https://pa.example", ClaimedAgent: "https://pa.example", RequestJwt: "p.a.j",
			Action: &ledgerv1.RefusalAction{Tool: "rebook_flight", Target: "SKY-20931"}, Reason: "asked without a grant", ObservedAt: timestamppb.New(at)},
		&ledgerv1.RevokeGrantRequest{GrantId: "a2agrant_Xy-z_1", RevokedAt: timestamppb.New(at), Note: "revoked by the user"},
	}
	// What the pipeline deliberately does not send.
	notSent := map[protoreflect.FullName]bool{
		"pactledger.ledger.v1.AppendReceiptRequest.limits": true, // the Provider's grants carry no limits
		// The answer's view: the pipeline reads only the codes, and a
		// ledger older than the field refuses a body that names it.
		"pactledger.ledger.v1.AppendReceiptRequest.view": true,
	}
	for i, it := range items {
		_, msg, err := ledgerRequest(it)
		if err != nil {
			t.Fatal(err)
		}
		fields := msg.ProtoReflect().Descriptor().Fields()
		for j := range fields.Len() {
			fd := fields.Get(j)
			if !msg.ProtoReflect().Has(fd) && !notSent[fd.FullName()] {
				t.Errorf("item %d: the pipeline does not set %s: map it from the outbox entry or list it as not sent", i, fd.FullName())
			}
		}
	}

	f := &fakeLedger{}
	mux := f.gateway(t)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &LedgerClient{URL: srv.URL, Key: "k"}
	for _, it := range items {
		if err := c.Post(context.Background(), it); err != nil {
			t.Fatalf("post %+v: %v", it, err)
		}
	}
	if len(f.got) != len(want) {
		t.Fatalf("the ledger got %d requests, want %d", len(f.got), len(want))
	}
	for i := range want {
		if !proto.Equal(f.got[i], want[i]) {
			t.Errorf("request %d:\n got %v\nwant %v", i, f.got[i], want[i])
		}
	}
	if err := c.Post(context.Background(), Item{}); !errors.Is(err, ErrRejected) {
		t.Fatalf("an empty entry: %v", err)
	}
}

// AppendReceipts answers each receipt by its JWS: "bad" unparseable,
// "gone" swept, "wait" keys unavailable, any other recorded.
func (f *fakeLedger) AppendReceipts(_ context.Context, r *ledgerv1.AppendReceiptsRequest) (*ledgerv1.AppendReceiptsResponse, error) {
	f.keep(r)
	rep := &ledgerv1.AppendReceiptsResponse{}
	for _, rc := range r.GetReceipts() {
		res := &ledgerv1.AppendReceiptResult{Response: &ledgerv1.AppendReceiptResponse{Outcome: ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED,
			Row: &ledgerv1.Row{Id: "row of " + rc.GetReceiptJws(), ScopesUsed: []string{"trips:rebook"},
				Verifier: &ledgerv1.Verifier{Checks: []*ledgerv1.Check{{Name: "receipt_signature", Result: ledgerv1.CheckResult_CHECK_RESULT_PASS, Detail: "kid k1"}}}}}}
		switch rc.GetReceiptJws() {
		case "bad":
			res = &ledgerv1.AppendReceiptResult{Code: int32(codes.InvalidArgument), Message: "receiptJws: not a compact JWS"}
		case "gone":
			res = &ledgerv1.AppendReceiptResult{Code: int32(codes.NotFound), Message: "row expired", Reason: "ROW_EXPIRED"}
		case "wait":
			res = &ledgerv1.AppendReceiptResult{Code: int32(codes.Unavailable), Message: "signing keys unavailable; retry"}
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// PostReceipts sends the receipts in one AppendReceipts call through the
// ledger's generated gateway and reads each one's answer: recorded,
// refused for good (ErrRejected), or to be posted again. A ledger without
// the route refuses the call itself.
func TestLedgerClientPostReceipts(t *testing.T) {
	f := &fakeLedger{}
	mux := f.gateway(t)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &LedgerClient{URL: srv.URL, Key: "k"}
	var items []Item
	for _, jws := range []string{"r.j.s", "bad", "gone", "wait", "a.b.c"} {
		items = append(items, Item{Receipt: &Receipt{ReceiptJWS: jws, RequestJWT: "p.a.j", DelegationToken: "d.t.k", Actions: []Action{{Tool: "rebook_flight"}}}})
	}
	errs, err := c.PostReceipts(context.Background(), items)
	if err != nil || len(errs) != len(items) {
		t.Fatalf("PostReceipts: %v, %d answers", err, len(errs))
	}
	if errs[0] != nil || !errors.Is(errs[1], ErrRejected) || !errors.Is(errs[2], ErrRejected) || errs[3] == nil || errors.Is(errs[3], ErrRejected) || errs[4] != nil {
		t.Fatalf("answers %v", errs)
	}
	if !strings.Contains(errs[1].Error(), "receiptJws: not a compact JWS") || !strings.Contains(errs[3].Error(), "signing keys unavailable; retry") {
		t.Fatalf("the answers' messages were lost: %v", errs)
	}
	if len(f.got) != 1 || len(f.got[0].(*ledgerv1.AppendReceiptsRequest).GetReceipts()) != 5 {
		t.Fatalf("the ledger got %v", f.got)
	}
	_, want, _ := ledgerRequest(items[0])
	if got := f.got[0].(*ledgerv1.AppendReceiptsRequest).GetReceipts()[0]; !proto.Equal(got, want) {
		t.Fatalf("the first receipt arrived as %v, want %v", got, want)
	}

	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/receipts:batch" {
			http.NotFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	defer older.Close()
	c.URL = older.URL
	if _, err := c.PostReceipts(context.Background(), items); !errors.Is(err, ErrRejected) {
		t.Fatalf("a ledger without AppendReceipts: %v, want the call refused", err)
	}
}
