package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/internal/s3test"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/storage/s3"
)

// The row stores compared (`make bench STORE=postgres`): ledgerd on bbolt
// beside ledgerd on PostgreSQL (one replica, then two sharing the
// database), each run on a fresh store with S3 evidence, three runs of
// each and the medians printed: rows/s with Concurrency in flight, CPU per
// row of ledgerd, of PostgreSQL and of the S3 server, latency at Offered
// rows/s, the commit latency of each store in process, and ListRows and
// drills with ListRows rows stored (loaded into bbolt, then moved into
// PostgreSQL as `ledgerd migrate --from bbolt` does).

// storeRuns is how many times each figure is measured; medians are shown.
const storeRuns = 3

// storeSetup is one way to serve: a store and a number of replicas.
type storeSetup struct {
	kind     string
	replicas int
}

func (s storeSetup) String() string {
	if s.replicas == 1 {
		return s.kind + ", 1 ledgerd"
	}
	return fmt.Sprintf("%s, %d ledgerds", s.kind, s.replicas)
}

// storeBench is what every run of the comparison shares.
type storeBench struct {
	cfg        Config
	w          io.Writer
	work       string
	bin        string
	sc         *pacttest.Scenario
	s3         *s3test.Server
	pg         *pgtest.Cluster
	postmaster int
	logKey     string
	dbs        int
	// noStatements: the server runs without pg_stat_statements.
	noStatements bool
}

// storeRun is the figures of one run of one setup.
type storeRun struct {
	closed, offered *storeLoad
	statements      []pgStatement // PostgreSQL's statements in the closed loop
}

// runStores runs the comparison and prints it.
func runStores(ctx context.Context, cfg Config) error {
	b := &storeBench{cfg: cfg, w: cfg.Out}
	fmt.Fprintf(b.w, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s; store comparison, %d runs of each figure, medians shown\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), storeRuns)
	var err error
	if b.work, err = os.MkdirTemp("", "pactledger-bench-stores-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.work)
	b.sc = pacttest.NewScenario(jose.ES256, jose.ES256)
	defer b.sc.Close()
	if b.s3, err = s3test.Start(); err != nil {
		return err
	}
	defer b.s3.Stop()
	fmt.Fprintln(b.w, "starting a PostgreSQL cluster on loopback (defaults of the Debian package; fsync and synchronous_commit on)...")
	if b.pg, err = pgtest.New("bench", statsExtension); err != nil {
		fmt.Fprintf(b.w, "PostgreSQL did not start with pg_stat_statements (%v); statements will not be listed\n", err)
		if b.pg, err = pgtest.New("bench"); err != nil {
			return err
		}
		b.noStatements = true
	}
	defer b.pg.Remove()
	if err := b.setUp(ctx); err != nil {
		return err
	}

	if cfg.Duration > 0 {
		if err := b.writeSide(ctx); err != nil {
			return err
		}
	}
	if cfg.ListRows > 0 {
		return b.readSide(ctx)
	}
	return nil
}

// writeSide measures the write path on each store: served, then the
// commit in process.
func (b *storeBench) writeSide(ctx context.Context) error {
	cfg := b.cfg
	n := int(cfg.Duration.Seconds()*4500 + cfg.OfferedFor.Seconds()*float64(cfg.Offered))
	fmt.Fprintf(b.w, "signing a corpus of %d ES256 receipts (not measured)...\n", n)
	corpus := makeCorpus(b.sc, n)
	setups := []storeSetup{{config.StoreBbolt, 1}, {config.StorePostgres, 1}, {config.StorePostgres, 2}}
	runs := map[storeSetup][]*storeRun{}
	for i := range storeRuns {
		for _, s := range setups {
			r, err := b.run(ctx, s, corpus)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			runs[s] = append(runs[s], r)
			fmt.Fprintf(b.w, "  run %d, %s: %.0f rows/s at %d in flight (p99 %s, errors %d); at %d/s offered p99 %s (errors %d)\n",
				i+1, s, r.closed.rate(), cfg.Concurrency, r.closed.q(99).Round(10*time.Microsecond), r.closed.errors,
				cfg.Offered, r.offered.q(99).Round(10*time.Microsecond), r.offered.errors)
		}
	}
	b.printServed(setups, runs)
	if last := runs[setups[1]][storeRuns-1]; last != nil {
		b.printStatements(setups[1].String()+", last run's closed loop", last.closed, last.statements)
	}
	commits, err := b.commitLatencies(ctx)
	if err != nil {
		return err
	}
	b.printCommits(commits)
	return nil
}

