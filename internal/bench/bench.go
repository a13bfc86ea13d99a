// Package bench measures ledgerd under load: a real ledgerd process on bbolt
// with S3 evidence (versitygw), gRPC clients posting a pre-signed corpus,
// and in the same run the in-process ceilings that the served figures are
// compared with: the ledger alone (verify + durable commit), and the ledger
// as ledgerd runs it, called without the network. The Merkle log's
// figures come from the same run: write throughput with the log on against
// off, the time from an acknowledged write to a signed checkpoint that
// includes it, proof serving at a large tree, and tile bytes per row.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
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
	// RestFor, when set, leaves ledgerd idle this long after each served
	// scenario and reads its memory again.
	RestFor     time.Duration
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
	// SessionTurns is how many rows share one delegation token in the
	// sessions corpus; Sessions how many sessions take turns at once.
	SessionTurns int
	Sessions     int
	// VerifySamples is how many P-256 verifications are timed for the unit.
	VerifySamples int
	// GrowthSteps are the sizes, in rows, the growth run grows one ledger
	// through (none skips it); at each it serves for GrowthWindow and
	// times GrowthQueries ListRows and GrowthDrills dispute drills.
	GrowthSteps   []int
	GrowthWindow  time.Duration
	GrowthQueries int
	GrowthDrills  int
	// GrowthPairs: after the last step, windows at its size and on an
	// empty ledger alternate, this many of each (the last step's own
	// window is the first at its size), and their medians are compared.
	GrowthPairs int
	// DensityRows is how many real rows of each retention class the
	// density phase records (0 skips it).
	DensityRows int
	// DiskProbe, in bytes, runs the disk probe (disk.go) over a scratch
	// file of that size; 0 skips it.
	DiskProbe int64
	// LedgerdEnv is added to the environment of every served ledgerd
	// (such as GOGC=200), to measure a setting against the default.
	LedgerdEnv []string
	// SkipREST leaves out the REST scenarios; Offered 0 leaves out the
	// offered-rate phases.
	SkipREST bool
	// CPUProfile and MemProfile, when set, run the profiled phase alone and
	// write its CPU and heap profiles there.
	CPUProfile string
	MemProfile string
	// ProfileREST posts the profiled phase's load through the REST
	// gateway instead of gRPC.
	ProfileREST bool
	// ClientCPUProfile, when set, writes a CPU profile of this process,
	// the load generator, over each served scenario's phase (the growth
	// run's windows left out): ClientCPUProfile, a dash, the phase's name
	// as a file name, and ".pb". It does not take the run to the profiled
	// phase alone.
	ClientCPUProfile string
	// ProfileOffered, above zero, sends the profiled phase's load at that
	// many rows a second (open loop) instead of Concurrency in flight.
	ProfileOffered int
	// Batch is how many receipts one AppendReceipts call carries in the
	// batched gRPC scenarios (Concurrency receipts in flight, in
	// Concurrency/Batch calls); 0 leaves them out.
	Batch int
	// ProfileBatch, above zero, posts the profiled phase's load in
	// AppendReceipts calls of that many receipts.
	ProfileBatch int
	// Stream adds the streamed gRPC scenarios: Concurrency receipts in
	// flight on AppendReceiptStream, a stream on each connection.
	Stream bool
	// ProfileStream posts the profiled phase's load on AppendReceiptStream.
	ProfileStream bool
	// RowView is the view every posted receipt asks its answer in
	// (ROW_VIEW_UNSPECIFIED: the whole row).
	RowView ledgerv1.RowView
	// PairedCeilings runs the in-process ceiling (the ledger as ledgerd
	// runs it) on a closed-loop served scenario's corpus again just before
	// that scenario, so that its ratio compares two phases seconds apart
	// instead of minutes: on a noisy machine the rate drifts between.
	PairedCeilings bool
	Out            io.Writer
	Store          string // "postgres": compare the row stores instead (stores.go)
}

const writerKey, readerKey, supportKey = "bench-writer", "bench-auditor", "bench-support"

