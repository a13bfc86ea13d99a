package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// profileMemRate is the heap sampling rate of the profiled load (the
// runtime's default); signing the corpus before it is not sampled.
const profileMemRate = 512 << 10

// clientLabels mark the load generator's goroutines in the CPU profile:
// `go tool pprof -tagignore side=client` leaves ledgerd's own work.
var clientLabels = pprof.Labels("side", "client")

// runProfiled runs ledgerd in this process (internal/server, configured as
// in the served phases: S3 evidence, the Merkle log, the signature cache)
// and posts the sessions corpus over gRPC (or REST, cfg.ProfileREST) with
// cfg.Concurrency in flight for cfg.Duration, recording a CPU profile
// (cfg.CPUProfile) and the heap allocations of that load (cfg.MemProfile). The client's goroutines carry
// clientLabels; its allocations are told apart by their stacks (the ones
// through internal/bench).
func runProfiled(ctx context.Context, sc *pacttest.Scenario, corpus []*ledgerv1.AppendReceiptRequest, work string, unit verifyUnit, cfg Config) error {
	w := cfg.Out
	s3, err := s3test.Start()
	if err != nil {
		return err
	}
	defer s3.Stop()
	d, err := startInProcess(ctx, filepath.Join(work, "profiled"), sc, s3)
	if err != nil {
		return err
	}
	defer d.stop()

	if cfg.MemProfile != "" {
		runtime.GC()
		runtime.MemProfileRate = profileMemRate
	}
	stopCPU, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return err
	}
	via := viaGRPC
	if cfg.ProfileREST {
		via = viaREST
	}
	how := string(via)
	var res *result
	pprof.Do(ctx, clientLabels, func(ctx context.Context) {
		if cfg.ProfileStream {
			how = scenario{via: viaGRPC, stream: true}.how()
			res, err = d.measured(func() (*result, error) { return d.driveStream(ctx, corpus, cfg.Concurrency, cfg.Duration) })
			return
		}
		if cfg.ProfileBatch > 0 {
			how = scenario{via: viaGRPC, batch: cfg.ProfileBatch}.how()
			res, err = d.measured(func() (*result, error) {
				return driveBatches(ctx, corpus, cfg.Concurrency, cfg.ProfileBatch, cfg.Duration, d.grpcAppendBatch())
			})
			return
		}
		res, err = d.measure(ctx, corpus, cfg.Concurrency, cfg.Duration, cfg.ProfileOffered, d.call(via, nil))
	})
	if perr := stopCPU(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if cfg.MemProfile != "" {
		if err := writeProfile(cfg.MemProfile, "allocs"); err != nil {
			return err
		}
	}
	load := fmt.Sprintf("%d in flight", cfg.Concurrency)
	if cfg.ProfileOffered > 0 {
		load = fmt.Sprintf("%d rows/s offered", cfg.ProfileOffered)
	}
	fmt.Fprintf(w, "\nprofiled: ledgerd in this process over %s, sessions corpus, %s for %s (load average %s): %.0f rows/s, p50 %s, p99 %s, errors %d\n",
		how, load, cfg.Duration, loadAvg(), res.rate, res.p(50), res.p(99), res.errors)
	fmt.Fprintf(w, "  process CPU (ledgerd and client together) %.2f cores = %s per row = %.2f verifications of %s\n",
		res.cpu, us(res.cpuPerRow()), unit.units(res.cpuPerRow().Seconds()), us(unit.median()))
	if cfg.CPUProfile != "" {
		b, err := readBudget(cfg.CPUProfile)
		if err != nil {
			return err
		}
		b.print(w, res.ok, unit)
		fmt.Fprintf(w, "  CPU profile: %s (ledgerd alone: go tool pprof -tagignore side=client)\n", cfg.CPUProfile)
	}
	if cfg.MemProfile != "" {
		fmt.Fprintf(w, "  allocations of the load: %s (ledgerd alone: go tool pprof -sample_index=alloc_space -ignore 'internal/bench' ...)\n", cfg.MemProfile)
	}
	return nil
}

// startInProcess starts ledgerd's server in this process with the served
// phases' configuration.
func startInProcess(ctx context.Context, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server) (*daemon, error) {
	cfg, err := ledgerdConfig(dataDir, sc, s3)
	if err != nil {
		return nil, err
	}
	// In process the server's own listeners say where it listens: ports
	// it picks itself cannot be taken between the pick and the listen (a
	// port freeAddr found free can be, by an outgoing connection).
	cfg.Listen.GRPC, cfg.Listen.HTTP = "127.0.0.1:0", "127.0.0.1:0"
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx) }()
	d := &daemon{pid: selfPid, ledger: srv.Ledger(), s3: s3, grpcAddr: srv.GRPCAddr(), httpAddr: srv.HTTPAddr(), shutdown: func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}}
	return d, d.connect(ctx)
}

