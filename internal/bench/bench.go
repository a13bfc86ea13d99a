// Package bench measures ledgerd under load: a real ledgerd process on bbolt
// with S3 evidence (versitygw), gRPC clients posting a pre-signed corpus,
// and in the same run the in-process ceiling (verify + durable commit, no
// network) that the served figures are compared with. The Merkle log's
// figures come from the same run: write throughput with the log on against
// off, the time from an acknowledged write to a signed checkpoint that
// includes it, proof serving at a large tree, and tile bytes per row.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// Config sets the benchmark's size.
type Config struct {
	Duration    time.Duration // sustained-load phase
	Concurrency int           // client requests in flight
	Offered     int           // rows/s of the latency phase
	OfferedFor  time.Duration
	ListRows    int // rows stored for the read-side phase; 0 skips it
	ListQueries int
	Drills      int // dispute drills to time in the read-side phase
	// LogPairs is how many pairs of in-process runs, the Merkle log off
	// and on, compare write throughput (0 skips them); LogRunFor is each
	// run's length.
	LogPairs  int
	LogRunFor time.Duration
	// LogLeaves is the size of the tree the proof phase builds (0 skips
	// it); ProofQueries the proofs it times.
	LogLeaves    int
	ProofQueries int
	Out          io.Writer
	Store        string // "postgres": compare the row stores instead (stores.go)
}

const writerKey, readerKey, supportKey = "bench-writer", "bench-auditor", "bench-support"

// Run runs every phase and prints the figures.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Store == "postgres" {
		return runStores(ctx, cfg)
	}
	w := cfg.Out
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version())
	work, err := os.MkdirTemp("", "pactledger-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()

	// Enough receipts for the sustained phase at up to 4,500 rows/s and the
	// offered-rate phase; the ceiling reuses them on a store of its own.
	n := int(max(cfg.Duration, cfg.LogRunFor).Seconds()*4500 + cfg.OfferedFor.Seconds()*float64(cfg.Offered))
	fmt.Fprintf(w, "signing a corpus of %d ES256 receipts with request JWTs and delegation tokens (not measured)...\n", n)
	corpus := makeCorpus(sc, n)

	// Phase 1: the in-process ceiling.
	ceiling, err := runCeiling(ctx, sc, corpus, work, cfg)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	fmt.Fprintf(w, "\nin-process ceiling (verify + durable bbolt commit, %d in flight): %.0f rows/s, p50 %s, p99 %s\n",
		cfg.Concurrency, ceiling.rate, ceiling.p(50), ceiling.p(99))
	if cfg.LogPairs > 0 {
		runs, err := runLogThroughput(ctx, sc, corpus, work, cfg)
		if err != nil {
			return fmt.Errorf("log on/off: %w", err)
		}
		printLogThroughput(cfg, runs)
	}

	// Phase 2: a real ledgerd with S3 evidence.
	s3, err := s3test.Start()
	if err != nil {
		return err
	}
	defer s3.Stop()
	bin := filepath.Join(work, "ledgerd")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ledgerd").CombinedOutput(); err != nil {
		return fmt.Errorf("build ledgerd: %v: %s", err, out)
	}
	d, err := startLedgerd(ctx, bin, filepath.Join(work, "served"), sc, s3)
	if err != nil {
		return err
	}
	defer d.stop()
	served, err := d.load(ctx, corpus, cfg.Concurrency, cfg.Duration, 0, nil)
	if err != nil {
		return err
	}
	depth := d.outboxDepth()
	fmt.Fprintf(w, "\nledgerd over gRPC, S3 evidence, %d in flight for %s:\n", cfg.Concurrency, cfg.Duration)
	fmt.Fprintf(w, "  %.0f verified durable rows/s (%d rows), p50 %s, p99 %s, errors %d\n", served.rate, served.ok, served.p(50), served.p(99), served.errors)
	fmt.Fprintf(w, "  ledgerd CPU %.2f cores, RSS %s (peak %s); versitygw CPU %.2f cores\n", served.cpu, mib(served.rss), mib(served.hwm), served.s3cpu)
	fmt.Fprintf(w, "  outbox depth at the end: %d objects (%.2f s of writes)\n", depth, float64(depth)/max(served.rate, 1))
	fmt.Fprintf(w, "  ratio to the in-process ceiling: %.2f\n", served.rate/ceiling.rate)
	drain := d.waitDrained(2 * time.Minute)
	fmt.Fprintf(w, "  outbox drained %s after the load stopped\n", drain)

	// Phase 3: latency at an offered rate, and the time from each
	// acknowledged write to the first signed checkpoint that includes it
	// (the integrator runs every 500 ms, ledgerd's default).
	var (
		acksMu sync.Mutex
		acks   []ack
	)
	watch := d.watchCheckpoints(ctx, 5*time.Millisecond)
	offered, err := d.load(ctx, corpus[served.ok+served.errors:], 0, cfg.OfferedFor, cfg.Offered, func(id string) {
		at := time.Now()
		acksMu.Lock()
		acks = append(acks, ack{id: id, at: at})
		acksMu.Unlock()
	})
	if err != nil {
		watch()
		return err
	}
	fmt.Fprintf(w, "\nledgerd at %d rows/s offered for %s: %.0f rows/s done, p50 %s, p99 %s, errors %d\n",
		cfg.Offered, cfg.OfferedFor, offered.rate, offered.p(50), offered.p(99), offered.errors)
	incl, err := d.inclusion(ctx, acks, watch)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  acknowledged to included in a signed checkpoint (GetCheckpoint polled every 5 ms): p50 %s, p99 %s, max %s (%d rows, %d not matched)\n",
		incl.p(50), incl.p(99), incl.p(100), incl.ok, incl.errors)
	d.stop()

	if cfg.ListRows > 0 {
		if err := runReadSide(ctx, bin, filepath.Join(work, "read"), sc, s3, cfg); err != nil {
			return err
		}
	}
	if cfg.LogLeaves > 0 {
		if err := runProofs(ctx, bin, filepath.Join(work, "proofs"), sc, s3, corpus[0], cfg); err != nil {
			return fmt.Errorf("proofs: %w", err)
		}
	}
	return nil
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func makeCorpus(sc *pacttest.Scenario, n int) []*ledgerv1.AppendReceiptRequest {
	out := make([]*ledgerv1.AppendReceiptRequest, n)
	var wg sync.WaitGroup
	workers := runtime.NumCPU()
	base := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	for wi := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := wi; i < n; i += workers {
				r := sc.Mint(pacttest.Spec{Target: "B-" + strconv.Itoa(i), User: "acct-" + strconv.Itoa(i%5000), GrantID: "a2agrant_" + strconv.Itoa(i%5000), At: base.Add(time.Duration(i) * time.Millisecond)})
				out[i] = &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
					Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
			}
		}()
	}
	wg.Wait()
	return out
}