// Run runs every phase and prints the figures. With a CPU or heap profile
// asked for, it runs the profiled phase alone (see runProfiled).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.checkBatches(); err != nil {
		return err
	}
	if cfg.Store == "postgres" {
		return runStores(ctx, cfg)
	}
	w := cfg.Out
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s; load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), loadAvg())
	work, err := os.MkdirTemp("", "pactledger-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	if cfg.MemProfile != "" {
		// Signing the corpus is not part of the profile (runProfiled
		// samples again from its load).
		runtime.MemProfileRate = 0
	}

	unit, err := measureVerification(cfg.VerifySamples)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "one P-256 verification (crypto/ecdsa, the unit of the costs below): %s, load average %s\n", unit, loadAvg())
	if cfg.CPUProfile != "" || cfg.MemProfile != "" {
		n := int(cfg.Duration.Seconds() * 4500)
		fmt.Fprintf(w, "signing %d ES256 receipts in sessions of %d turns (not measured)...\n", n, cfg.SessionTurns)
		return runProfiled(ctx, sc, cfg.viewed(makeSessionCorpus(sc, n, cfg.SessionTurns, cfg.Sessions)), work, unit, cfg)
	}
	if cfg.DensityRows > 0 {
		if err := runDensity(ctx, sc, work, cfg); err != nil {
			return err
		}
	}
	if cfg.DiskProbe > 0 {
		if err := runDiskProbe(w, work, cfg.DiskProbe); err != nil {
			return err
		}
	}
	if cfg.Duration <= 0 && len(cfg.GrowthSteps) == 0 && cfg.ListRows <= 0 && cfg.LogLeaves <= 0 {
		return nil
	}
	s3, err := s3test.Start()
	if err != nil {
		return err
	}
	defer s3.Stop()
	bin := filepath.Join(work, "ledgerd")
	if err := buildLedgerd(ctx, w, bin); err != nil {
		return err
	}
	env := &servedEnv{bin: bin, work: work, sc: sc, s3: s3, env: cfg.LedgerdEnv, clientProfile: cfg.ClientCPUProfile, restFor: cfg.RestFor}
	if len(cfg.LedgerdEnv) > 0 {
		fmt.Fprintf(w, "\nledgerd runs with %s added to its environment\n", strings.Join(cfg.LedgerdEnv, " "))
	}
	if cfg.Duration > 0 {
		if err := runCost(ctx, env, unit, cfg); err != nil {
			return err
		}
	}
	if len(cfg.GrowthSteps) > 0 {
		g := int(cfg.GrowthWindow.Seconds()*4500) * growthSlices(cfg)
		fmt.Fprintf(w, "\nsigning %d receipts for the growth run's windows (not measured)...\n", g)
		if err := runGrowth(ctx, bin, work, sc, s3, makeSessionCorpus(sc, g, cfg.SessionTurns, cfg.Sessions), unit, cfg); err != nil {
			return err
		}
	}
	if cfg.ListRows > 0 {
		if err := runReadSide(ctx, bin, filepath.Join(work, "read"), sc, s3, cfg); err != nil {
			return err
		}
	}
	if cfg.LogLeaves > 0 {
		if err := runProofs(ctx, bin, filepath.Join(work, "proofs"), sc, s3, makeCorpus(sc, 1)[0], cfg); err != nil {
			return fmt.Errorf("proofs: %w", err)
		}
	}
	return nil
}

