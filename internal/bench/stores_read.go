package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/move"
	"github.com/pactledger/pactledger/storage/postgres"
)

// readFigures is one round of read-side measurements on a served store.
type readFigures struct {
	list, dispute, monthly []time.Duration
	errors                 int
	passed, pulls          int
}

// readSide loads ListRows rows into a bbolt file, measures ListRows by
// target and the drills on a ledgerd serving it, moves the file into a
// PostgreSQL database (COPY, then verification, as `ledgerd migrate
// --from bbolt` does) and measures the same on a ledgerd serving that.
func (b *storeBench) readSide(ctx context.Context) error {
	cfg := b.cfg
	dir := filepath.Join(b.work, "read")
	if err := os.MkdirAll(filepath.Join(dir, "bbolt"), 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, "bbolt", "ledger.db")
	targets := cfg.ListRows / 2
	fmt.Fprintf(b.w, "\nloading %d rows with their evidence bundles into bbolt (not measured)...\n", cfg.ListRows)
	t0 := time.Now()
	if err := loadBolt(ctx, b, path, cfg.ListRows, targets); err != nil {
		return err
	}
	st, _ := os.Stat(path)
	fmt.Fprintf(b.w, "  loaded in %s, bbolt file %s\n", time.Since(t0).Round(time.Second), mib(st.Size()))
	boltFigures, err := b.measureServed(ctx, config.Store{Kind: config.StoreBbolt, Path: path}, filepath.Join(dir, "bbolt"), targets)
	if err != nil {
		return fmt.Errorf("bbolt: %w", err)
	}

	if err := b.pg.Exec(ctx, "postgres", "CREATE DATABASE bench_read"); err != nil {
		return err
	}
	defer func() {
		_ = b.pg.Exec(context.Background(), "postgres", "DROP DATABASE IF EXISTS bench_read WITH (FORCE)")
	}()
	dsn := b.pg.DSN("bench_read")
	fmt.Fprintf(b.w, "moving it into PostgreSQL (ledgerd migrate --from bbolt)...\n")
	rep, err := move.Run(ctx, move.Config{From: path, To: postgres.Config{DSN: dsn}, Progress: &indent{w: b.w, prefix: "  move: "}})
	if err != nil {
		return err
	}
	size, err := b.pg.QueryString(ctx, "bench_read", "SELECT pg_size_pretty(pg_database_size('bench_read'))")
	if err != nil {
		size = "?"
	}
	fmt.Fprintf(b.w, "  moved %d records in %s (%.0f records/s, copy and verification), database %s\n",
		rep.Copied, rep.Took.Round(time.Second), float64(rep.Copied)/rep.Took.Seconds(), size)
	pgFigures, err := b.measureServed(ctx, config.Store{Kind: config.StorePostgres, DSN: dsn}, filepath.Join(dir, "postgres"), targets)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	b.printReads(boltFigures, pgFigures)
	return nil
}