// startCPUProfile starts a CPU profile into path ("" records none) and
// returns the function that stops and writes it.
func startCPUProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// writeProfile writes the named runtime profile to path.
func writeProfile(path, name string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return f.Close()
}

// runLedgerCeiling calls the ledger ledgerd runs, in this process and
// without the network: internal/server on a fresh data directory and
// bucket, configured as in the served phases (S3 evidence and its
// uploader, the Merkle log, its integrator and publications, the signature
// cache). What a served phase adds to it is the transport. It measures
// versitygw's CPU besides its own, as a served phase does.
func runLedgerCeiling(ctx context.Context, env *servedEnv, corpus []*ledgerv1.AppendReceiptRequest, cfg Config) (*result, error) {
	env.n++
	d, err := startInProcess(ctx, filepath.Join(env.work, "ceiling-served-"+strconv.Itoa(env.n)), env.sc, env.s3)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	s30, t0 := procCPU(env.s3.Pid()), time.Now()
	r, err := driveLedger(ctx, d.ledger, corpus, cfg)
	if err != nil {
		return nil, err
	}
	r.s3cpu = (procCPU(env.s3.Pid()) - s30) / time.Since(t0).Seconds()
	return r, nil
}

// ceiling is an in-process run of one corpus.
type ceiling struct {
	*result
	name     string
	asServed bool   // the ledger as ledgerd runs it, not the ledger alone
	load     string // load average when it ended
}

// what says what a ceiling runs; label says it in a few words.
func (c ceiling) what() string {
	if c.asServed {
		return "the ledger as ledgerd runs it: verify + durable bbolt commit, the Merkle log, the uploader to S3"
	}
	return "verify + durable bbolt commit"
}

func (c ceiling) label() string {
	if c.asServed {
		return "as ledgerd runs it"
	}
	return "verify + commit"
}

// printCostSummary prints every served scenario and ceiling in one table,
// in units of u.
func printCostSummary(w io.Writer, u verifyUnit, ceilings []ceiling, runs []*served, cfg Config) {
	fmt.Fprintf(w, "\nsummary: ledgerd CPU per verified durable row in P-256 verifications, each phase in the unit timed during it (the mean of its batches, the tenth at each end left out; the run's unit where too few were timed, the column before it then —), and in the run's unit (%s, the median of the measurements at its start and end); client on the same cores\n", us(u.median()))
	ratios := "as ledgerd runs it / verify + commit"
	if cfg.PairedCeilings {
		ratios = "as ledgerd runs it, just before / the same at the run's start / verify + commit at the run's start"
	}
	fmt.Fprintf(w, "| scenario | rows/s | CPU per row | one verification during it | verifications per row | in the run's unit | ratio to ceiling (%s) | p50 | p99 | cache hits | anon / file under load | anon / file at rest | load avg | heap allocations a row |\n", ratios)
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range ceilings {
		fmt.Fprintf(w, "| in process (%s), %s, %d in flight | %.0f | %s | %s | %.2f | %.2f | | %s | %s | | | | %s | |\n",
			c.label(), c.name, cfg.Concurrency, c.rate, us(c.cpuPerRow()), c.timedUnit(), c.units(u), u.units(c.cpuPerRow().Seconds()), c.p(50), c.p(99), c.load)
	}
	for _, s := range runs {
		load, ratio := fmt.Sprintf("%d in flight", cfg.Concurrency), s.ratios()
		if s.conc == 0 {
			load = fmt.Sprintf("%d rows/s offered", cfg.Offered)
		}
		hits := ""
		if t := s.hits + s.misses; t > 0 {
			hits = fmt.Sprintf("%.1f %%", 100*s.hits/t)
		}
		allocs := ""
		if n, ok := s.allocsPerRow(s.ok); ok {
			allocs = fmt.Sprintf("%.0f", n)
		}
		fmt.Fprintf(w, "| %s, %s, %s | %.0f | %s | %s | %.2f | %.2f | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s |\n",
			s.how(), s.name, load, s.rate, us(s.cpuPerRow()), s.timedUnit(), s.units(u), u.units(s.cpuPerRow().Seconds()), ratio, s.p(50), s.p(99), hits,
			mib(s.mem.anon), mib(s.mem.file), mib(s.atRest.anon), mib(s.atRest.file), s.load, allocs)
	}
}

// ratios is a served scenario's cell of the summary's ratio column: its
// rate over the ceiling as ledgerd runs it (with paired ceilings, the one
// run just before it, then the one at the run's start) and over the
// ledger's alone; "—" for a scenario without ceilings (an offered rate).
func (s *served) ratios() string {
	switch {
	case s.ceiling == nil || s.ceiling.rate <= 0 || s.bare <= 0:
		return "—"
	case s.paired && s.first > 0:
		return fmt.Sprintf("%.2f / %.2f / %.2f", s.rate/s.ceiling.rate, s.rate/s.first, s.rate/s.bare)
	default:
		return fmt.Sprintf("%.2f / %.2f", s.rate/s.ceiling.rate, s.rate/s.bare)
	}
}