// runCost measures the cost of a row: the in-process ceilings, the Merkle
// log on against off, then ledgerd over gRPC and REST with a token per
// session and per row, closed loop and at an offered rate; ledgerd's CPU
// per row in units of one verification, timed again at the end.
func runCost(ctx context.Context, env *servedEnv, unit verifyUnit, cfg Config) error {
	w, sc, work := cfg.Out, env.sc, env.work
	// Enough receipts for a closed-loop phase at up to 4,500 rows/s or the
	// offered-rate phase; every served scenario starts on an empty ledger,
	// so each corpus is posted from its start again.
	n := int(max(max(cfg.Duration, cfg.LogRunFor).Seconds()*4500, cfg.OfferedFor.Seconds()*float64(cfg.Offered)))
	fmt.Fprintf(w, "signing two corpora of %d ES256 receipts with request JWTs: a delegation token per row, and one per session of %d turns (%d sessions taking turns); not measured...\n",
		n, cfg.SessionTurns, cfg.Sessions)
	perRow := cfg.viewed(makeCorpus(sc, n))
	sessions := cfg.viewed(makeSessionCorpus(sc, n, cfg.SessionTurns, cfg.Sessions))

	// Phase 1: the in-process ceilings, two of each corpus: the ledger
	// alone (verify + durable commit), and the ledger as ledgerd runs it
	// (the same configuration as the served phases: the Merkle log and its
	// publications, the uploader to S3), called without the network.
	sessionsName := fmt.Sprintf("sessions of %d turns per delegation token", cfg.SessionTurns)
	sampler, err := startUnitSampler(unitSampleEvery)
	if err != nil {
		return err
	}
	defer sampler.Stop()
	var ceilings []ceiling
	bareOf, servedOf := map[string]float64{}, map[string]*result{}
	for _, c := range []struct {
		name   string
		corpus []*ledgerv1.AppendReceiptRequest
	}{{"one delegation token per row", perRow}, {sessionsName, sessions}} {
		for _, asServed := range []bool{false, true} {
			var (
				r   *result
				err error
			)
			if asServed {
				r, err = runLedgerCeiling(ctx, env, c.corpus, cfg)
			} else {
				dir := filepath.Join(work, "ceiling-"+strconv.Itoa(len(ceilings)))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return err
				}
				r, err = runCeiling(ctx, sc, c.corpus, dir, cfg)
			}
			if err != nil {
				return fmt.Errorf("ceiling: %w", err)
			}
			sampler.attribute(r, true)
			ce := ceiling{result: r, name: c.name, asServed: asServed, load: loadAvg()}
			ceilings = append(ceilings, ce)
			if asServed {
				servedOf[c.name] = r
			} else {
				bareOf[c.name] = r.rate
			}
			s3 := ""
			if asServed {
				s3 = fmt.Sprintf("; versitygw %.2f cores", r.s3cpu)
			}
			fmt.Fprintf(w, "\nin-process ceiling, %s (%s, %d in flight, load average %s): %.0f rows/s, p50 %s, p99 %s; CPU %.2f cores = %s per row = %.2f verifications per row (%s)%s; %s\n",
				c.name, ce.what(), cfg.Concurrency, ce.load, r.rate, r.p(50), r.p(99), r.cpu, us(r.cpuPerRow()), r.units(unit), r.unitSaid(unit), s3, r.collectionsSaid())
		}
	}
	if cfg.LogPairs > 0 {
		runs, err := runLogThroughput(ctx, sc, perRow, work, cfg)
		if err != nil {
			return fmt.Errorf("log on/off: %w", err)
		}
		printLogThroughput(cfg, runs)
	}

	// Phase 2: a real ledgerd with S3 evidence, fresh for each scenario.
	ways := []scenario{{via: viaGRPC}, {via: viaREST}}
	if cfg.SkipREST {
		ways = ways[:1]
	}
	if cfg.Batch > 0 {
		ways = append(ways, scenario{via: viaGRPC, batch: cfg.Batch})
	}
	if cfg.Stream {
		ways = append(ways, scenario{via: viaGRPC, stream: true})
	}
	var closed []*served
	for _, way := range ways {
		for _, c := range []struct {
			name   string
			corpus []*ledgerv1.AppendReceiptRequest
		}{{sessionsName, sessions}, {"one delegation token per row", perRow}} {
			sc := way
			sc.name, sc.corpus, sc.ceiling, sc.first, sc.bare = c.name, c.corpus, servedOf[c.name], servedOf[c.name].rate, bareOf[c.name]
			if cfg.PairedCeilings {
				r, err := runLedgerCeiling(ctx, env, c.corpus, cfg)
				if err != nil {
					return fmt.Errorf("ceiling before %s, %s: %w", sc.how(), c.name, err)
				}
				sampler.attribute(r, true)
				sc.ceiling, sc.paired = r, true
			}
			s, err := runServed(ctx, env, sc, cfg.Concurrency, cfg.Duration, 0)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", sc.how(), c.name, err)
			}
			sampler.attribute(s.result, false)
			s.print(w, unit, cfg.Concurrency, cfg.Duration, 0)
			closed = append(closed, s)
		}
	}

	// Phase 3: latency at an offered rate over gRPC, and the time from
	// each acknowledged write to the first signed checkpoint that includes
	// it (the integrator runs every 500 ms, ledgerd's default); then the
	// same rate over REST.
	if cfg.Offered > 0 {
		offered, err := runOfferedWithCheckpoints(ctx, env, scenario{name: sessionsName, via: viaGRPC, corpus: sessions}, cfg)
		if err != nil {
			return err
		}
		sampler.attribute(offered.result, false)
		offered.print(w, unit, 0, cfg.OfferedFor, cfg.Offered)
		closed = append(closed, offered)
		if !cfg.SkipREST {
			restOffered, err := runServed(ctx, env, scenario{name: sessionsName, via: viaREST, corpus: sessions}, 0, cfg.OfferedFor, cfg.Offered)
			if err != nil {
				return err
			}
			sampler.attribute(restOffered.result, false)
			restOffered.print(w, unit, 0, cfg.OfferedFor, cfg.Offered)
			closed = append(closed, restOffered)
		}
	}

	if err := sampler.Stop(); err != nil {
		fmt.Fprintf(w, "\nwarning: the verification unit stopped being timed during the phases (%v); the phases after it are read in the unit measured at the run's start\n", err)
	}
	again, err := measureVerification(cfg.VerifySamples)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\none P-256 verification again after the served phases: %s, load average %s\n", again, loadAvg())
	printCostSummary(w, unit.merge(again), ceilings, closed, cfg)
	return nil
}