// setUp builds ledgerd, finds the PostgreSQL server's pid, makes the
// migrated template database and the Merkle log key the replicas share.
func (b *storeBench) setUp(ctx context.Context) error {
	b.bin = filepath.Join(b.work, "ledgerd")
	if err := buildLedgerd(ctx, b.w, b.bin); err != nil {
		return err
	}
	backend, err := b.pg.QueryString(ctx, "postgres", "SELECT pg_backend_pid()::text")
	if err != nil {
		return err
	}
	pid, _ := strconv.Atoi(backend)
	if f := procStat(pid); len(f) > 1 {
		b.postmaster, _ = strconv.Atoi(f[1])
	}
	if err := b.pg.Template("bench_schema", func(dsn string) error {
		_, _, err := postgres.Migrate(ctx, postgres.Config{DSN: dsn})
		return err
	}); err != nil {
		return err
	}
	c := config.Default()
	c.MerkleLog.KeyFile = filepath.Join(b.work, "log", "signing.key")
	if _, _, _, err := config.EnsureLogKey(&c); err != nil {
		return err
	}
	b.logKey = c.MerkleLog.KeyFile
	return nil
}

// freshStore returns a new empty store of kind: a bbolt path under dir,
// or a database copied from the migrated template (dropped by the
// returned func).
func (b *storeBench) freshStore(ctx context.Context, kind, dir string) (config.Store, func(), error) {
	if kind == config.StoreBbolt {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return config.Store{}, nil, err
		}
		return config.Store{Kind: kind, Path: filepath.Join(dir, "ledger.db")}, func() { _ = os.RemoveAll(dir) }, nil
	}
	b.dbs++
	name := "bench_" + strconv.Itoa(b.dbs)
	if err := b.pg.Exec(ctx, "postgres", "CREATE DATABASE "+name+" TEMPLATE bench_schema"); err != nil {
		return config.Store{}, nil, err
	}
	drop := func() {
		_ = b.pg.Exec(context.Background(), "postgres", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = os.RemoveAll(dir)
	}
	return config.Store{Kind: kind, DSN: b.pg.DSN(name)}, drop, nil
}

// serve starts replicas ledgerds on store with a fresh bucket.
func (b *storeBench) serve(ctx context.Context, store config.Store, replicas int, dir string) (*storeServed, error) {
	bucket := s3test.Bucket()
	if _, err := s3.Open(ctx, s3.Config{Endpoint: b.s3.Endpoint, Bucket: bucket, AccessKey: b.s3.AccessKey, SecretKey: b.s3.SecretKey, Insecure: true, CreateBucket: true}); err != nil {
		return nil, fmt.Errorf("create bucket: %w", err)
	}
	var ds []*storeDaemon
	for i := range replicas {
		dataDir := filepath.Join(dir, "replica-"+strconv.Itoa(i+1))
		d, err := withFreshPorts(func() (*storeDaemon, error) {
			cfg, err := storeLedgerdConfig(dataDir, store, b.sc, b.s3, bucket, b.logKey) // new ports
			if err != nil {
				return nil, err
			}
			return startStoreDaemon(ctx, b.bin, cfg)
		})
		if err != nil {
			newStoreServed(ds).stop()
			return nil, err
		}
		ds = append(ds, d)
	}
	return newStoreServed(ds), nil
}