// loadBolt stores n synthetic rows (copies of real ones, two per target)
// with their evidence bundles in a new bbolt file at path.
func loadBolt(ctx context.Context, b *storeBench, path string, n, targets int) error {
	dir := filepath.Join(filepath.Dir(path), "templates")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tpl, snaps, err := templates(ctx, b.sc, dir, 1000)
	if err != nil {
		return err
	}
	store, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		return err
	}
	const batch = 20000
	for start := 0; start < n; start += batch {
		err := store.Update(ctx, func(tx ledger.Tx) error {
			if start == 0 {
				for _, s := range snaps {
					if _, err := tx.PutSnapshot(s); err != nil {
						return err
					}
				}
			}
			for i := start; i < min(start+batch, n); i++ {
				t := tpl[i%len(tpl)]
				row := synthetic(t.row, i, targets)
				if err := tx.CreateRow(row); err != nil {
					return err
				}
				if err := tx.PutEvidence(row.ID, t.bundle); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			store.Close()
			return err
		}
	}
	return store.Close()
}

// measureServed serves store with one ledgerd and measures the read side
// storeRuns times.
func (b *storeBench) measureServed(ctx context.Context, store config.Store, dir string, targets int) ([]*readFigures, error) {
	srv, err := b.serve(ctx, store, 1, dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	client := srv.clients[0]
	rnd := rand.New(rand.NewPCG(1, 2))
	var out []*readFigures
	for range storeRuns {
		out = append(out, b.measureReads(ctx, client, rnd, targets))
	}
	return out, nil
}

// monthlyDrills is how many monthly drills each round times: each draws
// its sample from the drill pool (a few point reads) and drills 5 rows.
const monthlyDrills = 10

// measureReads times ListQueries ListRows by target, Drills dispute drills
// by target and monthlyDrills monthly drills.
func (b *storeBench) measureReads(ctx context.Context, client ledgerv1.LedgerServiceClient, rnd *rand.Rand, targets int) *readFigures {
	cfg := b.cfg
	f := &readFigures{}
	rctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readerKey)
	for range cfg.ListQueries {
		q0 := time.Now()
		rep, err := client.ListRows(rctx, &ledgerv1.ListRowsRequest{Target: "L-" + strconv.Itoa(rnd.IntN(targets))})
		if err != nil || len(rep.GetRows()) != 2 {
			f.errors++
			continue
		}
		f.list = append(f.list, time.Since(q0))
	}
	sctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+supportKey)
	drill := func(req *ledgerv1.RunDrillRequest) (time.Duration, bool) {
		q0 := time.Now()
		rep, err := client.RunDrill(sctx, req)
		if err != nil {
			f.errors++
			return 0, false
		}
		f.passed += int(rep.GetReport().GetChecksPassed())
		f.pulls += int(rep.GetReport().GetChecksTotal())
		return time.Since(q0), true
	}
	for range cfg.Drills {
		if d, ok := drill(&ledgerv1.RunDrillRequest{Target: "L-" + strconv.Itoa(rnd.IntN(targets))}); ok {
			f.dispute = append(f.dispute, d)
		}
	}
	for range monthlyDrills {
		if d, ok := drill(&ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: 5}}); ok {
			f.monthly = append(f.monthly, d)
		}
	}
	return f
}

// printReads prints the read side of both stores, medians of the runs.
func (b *storeBench) printReads(bolt, pg []*readFigures) {
	fmt.Fprintf(b.w, "\nreads over gRPC with %d rows stored, medians of %d runs (%d ListRows, %d dispute and %d monthly drills each):\n",
		b.cfg.ListRows, storeRuns, b.cfg.ListQueries, b.cfg.Drills, monthlyDrills)
	fmt.Fprintf(b.w, "  %-9s %12s %12s %12s %12s %12s %12s %8s %8s\n", "", "ListRows p50", "p99", "dispute p50", "p99", "monthly p50", "p99", "errors", "pulls ok")
	for _, s := range []struct {
		name string
		fs   []*readFigures
	}{{config.StoreBbolt, bolt}, {config.StorePostgres, pg}} {
		m := func(sel func(*readFigures) []time.Duration, q float64) time.Duration {
			v := make([]float64, len(s.fs))
			for i, f := range s.fs {
				v[i] = float64(percentile(sel(f), q))
			}
			return time.Duration(medianOf(v)).Round(10 * time.Microsecond)
		}
		list := func(f *readFigures) []time.Duration { return f.list }
		dispute := func(f *readFigures) []time.Duration { return f.dispute }
		monthly := func(f *readFigures) []time.Duration { return f.monthly }
		errs, passed, pulls := 0, 0, 0
		for _, f := range s.fs {
			errs, passed, pulls = errs+f.errors, passed+f.passed, pulls+f.pulls
		}
		fmt.Fprintf(b.w, "  %-9s %12s %12s %12s %12s %12s %12s %8d %8s\n", s.name, m(list, 50), m(list, 99), m(dispute, 50), m(dispute, 99),
			m(monthly, 50), m(monthly, 99), errs, fmt.Sprintf("%d/%d", passed, pulls))
	}
	fmt.Fprintln(b.w, "  (targets: ListRows p99 10 ms or less, a drill 1 s or less)")
}

// indent writes each line to w with prefix.
type indent struct {
	w      io.Writer
	prefix string
}

func (i *indent) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(i.w, i.prefix+line); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