// runOfferedWithCheckpoints offers cfg.Offered rows/s over gRPC to a fresh
// ledgerd while a client watches its checkpoints, and prints the time from
// each acknowledgement to a checkpoint that includes the row.
func runOfferedWithCheckpoints(ctx context.Context, env *servedEnv, sc scenario, cfg Config) (*served, error) {
	d, err := env.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	var (
		acksMu sync.Mutex
		acks   []ack
	)
	c0 := d.counters()
	watch := d.watchCheckpoints(ctx, 5*time.Millisecond)
	res, err := d.load(ctx, sc.corpus, 0, cfg.OfferedFor, cfg.Offered, func(id string) {
		at := time.Now()
		acksMu.Lock()
		acks = append(acks, ack{id: id, at: at})
		acksMu.Unlock()
	})
	if err != nil {
		watch()
		return nil, err
	}
	out := &served{result: res, scenario: sc, counters: d.counters().since(c0), load: loadAvg()}
	incl, err := d.inclusion(ctx, acks, watch)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "\nledgerd at %d rows/s offered over gRPC: acknowledged to included in a signed checkpoint (GetCheckpoint polled every 5 ms): p50 %s, p99 %s, max %s (%d rows, %d not matched)\n",
		cfg.Offered, incl.p(50), incl.p(99), incl.p(100), incl.ok, incl.errors)
	out.depth = d.outboxDepth()
	out.drain = d.waitDrained(2 * time.Minute)
	out.atRest = procMem(d.pid)
	return out, env.rest(ctx, d, out)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// viewed sets the view cfg.RowView on every request of corpus.
