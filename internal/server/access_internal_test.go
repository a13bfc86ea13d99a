package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// While the row store takes no writes the access log queues records in
// memory, then reads wait for room; a read whose record could not be
// queued before its caller's deadline is not answered: Unavailable, not
// the row.
func TestReadNotAnsweredWhenItsAccessRecordCannotBeQueued(t *testing.T) {
	full := ledger.NewAccessLog(nil, ledger.AccessLogConfig{MaxQueued: 1, FlushInterval: time.Hour}) // never written: a store taking no writes
	a := accessRecorder{access: full, log: slog.New(slog.DiscardHandler)}
	info := &grpc.UnaryServerInfo{FullMethod: ledgerv1.LedgerService_GetRow_FullMethodName}
	row := &ledgerv1.GetRowResponse{Row: &ledgerv1.Row{Id: "ab", Principal: "acct-48213"}}
	h := func(context.Context, any) (any, error) { return row, nil }
	ctx := context.WithValue(context.Background(), principalKey{}, principal{name: "support-key", roles: []string{"support"}})
	if resp, err := a.unary(ctx, &ledgerv1.GetRowRequest{Id: "ab"}, info, h); err != nil || resp != row { // fills the queue
		t.Fatalf("a read with room in the queue: %v, %v", resp, err)
	}
	ctx2, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	resp, err := a.unary(ctx2, &ledgerv1.GetRowRequest{Id: "ab"}, info, h)
	if n := full.Queued(); n != 1 {
		t.Fatalf("%d records queued, want 1", n)
	}
	if status.Code(err) != codes.Unavailable || resp != nil {
		t.Errorf("a read not recorded (queue full) answered %v, %v; want no reply and Unavailable", resp, err)
	}
}

// ctxStore is a bbolt row store whose reads refuse a context that is
// done, as PostgreSQL's do.
type ctxStore struct{ *bolt.Store }

func (s ctxStore) View(ctx context.Context, fn func(ledger.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.View(ctx, fn)
}

// recorderOnBolt is an accessRecorder over a ledger and an access log in a
// bbolt row store of its own (whose reads refuse a context that is done),
// with the access log to list and the scenario receipts are minted in.
func recorderOnBolt(t *testing.T) (accessRecorder, *ledger.AccessLog, *pacttest.Scenario) {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	dir := t.TempDir()
	bs, err := bolt.Open(filepath.Join(dir, "l.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	b := ctxStore{bs}
	objects, err := localdir.Open(filepath.Join(dir, "ev"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: sc.Audience})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(b, objects, v, sc.Static(time.Now()), ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	log := ledger.NewAccessLog(b, ledger.AccessLogConfig{})
	return accessRecorder{access: log, log: slog.New(slog.DiscardHandler), rows: l}, log, sc
}

// A drill report names its rows by id, and its details and reply name the
// customer. Read once its row is gone (swept, or not in the row store),
// the report's principals cannot be read from the row: the record is cut,
// so that access-log --principal lists it for the customer.
func TestADrillReadWhoseRowIsGoneIsListedForEveryPrincipal(t *testing.T) {
	a, log, _ := recorderOnBolt(t)
	const gone = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	report := &ledgerv1.DrillReport{Id: "DRILL-7", Kind: ledgerv1.DrillKind(1),
		Request: &ledgerv1.RunDrillRequest{Target: "A-5531"}, Rows: []string{gone},
		Pulls: []*ledgerv1.DrillPull{{RowId: gone, Name: "receipt_row", Passed: true, Detail: "row 0f1e2d3c for A-5531, acct-48213, cancel_order at 14:02"}},
		Reply: "On 6 October your assistant cancelled order A-5531 for account acct-48213"}
	ctx := context.WithValue(context.Background(), principalKey{}, principal{name: "support-key", roles: []string{"support"}})
	for _, tc := range []struct {
		method string
		req    any
		resp   any
	}{
		{ledgerv1.LedgerService_GetDrill_FullMethodName, &ledgerv1.GetDrillRequest{Id: "DRILL-7"}, &ledgerv1.GetDrillResponse{Report: report}},
		{ledgerv1.LedgerService_ListDrills_FullMethodName, &ledgerv1.ListDrillsRequest{}, &ledgerv1.ListDrillsResponse{Reports: []*ledgerv1.DrillReport{report}}},
	} {
		h := func(context.Context, any) (any, error) { return tc.resp, nil }
		if _, err := a.unary(ctx, tc.req, &grpc.UnaryServerInfo{FullMethod: tc.method}, h); err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
	}
	page, err := log.List(context.Background(), ledger.AccessQuery{Limit: 10, Principal: "acct-48213", Before: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range page.Records {
		if !r.RowPrincipalsCut {
			t.Errorf("%s: row principals %q, not cut", r.RPC, r.RowPrincipals)
		}
		got = append(got, r.RPC)
	}
	if want := []string{"GetDrill", "ListDrills"}; !slices.Equal(got, want) {
		t.Errorf("access-log --principal acct-48213 lists %q, want %q", got, want)
	}
}

// A read by row id is recorded with whose row it read even when its
// caller has gone once it was answered (its context cancelled): the row
// is looked up again apart from the caller. A row whose principal cannot
// be read at all cuts the record, which --principal then lists for every
// customer.
func TestAReadByIDKeepsWhoseRowItReadOnceItsCallerHasGone(t *testing.T) {
	a, log, sc := recorderOnBolt(t)
	r := sc.Mint(pacttest.Spec{User: "acct-48213"})
	row, _, err := a.rows.AppendReceipt(context.Background(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
	if err != nil {
		t.Fatal(err)
	}
	const missing = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	info := &grpc.UnaryServerInfo{FullMethod: ledgerv1.LedgerService_GetEvidence_FullMethodName}
	for _, id := range []string{row.ID, missing} {
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), principalKey{}, principal{name: "support-key", roles: []string{"support"}}))
		h := func(context.Context, any) (any, error) {
			cancel() // the caller goes as it is answered
			return &ledgerv1.GetEvidenceResponse{RowId: id}, nil
		}
		if _, err := a.unary(ctx, &ledgerv1.GetEvidenceRequest{Id: id}, info, h); err != nil {
			t.Fatalf("GetEvidence %s: %v", id, err)
		}
	}
	page, err := log.List(context.Background(), ledger.AccessQuery{Limit: 10, Principal: "acct-48213", Before: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 2 {
		t.Fatalf("access-log --principal acct-48213 lists %+v, want both reads", page.Records)
	}
	if got := page.Records[0]; got.Row != row.ID || got.RowPrincipal != "acct-48213" || got.RowPrincipalsCut {
		t.Errorf("the read of acct-48213's row: row %s of %q (cut %v), want %s of acct-48213", got.Row, got.RowPrincipal, got.RowPrincipalsCut, row.ID)
	}
	if got := page.Records[1]; got.Row != missing || got.RowPrincipal != "" || !got.RowPrincipalsCut {
		t.Errorf("the read of a row not found: row %s of %q (cut %v), want cut", got.Row, got.RowPrincipal, got.RowPrincipalsCut)
	}
}
