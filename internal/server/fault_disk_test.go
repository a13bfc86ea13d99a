package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/smalldisk"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// TestFaultDiskFull: on a full disk a write answers RESOURCE_EXHAUSTED with
// RetryInfo and a message naming the row store's file, /readyz and the gRPC
// health service say not ready; once space is freed, ledgerd is ready and
// takes writes again without a restart.
func TestFaultDiskFull(t *testing.T) {
	disk := smalldisk.Mount(t, "16m")
	dataDir := filepath.Join(disk, "data")
	off := false
	e := newEnv(t, jose.ES256, withS3(s3test.Bucket()), func(c *config.Config) {
		c.DataDir = dataDir
		c.Provider.Enabled = &off
		c.Readiness.MinFreeDiskBytes = 2 << 20
	})
	conn, err := grpc.NewClient(e.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ledgerv1.NewLedgerServiceClient(conn)
	ctx := authCtx(context.Background(), "writer")
	n := 0
	appendOne := func() (*ledgerv1.AppendReceiptRequest, error) {
		n++
		r := e.sc.Mint(pacttest.Spec{Target: "D-" + itoa(n)})
		req := &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
		_, err := client.AppendReceipt(ctx, req)
		return req, err
	}
	if _, err := appendOne(); err != nil {
		t.Fatalf("write before the disk fills: %v", err)
	}
	if code := e.call(t, "GET", "/readyz", "", nil, nil); code != http.StatusOK {
		t.Fatalf("readyz before the disk fills = %d", code)
	}

	filler := smalldisk.Fill(t, disk)
	var r readyBody
	if code := e.call(t, "GET", "/readyz", "", nil, &r); code != http.StatusServiceUnavailable || r.Disk.Status != "low" || r.Status != "not ready" {
		t.Fatalf("readyz on a full disk = %d %+v, want 503 with the disk low", code, r)
	}
	if got := grpcServing(t, e.srv.GRPCAddr()); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health on a full disk: %v, want NOT_SERVING", got)
	}
	// bbolt reuses pages freed by earlier commits, so a few writes may still
	// fit; the ones that do not are refused as RESOURCE_EXHAUSTED.
	var refused *ledgerv1.AppendReceiptRequest
	for range 200 {
		req, err := appendOne()
		if err == nil {
			continue
		}
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("write on a full disk: %v, want RESOURCE_EXHAUSTED", err)
		}
		if !strings.Contains(st.Message(), filepath.Join(dataDir, "ledger.db")) || !strings.Contains(st.Message(), "no space") {
			t.Fatalf("message %q does not name the row store's file and the lack of space", st.Message())
		}
		var retry *errdetails.RetryInfo
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				retry = ri
			}
		}
		if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
			t.Fatalf("RESOURCE_EXHAUSTED without RetryInfo: %v", st.Details())
		}
		refused = req
		t.Logf("refused on a full disk after %d writes: %s", n, st.Message())
		break
	}
	if refused == nil {
		t.Fatal("200 writes on a full disk all succeeded")
	}

	// Space is freed: ready again and writes succeed, with no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	e.pollReady(t, "ready after space is freed", func(r readyBody) bool { return r.Status == "ready" })
	rep, err := client.AppendReceipt(ctx, refused)
	if err != nil || rep.GetOutcome() != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
		t.Fatalf("the refused write again after space was freed: %v %v", rep.GetOutcome(), err)
	}
	if _, err := appendOne(); err != nil {
		t.Fatalf("a new write after space was freed: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for grpcServing(t, e.srv.GRPCAddr()) != healthpb.HealthCheckResponse_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("gRPC health stayed NOT_SERVING after space was freed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