func (c Config) viewed(corpus []*ledgerv1.AppendReceiptRequest) []*ledgerv1.AppendReceiptRequest {
	for _, r := range corpus {
		r.View = c.RowView
	}
	return corpus
}

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
	elapsed    time.Duration
	lat        []time.Duration
	// cpu is the measured process's CPU in cores over the phase (ledgerd,
	// or this process for the in-process ceiling); clientCPU is this
	// process's when it is the load generator; s3cpu is versitygw's.
	cpu, clientCPU, s3cpu float64
	// usage is what the measured process (ledgerd) used over the phase,
	// with its CPU split into user code and the kernel and its page
	// faults; zero for the in-process ceiling.
	usage procUsage
	mem   memStat // ledgerd's largest memory figures under load
	// io is what ledgerd wrote to storage over the phase (bbolt's pages)
	// and the read and write system calls it made; ioKnown is false when
	// the kernel did not say.
	io      procIO
	ioKnown bool
	// collections is how many garbage collections this process ran over an
	// in-process ceiling (its heap holds the signed corpora besides the
	// ledger's); 0 for a served phase, whose ledgerd's are in its counters.
	collections uint64
	// start and end bound the phase; unit is the verification unit
	// sampled during it (unitSampler.attribute), nil when none was.
	start, end time.Time
	unit       *verifyUnit
}

// perVerification is the CPU time of one verification a phase's cost is
// read in: the trimmed mean of the batches sampled during it, else the
// run's unit.
func (r *result) perVerification(run verifyUnit) time.Duration {
	if r.unit != nil {
		return r.unit.trimmedMean()
	}
	return run.median()
}

// units is the phase's CPU a row in verifications (perVerification).
func (r *result) units(run verifyUnit) float64 {
	if v := r.perVerification(run); v > 0 {
		return r.cpuPerRow().Seconds() / v.Seconds()
	}
	return 0
}

// timedUnit is the unit timed during the phase, or "—" when too few
// batches were.
func (r *result) timedUnit() string {
	if r.unit == nil {
		return "—"
	}
	return us(r.unit.trimmedMean())
}

// unitSaid says which unit the phase is read in.
func (r *result) unitSaid(run verifyUnit) string {
	if r.unit == nil {
		return fmt.Sprintf("one P-256 verification %s, measured at the run's start", us(run.median()))
	}
	lo, hi := r.unit.trimmedBounds()
	return fmt.Sprintf("one P-256 verification %s during the phase: the mean of %d batches of %d from %s to %s, the tenth at each end left out",
		us(r.unit.trimmedMean()), len(r.unit.cpu), unitBatch, us(lo), us(hi))
}

// printWritten prints ledgerd's bytes written to storage per row served,
// on a line of its own; nothing when unknown.
func (r *result) printWritten(w io.Writer) {
	if !r.ioKnown || r.ok == 0 {
		return
	}
	fmt.Fprintf(w, "  ledgerd %.1f KiB written to disk per row\n", float64(r.io.written)/float64(r.ok)/1024)
}

// printKernel prints, on a line of its own, how ledgerd's CPU a row
// splits between its own code and the kernel (bbolt's page writes and
// syncs, page faults, the network), the page faults it took a row and,
// when known, its system calls a row; nothing when no row was recorded
// or the split is unknown.
func (r *result) printKernel(w io.Writer) {
	u := r.usage
	if r.ok == 0 || u.user+u.sys <= 0 {
		return
	}
	n := float64(r.ok)
	fmt.Fprintf(w, "  ledgerd's CPU a row: in its own code %.0f µs, in the kernel %.0f µs; page faults a row: %.2f minor, %.3f major (read from disk)",
		1e6*u.user/n, 1e6*u.sys/n, u.minflt/n, u.majflt/n)
	if c := r.io; r.ioKnown {
		fmt.Fprintf(w, "; system calls a row: %.2f writes (answers, bbolt's pages, uploads), %.2f reads", float64(c.writes)/n, float64(c.reads)/n)
	}
	fmt.Fprintln(w)
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
	// The verifier as ledgerd configures it by default.
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience, CacheSize: config.DefaultVerifierCacheSize})
	l, err := ledger.New(store, objects, v, reg, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	return driveLedger(ctx, l, corpus, cfg)
}

