package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// TestWritesWaitForTheClocksToAgree: ledgerd on S3 whose server's clock
// reads ten minutes later than the host's (as when the host's clock is
// ten minutes behind) records nothing: a receipt is answered UNAVAILABLE
// with the times and a retry delay, /readyz says why (to any caller: no
// error text) and stays 200 (every replica reads the same server's clock:
// were that one wrong, a 503 would take them all out of the load
// balancer, reads with them), the metrics say so; once the clocks agree
// the writer's retry is taken at once (a refused write asks for a new
// reading of the S3 server's clock).
func TestWritesWaitForTheClocksToAgree(t *testing.T) {
	var shift atomic.Int64
	shift.Store(int64(10 * time.Minute))
	proxy := s3test.DateShifted(t, s3srv.Endpoint, &shift)
	off := false
	e := newEnv(t, jose.ES256, withS3(s3test.Bucket()), func(c *config.Config) {
		c.Evidence.S3.Endpoint = proxy
		c.Provider.Enabled = &off
	})
	conn, err := grpc.NewClient(e.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ledgerv1.NewLedgerServiceClient(conn)
	ctx := authCtx(context.Background(), "writer")
	appendOne := func(target string) error {
		r := e.sc.Mint(pacttest.Spec{Target: target})
		_, err := client.AppendReceipt(ctx, &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}})
		return err
	}
	type clockBody struct {
		Clock, Status, ReadAt string
		OffSeconds            float64
	}
	type ready struct {
		Status string
		Clocks []clockBody
	}
	readyz := func() (int, ready) {
		var r ready
		code := e.call(t, "GET", "/readyz", "", nil, &r)
		return code, r
	}
	within(t, "the S3 server's clock read", func() bool { _, r := readyz(); return len(r.Clocks) == 1 && r.Clocks[0].ReadAt != "" })
	refused := appendOne("C-1")
	st := status.Convert(refused)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "behind the clock of the S3 evidence store") {
		t.Fatalf("a receipt at a clock ten minutes behind the S3 server's: %v; want UNAVAILABLE saying so", refused)
	}
	retry := false
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			retry = true
		}
	}
	if !retry {
		t.Errorf("the refusal carries no RetryInfo: %v", st.Details())
	}
	code, r := readyz()
	if code != http.StatusOK || r.Status != "ready" || len(r.Clocks) != 1 || !strings.Contains(r.Clocks[0].Status, "behind") || r.Clocks[0].OffSeconds > -590 {
		t.Fatalf("/readyz with the clock ten minutes behind: %d %+v; want 200 saying it is behind", code, r)
	}
	m := scrape(t, e)
	if m["pactledger_clock_off"] != 1 || m["pactledger_clock_refused_writes_total"] < 1 || m[`pactledger_clock_offset_seconds{clock="the S3 evidence store"}`] > -590 {
		t.Errorf("metrics with the clock behind: off %v, refused %v, offset %v", m["pactledger_clock_off"], m["pactledger_clock_refused_writes_total"],
			m[`pactledger_clock_offset_seconds{clock="the S3 evidence store"}`])
	}

	shift.Store(0)
	within(t, "the writer's retry taken once the clocks agree", func() bool { return appendOne("C-1") == nil })
	if code, r := readyz(); code != http.StatusOK || r.Clocks[0].Status != "ok" {
		t.Fatalf("/readyz with the clocks agreeing again: %d %+v", code, r)
	}
}

// TestTheAccessLogIsNotPrunedByAClockAhead: ledgerd whose clock reads 13
// months later than its S3 server's prunes nothing of the access log at
// start (a step of the host's clock is no licence to remove who read
// what), and says why in its log at ERROR.
func TestTheAccessLogIsNotPrunedByAClockAhead(t *testing.T) {
	var shift atomic.Int64
	shift.Store(int64(-396 * 24 * time.Hour))
	proxy := s3test.DateShifted(t, s3srv.Endpoint, &shift)
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	logs := &syncbuf.Buffer{}
	off := false
	cfg := testConfig(sc, t.TempDir())
	withS3(s3test.Bucket())(&cfg)
	cfg.Evidence.S3.Endpoint = proxy
	cfg.Provider.Enabled = &off
	e := &env{sc: sc, cfg: cfg, logw: logs}
	e.start(t)
	within(t, "a refused prune logged", func() bool { return strings.Contains(logs.String(), "access log: nothing pruned") })
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "access log: nothing pruned") && (!strings.Contains(l, `"level":"ERROR"`) || !strings.Contains(l, "ahead")) {
			t.Errorf("the refused prune's log line: %s", l)
		}
	}
}

// within polls ok until it holds, failing t after 30 s.
func within(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
