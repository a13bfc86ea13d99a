package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func buildLedgerd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ledgerd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/pactledger/pactledger/cmd/ledgerd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build ledgerd: %v\n%s", err, out)
	}
	return bin
}

type proc struct {
	cmd      *exec.Cmd
	grpcAddr string
	httpAddr string
}

// startLedgerd starts ledgerd on grpcAddr and httpAddr and waits until it
// answers. When another process took one of the addresses since it was
// picked (a test's free port is free only until someone else binds it),
// it starts again on new ones: use the returned proc's addresses.
func startLedgerd(t *testing.T, bin, cfgPath, grpcAddr, httpAddr string) *proc {
	t.Helper()
	for attempt := 0; ; attempt++ {
		p, taken := tryLedgerd(t, bin, cfgPath, grpcAddr, httpAddr)
		if !taken || attempt == 2 {
			return p
		}
		t.Logf("ledgerd: an address was taken by another process; starting on new ones")
		grpcAddr, httpAddr = freeAddr(t), freeAddr(t)
	}
}

// tryLedgerd starts ledgerd and waits until it answers, or reports that
// it could not bind its addresses.
func tryLedgerd(t *testing.T, bin, cfgPath, grpcAddr, httpAddr string) (*proc, bool) {
	t.Helper()
	cmd := exec.Command(bin, "--config", cfgPath, "--grpc-addr", grpcAddr, "--http-addr", httpAddr)
	logf, err := os.OpenFile(cfgPath+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	start, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, grpcAddr: grpcAddr, httpAddr: httpAddr}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			return p, false
		}
		if log, _ := os.ReadFile(cfgPath + ".log"); int64(len(log)) > start && bytes.Contains(log[start:], []byte("address already in use")) {
			_ = cmd.Wait()
			return nil, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(cfgPath + ".log")
	t.Fatalf("ledgerd did not start: %s", log)
	return nil, false
}

func authCtx(ctx context.Context, role string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+keys[role])
}

// TestCrashLosesNoAcknowledgedRow kills ledgerd with SIGKILL while writers
// post receipts; after a restart every acknowledged row is there with its
// evidence, verifies the same, and the outbox drains into S3.
// crashSetup builds ledgerd and writes its configuration (S3 evidence in a
// fresh bucket, then edit) for a kill -9 test; it returns the binary, the
// scenario, the configuration and its file.
func crashSetup(t *testing.T, edit func(*config.Config)) (bin string, sc *pacttest.Scenario, cfg config.Config, cfgPath string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs ledgerd")
	}
	bin = buildLedgerd(t)
	sc = pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	cfg = testConfig(sc, t.TempDir())
	withS3(s3test.Bucket())(&cfg)
	if edit != nil {
		edit(&cfg)
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath = filepath.Join(t.TempDir(), "ledgerd.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return bin, sc, cfg, cfgPath
}

// corpus pre-signs n receipts (targets prefix-0…) so that writers only post.
func corpus(sc *pacttest.Scenario, n int, prefix string) []*ledgerv1.AppendReceiptRequest {
	out := make([]*ledgerv1.AppendReceiptRequest, n)
	for i := range out {
		r := sc.Mint(pacttest.Spec{Target: prefix + itoa(i)})
		out[i] = &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
	}
	return out
}

// postCorpus posts corpus[from:to] with 8 writers until the server dies,
// calling onAck (when set) for each acknowledged reply; it returns the
// count of acknowledgements and a func that waits for the writers.
func postCorpus(ctx context.Context, client ledgerv1.LedgerServiceClient, corpus []*ledgerv1.AppendReceiptRequest, from, to int, onAck func(*ledgerv1.AppendReceiptResponse)) (*atomic.Int64, func()) {
	var acked, next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(to) {
					return
				}
				rep, err := client.AppendReceipt(ctx, corpus[i])
				if err != nil {
					return // the server died: never acknowledged
				}
				if onAck != nil {
					onAck(rep)
				}
				acked.Add(1)
			}
		}()
	}
	return &acked, wg.Wait
}

// waitAcked polls until n writes are acknowledged or deadline passes.
func waitAcked(acked *atomic.Int64, n int64, deadline time.Time) {
	for acked.Load() < n && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

func TestCrashLosesNoAcknowledgedRow(t *testing.T) {
	bin, sc, _, cfgPath := crashSetup(t, nil)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	p := startLedgerd(t, bin, cfgPath, grpcAddr, httpAddr)

	// Pre-sign a corpus so the writers only post.
	const n = 3000
	corpus := make([]*ledgerv1.AppendReceiptRequest, n)
	for i := range corpus {
		r := sc.Mint(pacttest.Spec{Target: "C-" + itoa(i), GrantID: "g-" + itoa(i%50)})
		corpus[i] = &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
	}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ledgerv1.NewLedgerServiceClient(conn)

	var (
		mu    sync.Mutex
		acked = map[string]string{} // row id -> receipt JWS
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	ctx := authCtx(context.Background(), "writer")
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				rep, err := client.AppendReceipt(ctx, corpus[i])
				if err != nil {
					return // the server died: this write was never acknowledged
				}
				mu.Lock()
				acked[rep.GetRow().GetId()] = corpus[i].GetReceiptJws()
				mu.Unlock()
			}
		}()
	}
	// Kill once a good number of writes were acknowledged, mid-stream.
	for {
		mu.Lock()
		got := len(acked)
		mu.Unlock()
		if got >= 400 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	wg.Wait()
	t.Logf("acknowledged before SIGKILL: %d of %d", len(acked), n)

	p = startLedgerd(t, bin, cfgPath, grpcAddr, httpAddr)
	conn2, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	client = ledgerv1.NewLedgerServiceClient(conn2)
	rctx := authCtx(context.Background(), "auditor")
	for id, jws := range acked {
		row, err := client.GetRow(rctx, &ledgerv1.GetRowRequest{Id: id})
		if err != nil {
			t.Fatalf("acknowledged row %s lost: %v", id, err)
		}
		if row.GetRow().GetStatus() != ledgerv1.RowStatus_ROW_STATUS_AUTHORIZED {
			t.Fatalf("row %s status %v", id, row.GetRow().GetStatus())
		}
		ev, err := client.GetEvidence(rctx, &ledgerv1.GetEvidenceRequest{Id: id})
		if err != nil || ev.GetReceiptJws() != jws || ev.GetEvidenceSha256() != row.GetRow().GetEvidenceSha256() {
			t.Fatalf("evidence of %s incomplete: %v", id, err)
		}
	}
	// The outbox drains into S3 after the restart.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + p.httpAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		var ready struct{ OutboxDepth int }
		_ = json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		if ready.OutboxDepth == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox still holds %d objects", ready.OutboxDepth)
		}
		time.Sleep(100 * time.Millisecond)
	}
	i := 0
	for id := range acked {
		if i++; i > 50 {
			break
		}
		ev, err := client.GetEvidence(rctx, &ledgerv1.GetEvidenceRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ev.GetObjects() {
			if !o.GetUploaded() || o.GetVersionId() == "" {
				t.Fatalf("object %s not in S3 after drain: %+v", o.GetKey(), o)
			}
		}
		v, err := client.VerifyRow(rctx, &ledgerv1.VerifyRowRequest{Id: id})
		if err != nil || !v.GetSame() {
			t.Fatalf("verify %s after crash: %v %s", id, err, v.GetDifferences())
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