// driveLedger posts corpus to l directly, cfg.Concurrency calls in flight
// for cfg.Duration, and measures this process's CPU over the load.
func driveLedger(ctx context.Context, l *ledger.Ledger, corpus []*ledgerv1.AppendReceiptRequest, cfg Config) (*result, error) {
	cpu0, gc0, t0 := procCPU(selfPid), gcCycles(), time.Now()
	res, err := drive(ctx, corpus, cfg.Concurrency, cfg.Duration, 0, func(ctx context.Context, req *ledgerv1.AppendReceiptRequest) error {
		a := req.GetActions()[0]
		_, _, err := l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: req.GetReceiptJws(), RequestJWT: req.GetRequestJwt(), DelegationToken: req.GetDelegationToken(),
			Actions: []verifier.Action{{Tool: a.GetTool(), Target: a.GetTarget(), ArgsJSON: a.GetArgsJson()}}})
		return err
	})
	if err != nil {
		return nil, err
	}
	res.start, res.end = t0, time.Now()
	res.cpu = (procCPU(selfPid) - cpu0) / res.end.Sub(t0).Seconds()
	res.collections = gcCycles() - gc0
	return res, nil
}

// collectionsSaid is an in-process ceiling's collections in words.
func (r *result) collectionsSaid() string {
	if r.collections == 0 {
		return "no collection in this process"
	}
	return fmt.Sprintf("%d collections in this process, one every %.0f rows", r.collections, float64(r.ok)/float64(r.collections))
}

// gcCycles is how many garbage collections this process has completed.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// drive sends corpus entries through call: closed loop with conc in flight
// when rate is 0, else open loop at rate per second (latency counted from
// each request's scheduled time).
func drive(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc int, dur time.Duration, rate int, call func(context.Context, *ledgerv1.AppendReceiptRequest) error) (*result, error) {
	if rate == 0 {
		return driveBatches(ctx, corpus, conc, 1, dur, func(ctx context.Context, reqs []*ledgerv1.AppendReceiptRequest) []error {
			return []error{call(ctx, reqs[0])}
		})
	}
	var (
		t      tally
		wg     sync.WaitGroup
		start  = time.Now()
		stopAt = start.Add(dur)
	)
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
			t.record(time.Since(at), err)
		}()
	}
	wg.Wait()
	return t.result(start), nil
}

// tally counts a load's answers, and the latencies of those that
// succeeded.
type tally struct {
	ok, errs atomic.Int64
	mu       sync.Mutex
	lat      []time.Duration
}

// record counts one answer that took d.
func (t *tally) record(d time.Duration, err error) {
	if err != nil {
		t.errs.Add(1)
		return
	}
	t.ok.Add(1)
	t.mu.Lock()
	t.lat = append(t.lat, d)
	t.mu.Unlock()
}

// result is the load's result, from start until now.
func (t *tally) result(start time.Time) *result {
	elapsed := time.Since(start)
	return &result{ok: int(t.ok.Load()), errors: int(t.errs.Load()), rate: float64(t.ok.Load()) / elapsed.Seconds(), elapsed: elapsed, lat: t.lat}
}

// daemon is a ledgerd under measurement: a child process, or (for the
// profiled phase) a server in this process.
type daemon struct {
	cmd      *exec.Cmd      // nil in process
	ledger   *ledger.Ledger // in process: the server's ledger
	pid      int
	s3       *s3test.Server
	grpcAddr string
	httpAddr string
	conns    []*grpc.ClientConn
	shutdown func() // stops the in-process server
	once     sync.Once
	// exited is closed when the process has exited; nil in process.
	exited chan struct{}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ledgerdConfig is ledgerd's configuration for the benchmark: the
// scenario's brand and agent, S3 evidence in a new bucket, the bench's API
// keys, every other setting at its default.
func ledgerdConfig(dataDir string, sc *pacttest.Scenario, s3 *s3test.Server) (config.Config, error) {
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
		return cfg, err
	}
	if cfg.Listen.HTTP, err = freeAddr(); err != nil {
		return cfg, err
	}
	return cfg, os.MkdirAll(dataDir, 0o700)
}

