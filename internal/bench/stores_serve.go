package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The store comparison's serving side: ledgerd processes on one row store
// (bbolt, or a PostgreSQL database several of them share), S3 evidence,
// gRPC clients spread across them, CPU read from /proc. Kept apart from
// the rest of the benchmark so that it can change without this.

// storeDaemon is one ledgerd process of the store comparison.
type storeDaemon struct {
	cmd      *exec.Cmd
	httpAddr string
	conns    []*grpc.ClientConn
	exited   chan struct{} // closed when the process has exited
}

// storeServed is the ledgerd replicas of one run and their clients.
type storeServed struct {
	daemons []*storeDaemon
	clients []ledgerv1.LedgerServiceClient
}

// storeLedgerdConfig is the configuration of one replica: a data
// directory of its own, the row store given, S3 evidence in bucket, the
// Merkle log signed with the key file every replica shares, and no
// Provider.
func storeLedgerdConfig(dataDir string, store config.Store, sc *pacttest.Scenario, s3 *s3test.Server, bucket, logKey string) (config.Config, error) {
	off := false
	cfg := config.Default()
	cfg.DataDir = dataDir
	cfg.Store = store
	cfg.Audience = sc.Audience
	cfg.AllowInsecureLoopbackJWKS = true
	cfg.Provider.Enabled = &off
	cfg.MerkleLog.KeyFile = logKey
	cfg.Log.Level = "warn"
	cfg.APIKeys = []config.APIKey{{Name: "writer", SHA256: config.HashKey(writerKey), Roles: []string{"writer"}}, {Name: "auditor", SHA256: config.HashKey(readerKey), Roles: []string{"auditor"}}, {Name: "support", SHA256: config.HashKey(supportKey), Roles: []string{"support"}}}
	for _, b := range sc.Brands() {
		cfg.Brands = append(cfg.Brands, config.Brand{InterfaceURL: b.InterfaceURL, JWKSURI: b.JWKSURI, Issuer: b.Issuer})
	}
	for _, a := range sc.Agents() {
		cfg.Agents = append(cfg.Agents, config.Agent{Issuer: a.Issuer, JWKSURI: a.JWKSURI})
	}
	cfg.Evidence = config.Evidence{Type: "s3", S3: config.S3{Endpoint: s3.Endpoint, Bucket: bucket, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey, Insecure: true, CreateBucket: true}}
	var err error
	if cfg.Listen.GRPC, err = freeAddr(); err != nil {
		return cfg, err
	}
	cfg.Listen.HTTP, err = freeAddr()
	return cfg, err
}

// startStoreDaemon writes cfg into its data directory, starts ledgerd on
// it and waits until it is ready; errExited when ledgerd exits first.
func startStoreDaemon(ctx context.Context, bin string, cfg config.Config) (*storeDaemon, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.DataDir, "ledgerd.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	d := &storeDaemon{cmd: exec.CommandContext(ctx, bin, "--config", path), httpAddr: cfg.Listen.HTTP}
	d.cmd.Stderr = os.Stderr
	if d.exited, err = startWatched(d.cmd); err != nil {
		return nil, err
	}
	if err := awaitReady(d.httpAddr, d.exited, 5*time.Minute); err != nil { // opening a large bbolt file included
		d.stop()
		return nil, fmt.Errorf("%s store: %w", cfg.Store.Kind, err)
	}
	for range 4 {
		c, err := grpc.NewClient(cfg.Listen.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			d.stop()
			return nil, err
		}
		d.conns = append(d.conns, c)
	}
	return d, nil
}

// stop stops ledgerd gracefully (SIGINT), killing it after 60 s.
func (d *storeDaemon) stop() {
	for _, c := range d.conns {
		c.Close()
	}
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// newStoreServed gathers the daemons' clients, round-robin over all.
func newStoreServed(daemons []*storeDaemon) *storeServed {
	s := &storeServed{daemons: daemons}
	for i := range 4 {
		for _, d := range daemons {
			s.clients = append(s.clients, ledgerv1.NewLedgerServiceClient(d.conns[i]))
		}
	}
	return s
}

func (s *storeServed) stop() {
	var wg sync.WaitGroup
	for _, d := range s.daemons {
		wg.Go(d.stop)
	}
	wg.Wait()
}

// pids returns the daemons' process ids.
func (s *storeServed) pids() []int {
	var out []int
	for _, d := range s.daemons {
		out = append(out, d.cmd.Process.Pid)
	}
	return out
}

// storeLoad is the outcome of one load: acknowledged writes, errors,
// rate, latencies, and CPU seconds of ledgerd, PostgreSQL and the S3
// server over the load.
type storeLoad struct {
	ok, errors      int
	elapsed         time.Duration
	lat             []time.Duration
	ledgerdCPU      float64
	postgresCPU     float64
	postgresByKind  map[string]float64 // CPU seconds by kind of process
	s3CPU           float64
	firstErr        error
	corpusExhausted bool
}

func (r *storeLoad) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

// cpuPerRow returns CPU milliseconds per acknowledged row.
func (r *storeLoad) cpuPerRow(sec float64) float64 {
	if r.ok == 0 {
		return 0
	}
	return sec * 1000 / float64(r.ok)
}

// q returns the q-th percentile of the latencies.
func (r *storeLoad) q(q float64) time.Duration { return percentile(r.lat, q) }

// percentile returns the q-th percentile of ds (0 when empty).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*q/100)]
}