// run measures one setup on a fresh store: the closed loop, then the
// offered rate with the receipts the closed loop did not use.
func (b *storeBench) run(ctx context.Context, s storeSetup, corpus []*ledgerv1.AppendReceiptRequest) (*storeRun, error) {
	dir := filepath.Join(b.work, "run")
	store, drop, err := b.freshStore(ctx, s.kind, dir)
	if err != nil {
		return nil, err
	}
	defer drop()
	srv, err := b.serve(ctx, store, s.replicas, dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	pg := 0
	if s.kind == config.StorePostgres {
		pg = b.postmaster
	}
	if pg != 0 && !b.noStatements {
		if err := b.resetStatements(ctx); err != nil {
			return nil, err
		}
	}
	r := &storeRun{closed: srv.post(ctx, corpus, b.cfg.Concurrency, b.cfg.Duration, 0, pg, b.s3)}
	if pg != 0 && !b.noStatements {
		if r.statements, err = b.topStatements(ctx, "bench_"+strconv.Itoa(b.dbs), 0); err != nil {
			return nil, err
		}
	}
	if r.closed.corpusExhausted {
		return nil, fmt.Errorf("the corpus ran out after %d rows: lengthen it", r.closed.ok)
	}
	used := r.closed.ok + r.closed.errors
	r.offered = srv.post(ctx, corpus[used:], 0, b.cfg.OfferedFor, b.cfg.Offered, pg, b.s3)
	return r, nil
}

// printServed prints the served figures, medians of the runs.
func (b *storeBench) printServed(setups []storeSetup, runs map[storeSetup][]*storeRun) {
	w, cfg := b.w, b.cfg
	fmt.Fprintf(w, "\nledgerd over gRPC, S3 evidence, medians of %d runs (each on a fresh store):\n", storeRuns)
	fmt.Fprintf(w, "  %-22s %10s %9s %9s %12s %12s %9s %11s %11s\n", "", "rows/s@"+strconv.Itoa(cfg.Concurrency), "p50", "p99",
		"ledgerd CPU", "PostgreSQL", "S3 CPU", "p50@"+strconv.Itoa(cfg.Offered)+"/s", "p99@"+strconv.Itoa(cfg.Offered)+"/s")
	fmt.Fprintf(w, "  %-22s %10s %9s %9s %12s %12s %9s %11s %11s\n", "", "", "", "", "ms/row", "CPU ms/row", "ms/row", "", "")
	rate := map[storeSetup]float64{}
	for _, s := range setups {
		rs := runs[s]
		m := func(f func(*storeRun) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			return medianOf(v)
		}
		d := func(f func(*storeRun) time.Duration) time.Duration {
			return time.Duration(m(func(r *storeRun) float64 { return float64(f(r)) })).Round(10 * time.Microsecond)
		}
		rate[s] = m(func(r *storeRun) float64 { return r.closed.rate() })
		pgCPU := "-"
		if s.kind == config.StorePostgres {
			pgCPU = fmt.Sprintf("%.2f", m(func(r *storeRun) float64 { return r.closed.cpuPerRow(r.closed.postgresCPU) }))
		}
		fmt.Fprintf(w, "  %-22s %10.0f %9s %9s %12.2f %12s %9.2f %11s %11s\n", s, rate[s],
			d(func(r *storeRun) time.Duration { return r.closed.q(50) }), d(func(r *storeRun) time.Duration { return r.closed.q(99) }),
			m(func(r *storeRun) float64 { return r.closed.cpuPerRow(r.closed.ledgerdCPU) }), pgCPU,
			m(func(r *storeRun) float64 { return r.closed.cpuPerRow(r.closed.s3CPU) }),
			d(func(r *storeRun) time.Duration { return r.offered.q(50) }), d(func(r *storeRun) time.Duration { return r.offered.q(99) }))
	}
	bolt := rate[setups[0]]
	fmt.Fprintf(w, "  PostgreSQL against bbolt, rows/s: %.2f with 1 ledgerd, %.2f with 2 (the target: 0.70 or more)\n",
		rate[setups[1]]/bolt, rate[setups[2]]/bolt)
}

// medianOf returns the median of v (the mean of the middle two when even).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
