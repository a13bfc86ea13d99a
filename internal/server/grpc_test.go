package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func dial(t *testing.T, e *env) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(e.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestGRPCRolesAndHealth(t *testing.T) {
	e := newEnv(t, jose.ES256)
	conn := dial(t, e)
	c := ledgerv1.NewLedgerServiceClient(conn)
	ctx := context.Background()

	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a key: %v %v", h, err)
	}
	r := e.sc.Mint(pacttest.Spec{})
	req := &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
		Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
	if _, err := c.AppendReceipt(ctx, req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("append without a key: %v", err)
	}
	rep, err := c.AppendReceipt(authCtx(ctx, "writer"), req)
	if err != nil || rep.GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
		t.Fatalf("append as writer: %v", err)
	}
	if _, err := c.GetRow(authCtx(ctx, "writer"), &ledgerv1.GetRowRequest{Id: rep.GetRow().GetId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("writer reading: %v", err)
	}
	if _, err := c.AppendDisputeEvent(authCtx(ctx, "auditor"), &ledgerv1.AppendDisputeEventRequest{Id: rep.GetRow().GetId(), Status: ledgerv1.DisputeStatus_DISPUTE_STATUS_OPEN}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("auditor disputing: %v", err)
	}
	if _, err := c.GetRow(authCtx(ctx, "auditor"), &ledgerv1.GetRowRequest{Id: rep.GetRow().GetId()}); err != nil {
		t.Fatalf("auditor reading: %v", err)
	}
}

// TestGracefulShutdownFinishesInFlightWrites stops the server while writers
// post: every write either succeeded and is stored, or failed as
// unavailable; none fails half-way.
func TestGracefulShutdownFinishesInFlightWrites(t *testing.T) {
	e := newEnv(t, jose.ES256)
	conn := dial(t, e)
	c := ledgerv1.NewLedgerServiceClient(conn)
	ctx := authCtx(context.Background(), "writer")
	var reqs []*ledgerv1.AppendReceiptRequest
	for i := range 400 {
		r := e.sc.Mint(pacttest.Spec{Target: "G-" + itoa(i)})
		reqs = append(reqs, &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
	}
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
		next  = make(chan int, len(reqs))
	)
	for i := range reqs {
		next <- i
	}
	close(next)
	started := make(chan struct{})
	var once sync.Once
	const before = 40 // acknowledged writes before the stop
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rep, err := c.AppendReceipt(ctx, reqs[i])
				if err != nil {
					if code := status.Code(err); code != codes.Unavailable && code != codes.Canceled {
						t.Errorf("write failed with %v during shutdown", err)
					}
					continue
				}
				mu.Lock()
				acked = append(acked, rep.GetRow().GetId())
				if len(acked) == before {
					once.Do(func() { close(started) })
				}
				mu.Unlock()
			}
		}()
	}
	<-started
	e.stop()
	wg.Wait()
	t.Logf("%d of %d writes acknowledged around the stop", len(acked), len(reqs))
	restartHolds(t, e, acked)
}

// restartHolds starts e again on its data directory and checks that every
// row of ids is there.
func restartHolds(t *testing.T, e *env, ids []string) {
	t.Helper()
	e.start(t)
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	for _, id := range ids {
		if _, err := c.GetRow(authCtx(context.Background(), "auditor"), &ledgerv1.GetRowRequest{Id: id}); err != nil {
			t.Fatalf("acknowledged row %s missing after the shutdown and a restart: %v", id, err)
		}
	}
}

// A brand JWKS endpoint that answers garbage, a set with no usable key or
// an oversized body, with nothing cached, leaves the signature undecided:
// 503 with RetryInfo and nothing recorded, never an UNAUTHORIZED row that
// would stand for good.
func TestRESTHostileBrandJWKSIsUndecided(t *testing.T) {
	e := newEnv(t, jose.ES256)
	for _, body := range []string{"<html>", `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, `{"keys":[` + string(make([]byte, 70000)) + `]}`} {
		e.sc.Brand.JWKS.SetRaw([]byte(body))
		var rep map[string]any
		code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{})), &rep)
		raw, _ := json.Marshal(rep)
		if code != http.StatusServiceUnavailable || !strings.Contains(string(raw), "RetryInfo") {
			t.Fatalf("JWKS %.20q: %d %s", body, code, raw)
		}
	}
	var list struct{ Rows []Row }
	if code := e.call(t, "GET", "/v1/rows?principal=acct-48213", "support", nil, &list); code != http.StatusOK || len(list.Rows) != 0 {
		t.Fatalf("rows recorded while the brand's keys were unusable: %d %+v", code, list.Rows)
	}
}

// TestShutdownWaitsForAWriteInFlight stops the server while a write is
// inside it (waiting on a slow JWKS): the write completes and is stored.
func TestShutdownWaitsForAWriteInFlight(t *testing.T) {
	e := newEnv(t, jose.ES256)
	e.sc.Brand.JWKS.SetDelay(time.Second)
	before := e.sc.Brand.JWKS.Requests()
	c := ledgerv1.NewLedgerServiceClient(dial(t, e))
	r := e.sc.Mint(pacttest.Spec{})
	type result struct {
		rep *ledgerv1.AppendReceiptResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := c.AppendReceipt(authCtx(context.Background(), "writer"), &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
		done <- result{rep, err}
	}()
	// The write is inside the server once it asks for the brand's keys.
	deadline := time.Now().Add(10 * time.Second)
	for e.sc.Brand.JWKS.Requests() == before {
		if time.Now().After(deadline) {
			t.Fatal("the write never reached the key fetch")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.stop()
	res := <-done
	if res.err != nil {
		t.Fatalf("the in-flight write failed on shutdown: %v", res.err)
	}
	if res.rep.GetRow().GetStatus() != ledgerv1.RowStatus_ROW_STATUS_AUTHORIZED {
		t.Fatalf("status %v", res.rep.GetRow().GetStatus())
	}
	e.sc.Brand.JWKS.SetDelay(0)
	e.start(t)
	if _, err := ledgerv1.NewLedgerServiceClient(dial(t, e)).GetRow(authCtx(context.Background(), "auditor"), &ledgerv1.GetRowRequest{Id: res.rep.GetRow().GetId()}); err != nil {
		t.Fatalf("row missing after restart: %v", err)
	}
}