type result struct {
	ok, errors int
	rate       float64
	lat        []time.Duration
	cpu, s3cpu float64
	rss, hwm   int64
}

func (r *result) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	i := int(float64(len(r.lat)-1) * q / 100)
	return r.lat[i].Round(10 * time.Microsecond)
}

func runCeiling(ctx context.Context, sc *pacttest.Scenario, corpus []*ledgerv1.AppendReceiptRequest, work string, cfg Config) (*result, error) {
	dir := filepath.Join(work, "ceiling")
	store, err := bolt.Open(filepath.Join(dir+".db"), bolt.Config{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	objects, err := localdir.Open(dir)
	if err != nil {
		return nil, err
	}
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		return nil, err
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	l, err := ledger.New(store, objects, v, reg, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	return drive(ctx, corpus, cfg.Concurrency, cfg.Duration, 0, func(ctx context.Context, req *ledgerv1.AppendReceiptRequest) error {
		a := req.GetActions()[0]
		_, _, err := l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: req.GetReceiptJws(), RequestJWT: req.GetRequestJwt(), DelegationToken: req.GetDelegationToken(),
			Actions: []verifier.Action{{Tool: a.GetTool(), Target: a.GetTarget(), ArgsJSON: a.GetArgsJson()}}})
		return err
	})
}

// drive sends corpus entries through call: closed loop with conc in flight
// when rate is 0, else open loop at rate per second (latency counted from
// each request's scheduled time).
func drive(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc int, dur time.Duration, rate int, call func(context.Context, *ledgerv1.AppendReceiptRequest) error) (*result, error) {
	var (
		next   atomic.Int64
		okN    atomic.Int64
		errN   atomic.Int64
		mu     sync.Mutex
		lat    []time.Duration
		wg     sync.WaitGroup
		start  = time.Now()
		stopAt = start.Add(dur)
	)
	record := func(d time.Duration, err error) {
		if err != nil {
			errN.Add(1)
			return
		}
		okN.Add(1)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
	}
	if rate == 0 {
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stopAt) {
					i := next.Add(1) - 1
					if int(i) >= len(corpus) {
						return
					}
					t0 := time.Now()
					err := call(ctx, corpus[i])
					record(time.Since(t0), err)
				}
			}()
		}
	} else {
		interval := time.Second / time.Duration(rate)
		sem := make(chan struct{}, 1024)
		for i := 0; ; i++ {
			at := start.Add(time.Duration(i) * interval)
			if !at.Before(stopAt) || i >= len(corpus) {
				break
			}
			time.Sleep(time.Until(at))
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				err := call(ctx, corpus[i])
				record(time.Since(at), err)
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	return &result{ok: int(okN.Load()), errors: int(errN.Load()), rate: float64(okN.Load()) / elapsed.Seconds(), lat: lat}, nil
}

type daemon struct {
	cmd      *exec.Cmd
	s3       *s3test.Server
	grpcAddr string
	httpAddr string
	conns    []*grpc.ClientConn
	once     sync.Once
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startLedgerd(ctx context.Context, bin, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server) (*daemon, error) {
	return startLedgerdOn(ctx, bin, dataDir, sc, s3)
}

func startLedgerdOn(ctx context.Context, bin, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server) (*daemon, error) {
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	cfg.APIKeys = []config.APIKey{{Name: "writer", SHA256: config.HashKey(writerKey), Roles: []string{"writer"}}, {Name: "auditor", SHA256: config.HashKey(readerKey), Roles: []string{"auditor"}}, {Name: "support", SHA256: config.HashKey(supportKey), Roles: []string{"support"}}}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	cfg.Evidence = config.Evidence{Type: "s3", S3: config.S3{Endpoint: s3.Endpoint, Bucket: s3test.Bucket(), AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Insecure: true, CreateBucket: true}}
	cfg.Log.Level = "warn"
	cfg.Provider.Listen = "127.0.0.1:0"
	var err error
	if cfg.Listen.GRPC, err = freeAddr(); err != nil {
		return nil, err
	}
	if cfg.Listen.HTTP, err = freeAddr(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, "ledgerd.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "--config", path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, s3: s3, grpcAddr: cfg.Listen.GRPC, httpAddr: cfg.Listen.HTTP}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + d.httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("ledgerd did not become ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 4 {
		c, err := grpc.NewClient(d.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		d.conns = append(d.conns, c)
	}
	return d, nil
}

func (d *daemon) stop() {
	d.once.Do(func() {
		for _, c := range d.conns {
			c.Close()
		}
		_ = d.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
		}
	})
}

// load posts corpus entries to ledgerd (see drive); onAck, when set, is
// told the row id of each acknowledged write as it arrives.
func (d *daemon) load(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc int, dur time.Duration, rate int, onAck func(id string)) (*result, error) {
	var rr atomic.Int64
	clients := make([]ledgerv1.LedgerServiceClient, len(d.conns))
	for i, c := range d.conns {
		clients[i] = ledgerv1.NewLedgerServiceClient(c)
	}
	wctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+writerKey)
	cpu0, s30 := procCPU(d.cmd.Process.Pid), procCPU(d.s3Pid())
	t0 := time.Now()
	res, err := drive(wctx, corpus, conc, dur, rate, func(ctx context.Context, req *ledgerv1.AppendReceiptRequest) error {
		rep, err := clients[rr.Add(1)%int64(len(clients))].AppendReceipt(ctx, req)
		if err == nil && onAck != nil {
			onAck(rep.GetRow().GetId())
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	el := time.Since(t0).Seconds()
	res.cpu = (procCPU(d.cmd.Process.Pid) - cpu0) / el
	res.s3cpu = (procCPU(d.s3Pid()) - s30) / el
	res.rss, res.hwm = procMem(d.cmd.Process.Pid)
	return res, nil
}

func (d *daemon) s3Pid() int { return d.s3.Pid() }

func (d *daemon) outboxDepth() int {
	resp, err := http.Get("http://" + d.httpAddr + "/readyz")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var r struct{ OutboxDepth int }
	if json.NewDecoder(resp.Body).Decode(&r) != nil {
		return -1
	}
	return r.OutboxDepth
}

func (d *daemon) waitDrained(limit time.Duration) time.Duration {
	t0 := time.Now()
	for time.Since(t0) < limit {
		if d.outboxDepth() == 0 {
			return time.Since(t0).Round(10 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1
}

// procCPU returns user+system CPU seconds of pid from /proc.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// procMem returns the current and peak resident set size of pid.
func procMem(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			hwm = v << 10
		}
	}
	return rss, hwm
}
