package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
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

// Each writer RPC answers with the ledger's record of what it got, as the
// ledger does: the receipt's row by its receiptId, the refusal's row, the
// grant revoked.
func (f *fakeLedger) AppendReceipt(_ context.Context, r *ledgerv1.AppendReceiptRequest) (*ledgerv1.AppendReceiptResponse, error) {
	f.keep(r)
	return &ledgerv1.AppendReceiptResponse{Row: &ledgerv1.Row{ReceiptId: ReceiptID(r.GetReceiptJws()), Kind: ledgerv1.RowKind_ROW_KIND_RECEIPT},
		Outcome: ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED}, nil
}

func (f *fakeLedger) AppendRefusal(_ context.Context, r *ledgerv1.AppendRefusalRequest) (*ledgerv1.AppendRefusalResponse, error) {
	f.keep(r)
	return &ledgerv1.AppendRefusalResponse{Row: &ledgerv1.Row{Kind: ledgerv1.RowKind_ROW_KIND_REFUSAL,
		Refusal: &ledgerv1.Refusal{ClaimedPrincipal: r.GetClaimedPrincipal(), ClaimedAgent: r.GetClaimedAgent(), Reason: r.GetReason()}}}, nil
}

func (f *fakeLedger) RevokeGrant(_ context.Context, r *ledgerv1.RevokeGrantRequest) (*ledgerv1.RevokeGrantResponse, error) {
	f.keep(r)
	if r.GetProviderStatement() == "re.fu.sed" {
		return nil, status.Error(codes.InvalidArgument, "providerStatement: signature rejected")
	}
	return &ledgerv1.RevokeGrantResponse{GrantId: r.GetGrantId(), Revocation: &ledgerv1.Revocation{RevokedAt: r.GetRevokedAt()}}, nil
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
		{Refusal: &Refusal{ClaimedPrincipal: "sky-4471", ClaimedAgent: "https://pa.example", RequestJWT: "p.a.j",
			Action: RefusedAction{Tool: "rebook_flight", Target: "SKY-20931"}, Reason: "asked beyond a grant", ObservedAt: at, DelegationToken: "d.t.k"}},
		{Revocation: &Revocation{GrantID: "a2agrant_Xy-z_1", RevokedAt: at, Note: "revoked by the user"}},
	}
	want := []proto.Message{
		&ledgerv1.AppendReceiptRequest{ReceiptJws: "r.j.s", RequestJwt: "p.a.j", DelegationToken: "d.t.k", ContextId: "c-1", MessageId: "m-1",
			Actions: []*ledgerv1.Action{{Tool: "rebook_flight", Target: "SKY-20931", ArgsJson: `{"booking":"SKY-20931"}`}}},
		&ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "sky-4471", ClaimedAgent: "https://pa.example", RequestJwt: "p.a.j",
			Action: &ledgerv1.RefusalAction{Tool: "rebook_flight", Target: "SKY-20931"}, Reason: "asked beyond a grant", ObservedAt: timestamppb.New(at),
			DelegationToken: "d.t.k"},
		&ledgerv1.RevokeGrantRequest{GrantId: "a2agrant_Xy-z_1", RevokedAt: timestamppb.New(at), Note: "revoked by the user"},
	}
	// What the pipeline deliberately does not send.
	notSent := map[protoreflect.FullName]bool{
		"pactledger.ledger.v1.AppendReceiptRequest.limits": true, // the Provider's grants carry no limits
		// The answer's view: the pipeline reads only the codes, and a
		// ledger older than the field refuses a body that names it.
		"pactledger.ledger.v1.AppendReceiptRequest.view": true,
		// Signed by Post when the client has a Statement func
		// (TestLedgerClientPostsTheProvidersStatement).
		"pactledger.ledger.v1.RevokeGrantRequest.provider_statement": true,
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
			Row: &ledgerv1.Row{Id: "row of " + rc.GetReceiptJws(), ReceiptId: ReceiptID(rc.GetReceiptJws()), ScopesUsed: []string{"trips:rebook"},
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
	// "gone" was recorded and has been swept: delivered, as Post takes a 410
	// ROW_EXPIRED.
	if errs[0] != nil || !errors.Is(errs[1], ErrRejected) || errs[2] != nil || errs[3] == nil || errors.Is(errs[3], ErrRejected) || errs[4] != nil {
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
			// As the gateway of a ledgerd without the route answers.
			runtime.DefaultRoutingErrorHandler(r.Context(), mux, &runtime.JSONPb{}, w, r, http.StatusNotFound)
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

// Only the ledger's own answer takes an entry out of the outbox. Between
// the pipeline and the ledger a front may answer in its place: a 200 of
// its own (a page, an empty object, another entry's row), a redirect, or
// a 404 or 413 of its own. None of these is the ledger having the entry
// (nil) or refusing it for good (ErrRejected): the entry stays, to be
// posted again.
func TestLedgerClientTakesOnlyTheLedgersAnswer(t *testing.T) {
	f := &fakeLedger{}
	ledger := httptest.NewServer(f.gateway(t))
	defer ledger.Close()
	other := Item{Receipt: &Receipt{ReceiptJWS: "o.t.h", Actions: []Action{}}}
	otherRow, err := protojson.Marshal(&ledgerv1.AppendReceiptResponse{Row: &ledgerv1.Row{ReceiptId: ReceiptID(other.Receipt.ReceiptJWS)}})
	if err != nil {
		t.Fatal(err)
	}
	fronts := map[string]http.HandlerFunc{
		"a page": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>sign in</html>")) },
		"an empty object": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{}`))
		},
		"another receipt's row": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(otherRow) },
		"a redirect to the ledger": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, ledger.URL+r.URL.Path, http.StatusMovedPermanently)
		},
		"its own 404": http.NotFound,
		"its own 413": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		},
		"its own 400 page": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>bad request</html>", http.StatusBadRequest)
		},
		"its own 405 on GET": func(w http.ResponseWriter, r *http.Request) { http.Error(w, "method", http.StatusMethodNotAllowed) },
	}
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	items := []Item{
		{Receipt: &Receipt{ReceiptJWS: "r.j.s", RequestJWT: "p.a.j", DelegationToken: "d.t.k", Actions: []Action{{Tool: "cancel_order"}}}},
		{Refusal: &Refusal{ClaimedPrincipal: "u", ClaimedAgent: "pa", Action: RefusedAction{Tool: "cancel_order"}, Reason: "no grant", ObservedAt: at}},
		Revoked("g-1", at, "by the user"),
	}
	for name, h := range fronts {
		front := httptest.NewServer(h)
		c := &LedgerClient{URL: front.URL, Key: "k"}
		for _, it := range items {
			if err := c.Post(context.Background(), it); err == nil || errors.Is(err, ErrRejected) {
				t.Errorf("%s, posting %s: %v; want the entry kept to post again", name, itemName(it), err)
			}
		}
		errs, err := c.PostReceipts(context.Background(), []Item{items[0], items[0]})
		if errors.Is(err, ErrRejected) || (err == nil && (errs[0] == nil || errors.Is(errs[0], ErrRejected))) {
			t.Errorf("%s, posting a batch: %v %v; want the receipts kept to post again", name, err, errs)
		}
		front.Close()
	}
	// The ledger's own answers still count: recorded, or refused for good.
	c := &LedgerClient{URL: ledger.URL, Key: "k"}
	for _, it := range items {
		if err := c.Post(context.Background(), it); err != nil {
			t.Errorf("the ledger, posting %s: %v", itemName(it), err)
		}
	}
}

func itemName(it Item) string {
	switch {
	case it.Receipt != nil:
		return "a receipt"
	case it.Refusal != nil:
		return "a refusal"
	}
	return "a revocation"
}

// A revocation goes with the Provider's statement of it when the client
// signs one; one the ledger refuses is posted again without it, and the
// refusal is logged; a statement that cannot be signed leaves the entry
// to be posted again.
func TestLedgerClientPostsTheProvidersStatement(t *testing.T) {
	f := &fakeLedger{}
	srv := httptest.NewServer(f.gateway(t))
	defer srv.Close()
	at := time.Date(2026, 12, 7, 9, 0, 0, 5, time.UTC)
	var logs strings.Builder
	stmt := "st.at.ed"
	c := &LedgerClient{URL: srv.URL, Key: "k", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Statement: func(grant string, when time.Time) (string, error) {
			if grant != "g-1" || !when.Equal(at) {
				t.Errorf("asked to sign a statement of %s at %s", grant, when)
			}
			if stmt == "" {
				return "", errors.New("the store is closed")
			}
			return stmt, nil
		}}
	rev := Revoked("g-1", at, "by the user")
	plain := &ledgerv1.RevokeGrantRequest{GrantId: "g-1", RevokedAt: timestamppb.New(at), Note: "by the user"}
	stated := proto.CloneOf(plain)
	stated.ProviderStatement = "st.at.ed"
	if err := c.Post(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	refused := proto.CloneOf(plain)
	refused.ProviderStatement = "re.fu.sed"
	stmt = "re.fu.sed"
	if err := c.Post(context.Background(), rev); err != nil {
		t.Fatalf("a revocation whose statement the ledger refuses: %v, want it posted without", err)
	}
	want := []proto.Message{stated, refused, plain}
	if len(f.got) != len(want) {
		t.Fatalf("the ledger got %d requests, want %d", len(f.got), len(want))
	}
	for i := range want {
		if !proto.Equal(f.got[i], want[i]) {
			t.Errorf("request %d:\n got %v\nwant %v", i, f.got[i], want[i])
		}
	}
	if !strings.Contains(logs.String(), "refused the Provider's statement") || !strings.Contains(logs.String(), "g-1") {
		t.Errorf("logged %q, want the refused statement said", logs.String())
	}
	stmt = ""
	if err := c.Post(context.Background(), rev); err == nil || errors.Is(err, ErrRejected) {
		t.Errorf("a statement that cannot be signed: %v, want the entry kept to post again", err)
	}
	if len(f.got) != len(want) {
		t.Errorf("the ledger got a request without the statement that could not be signed")
	}
}