func startLedgerdOn(ctx context.Context, bin, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server) (*daemon, error) {
	return startLedgerdEnv(ctx, bin, dataDir, sc, s3, nil)
}

// startLedgerdEnv starts ledgerd on dataDir with env added to this
// process's environment (such as GOGC=200).
func startLedgerdEnv(ctx context.Context, bin, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server, env []string) (*daemon, error) {
	return withFreshPorts(func() (*daemon, error) {
		cfg, err := ledgerdConfig(dataDir, sc, s3) // new ports
		if err != nil {
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
		return startLedgerdAt(ctx, bin, path, cfg, s3, env)
	})
}

// errExited: ledgerd exited before it was ready.
var errExited = errors.New("ledgerd exited before it was ready")

// withFreshPorts runs start, which starts ledgerd on ports freeAddr found
// free, again (up to three times in all) while ledgerd exits before it is
// ready: a port can be taken, by an outgoing connection, between freeAddr
// and ledgerd's listen. ledgerd's own error is on stderr.
func withFreshPorts[D any](start func() (D, error)) (D, error) {
	for attempt := 1; ; attempt++ {
		d, err := start()
		if !errors.Is(err, errExited) || attempt == 3 {
			return d, err
		}
	}
}

// startLedgerdAt starts ledgerd with the configuration file path (which
// holds cfg) and waits until it is ready.
func startLedgerdAt(ctx context.Context, bin, path string, cfg config.Config, s3 *s3test.Server, env []string) (*daemon, error) {
	cmd := exec.CommandContext(ctx, bin, "--config", path)
	cmd.Stderr = os.Stderr
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	exited, err := startWatched(cmd)
	if err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, pid: cmd.Process.Pid, s3: s3, grpcAddr: cfg.Listen.GRPC, httpAddr: cfg.Listen.HTTP, exited: exited}
	return d, d.connect(ctx)
}

// startWatched starts cmd and waits on it in the background; the channel
// it returns is closed when the process has exited. Nothing else may call
// cmd.Wait.
func startWatched(cmd *exec.Cmd) (chan struct{}, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return exited, nil
}