// post drives corpus through the replicas: closed loop with conc in
// flight when rate is 0, else open loop at rate per second (latency from
// each request's scheduled time). CPU is read from /proc for the
// daemons, the PostgreSQL server (pg: its postmaster's pid, 0 for none)
// and the S3 server.
func (s *storeServed) post(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc int, dur time.Duration, rate int, pg int, s3 *s3test.Server) *storeLoad {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+writerKey)
	var (
		next, rr atomic.Int64
		mu       sync.Mutex
		res      = &storeLoad{}
		wg       sync.WaitGroup
	)
	record := func(d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			res.errors++
			if res.firstErr == nil {
				res.firstErr = err
			}
			return
		}
		res.ok++
		res.lat = append(res.lat, d)
	}
	call := func(i int64, from time.Time) {
		_, err := s.clients[rr.Add(1)%int64(len(s.clients))].AppendReceipt(ctx, corpus[i])
		record(time.Since(from), err)
	}
	cpu0, pgKinds0, s30 := sumCPU(s.pids()), postgresCPUByKind(pg), procCPU(s3.Pid())
	start := time.Now()
	stopAt := start.Add(dur)
	if rate == 0 {
		for range conc {
			wg.Go(func() {
				for time.Now().Before(stopAt) && ctx.Err() == nil {
					i := next.Add(1) - 1
					if i >= int64(len(corpus)) {
						mu.Lock()
						res.corpusExhausted = true
						mu.Unlock()
						return
					}
					call(i, time.Now())
				}
			})
		}
	} else {
		interval := time.Second / time.Duration(rate)
		sem := make(chan struct{}, 2048)
		for i := int64(0); ; i++ {
			at := start.Add(time.Duration(i) * interval)
			if !at.Before(stopAt) || ctx.Err() != nil {
				break
			}
			if i >= int64(len(corpus)) {
				res.corpusExhausted = true
				break
			}
			time.Sleep(time.Until(at))
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				call(i, at)
			})
		}
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.ledgerdCPU = sumCPU(s.pids()) - cpu0
	res.postgresByKind = postgresCPUByKind(pg)
	for k, v := range res.postgresByKind {
		res.postgresByKind[k] = v - pgKinds0[k]
		res.postgresCPU += v - pgKinds0[k]
	}
	res.s3CPU = procCPU(s3.Pid()) - s30
	return res
}

func sumCPU(pids []int) float64 {
	var s float64
	for _, p := range pids {
		s += procCPU(p)
	}
	return s
}

// postgresCPUByKind returns the CPU seconds of a PostgreSQL server (nil
// for pid 0) by kind of process: "connections" (the backends serving
// clients), "exited" (children the postmaster reaped:
// autovacuum workers and closed connections), the postmaster itself, and
// each auxiliary process by its title (walwriter, checkpointer,
// autovacuum worker...).
func postgresCPUByKind(postmaster int) map[string]float64 {
	if postmaster == 0 {
		return nil
	}
	pm := procStat(postmaster)
	out := map[string]float64{"postmaster": ticks(pm, 11, 12), "exited": ticks(pm, 13, 14)}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(pid)
		if len(f) > 13 && f[1] == strconv.Itoa(postmaster) {
			out[postgresKind(pid)] += ticks(f, 11, 12)
		}
	}
	return out
}

// postgresKind names a PostgreSQL child by its process title
// ("postgres: CLUSTER: walwriter", "postgres: CLUSTER: USER DB HOST(PORT)
// STATE" for a connection).
func postgresKind(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	title := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	parts := strings.SplitN(title, ": ", 3)
	if len(parts) < 3 {
		return "other"
	}
	if strings.Contains(parts[2], "(") {
		return "connections"
	}
	return strings.TrimSpace(parts[2])
}