// isClosed reports whether exited, from startWatched, is closed (never
// for nil).
func isClosed(exited chan struct{}) bool {
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

// errNotReady: ledgerd did not answer /readyz in time.
var errNotReady = errors.New("ledgerd did not become ready")

// awaitReady polls a ledgerd's /readyz until it answers 200, for at most
// within; it returns errExited as soon as the process has exited (exited,
// from startWatched, is closed) and errNotReady after within.
func awaitReady(httpAddr string, exited chan struct{}, within time.Duration) error {
	ready := waitFor(within, func() bool { return isClosed(exited) || isReady(httpAddr) }) >= 0
	switch {
	case isClosed(exited):
		return errExited
	case !ready:
		return errNotReady
	}
	return nil
}

// isReady reports whether a ledgerd's /readyz answers 200.
func isReady(httpAddr string) bool {
	resp, err := http.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// connect waits for /readyz and opens four gRPC connections.
func (d *daemon) connect(ctx context.Context) error {
	if err := awaitReady(d.httpAddr, d.exited, 2*time.Minute); err != nil { // opening a large file included
		d.stop()
		return err
	}
	for range 4 {
		c, err := grpc.NewClient(d.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		d.conns = append(d.conns, c)
	}
	return nil
}

func (d *daemon) stop() {
	d.once.Do(func() {
		for _, c := range d.conns {
			c.Close()
		}
		if d.cmd == nil {
			d.shutdown()
			return
		}
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
}

// grpcAppend posts through the daemon's gRPC connections in turn; onAck,
// when set, is told the row id of each acknowledged write as it arrives.
func (d *daemon) grpcAppend(onAck func(id string)) func(context.Context, *ledgerv1.AppendReceiptRequest) error {
	var rr atomic.Int64
	clients := make([]ledgerv1.LedgerServiceClient, len(d.conns))
	for i, c := range d.conns {
		clients[i] = ledgerv1.NewLedgerServiceClient(c)
	}
	return func(ctx context.Context, req *ledgerv1.AppendReceiptRequest) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+writerKey)
		rep, err := clients[rr.Add(1)%int64(len(clients))].AppendReceipt(ctx, req)
		if err == nil && onAck != nil {
			onAck(rep.GetRow().GetId())
		}
		return err
	}
}

// load posts corpus entries to ledgerd over gRPC (see drive and measure).
func (d *daemon) load(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc int, dur time.Duration, rate int, onAck func(id string)) (*result, error) {
	return d.measure(ctx, corpus, conc, dur, rate, d.grpcAppend(onAck))
}

// measure drives call and adds ledgerd's, this client's and versitygw's
// CPU and ledgerd's memory under the load.
func (d *daemon) measure(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc int, dur time.Duration, rate int, call func(context.Context, *ledgerv1.AppendReceiptRequest) error) (*result, error) {
	return d.measured(func() (*result, error) { return drive(ctx, corpus, conc, dur, rate, call) })
}

// measured runs a load (drive or driveBatches) and adds ledgerd's, this
// client's and versitygw's CPU and ledgerd's memory under it.
func (d *daemon) measured(load func() (*result, error)) (*result, error) {
	pid := d.pid
	u0, self0, s30 := procUsageOf(pid), procCPU(selfPid), procCPU(d.s3Pid())
	io0, ioKnown := procIOOf(pid)
	mem := sampleMem(pid, 500*time.Millisecond)
	t0 := time.Now()
	res, err := load()
	peak := mem.stop()
	if err != nil {
		return nil, err
	}
	res.start, res.end = t0, time.Now()
	el := res.end.Sub(t0).Seconds()
	res.usage = procUsageOf(pid).since(u0)
	res.cpu = (res.usage.user + res.usage.sys) / el
	res.clientCPU = (procCPU(selfPid) - self0) / el
	res.s3cpu = (procCPU(d.s3Pid()) - s30) / el
	if io1, ok := procIOOf(pid); ok && ioKnown {
		res.io, res.ioKnown = io1.since(io0), true
	}
	res.mem = peak
	return res, nil
}

func (d *daemon) s3Pid() int { return d.s3.Pid() }

func (d *daemon) outboxDepth() int {
	r, ok := d.readyz()
	if !ok {
		return -1
	}
	return r.OutboxDepth
}

// readyzBody is what the benchmark reads of ledgerd's /readyz.
type readyzBody struct {
	OutboxDepth int
	Store       struct {
		KeyFilter string `json:"keyFilter"`
	}
}

// readyz reads ledgerd's /readyz; false when it does not answer.
func (d *daemon) readyz() (readyzBody, bool) {
	var r readyzBody
	resp, err := http.Get("http://" + d.httpAddr + "/readyz")
	if err != nil {
		return r, false
	}
	defer resp.Body.Close()
	return r, json.NewDecoder(resp.Body).Decode(&r) == nil
}

// waitFor polls cond until it holds, for at most limit; it returns how
// long that took, or -1.
func waitFor(limit time.Duration, cond func() bool) time.Duration {
	t0 := time.Now()
	for time.Since(t0) < limit {
		if cond() {
			return time.Since(t0).Round(10 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1
}

// waitKeyFilter waits, at most limit, for the bbolt store's key filter
// (/readyz store.keyFilter); it returns how long that took, or -1.
func (d *daemon) waitKeyFilter(limit time.Duration) time.Duration {
	return waitFor(limit, func() bool {
		r, ok := d.readyz()
		return ok && strings.HasPrefix(r.Store.KeyFilter, "ready")
	})
}

func (d *daemon) waitDrained(limit time.Duration) time.Duration {
	return waitFor(limit, func() bool { return d.outboxDepth() == 0 })
}
