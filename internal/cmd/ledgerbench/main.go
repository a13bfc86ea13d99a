// Command ledgerbench is the load benchmark behind `make bench`: a real
// ledgerd on bbolt with S3 evidence (versitygw, from PACTLEDGER_VERSITYGW),
// gRPC and REST clients posting pre-signed receipts (a delegation token per
// session of turns, or one per row), and the in-process ceiling measured in
// the same run; ledgerd's CPU per row is printed in units of one P-256
// verification timed in the same run. Then the Merkle log's figures
// (throughput with the log on against off, time to a checkpoint, proof
// serving, tile bytes). It prints figures and ratios; it asserts nothing.
// With -cpuprofile or -memprofile it runs only a profiled phase.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pactledger/pactledger/internal/bench"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

func main() {
	cfg := bench.Config{Out: os.Stdout, GrowthSteps: []int{0, 1000000, 3000000, 10000000}}
	flag.DurationVar(&cfg.Duration, "duration", 60*time.Second, "sustained-load phase length (0 skips the ceilings, served phases and everything after them; with -store, the write side, leaving the reads)")
	flag.IntVar(&cfg.Concurrency, "concurrency", 64, "requests in flight in the sustained phase")
	flag.IntVar(&cfg.Offered, "offered", 1000, "rows/s offered in the latency phase (0 skips it)")
	flag.DurationVar(&cfg.OfferedFor, "offered-for", 20*time.Second, "latency phase length")
	flag.DurationVar(&cfg.RestFor, "rest-for", 0, "after each served scenario's outbox drained, leave ledgerd idle this long and read its memory again (the Go runtime collects at least every two minutes; 0 skips it)")
	flag.IntVar(&cfg.ListRows, "list-rows", 1000000, "rows stored for the ListRows and drill phase (0 skips it)")
	flag.IntVar(&cfg.ListQueries, "list-queries", 2000, "ListRows queries to time")
	flag.IntVar(&cfg.Drills, "drills", 200, "dispute drills to time (and a tenth as many monthly drills)")
	flag.IntVar(&cfg.LogPairs, "log-pairs", 6, "pairs of in-process runs with the Merkle log off and on (0 skips them)")
	flag.DurationVar(&cfg.LogRunFor, "log-run-for", 5*time.Second, "length of each run with the log off or on")
	flag.IntVar(&cfg.LogLeaves, "log-leaves", 1000000, "leaves of the Merkle log built for the proof phase (0 skips it)")
	flag.IntVar(&cfg.ProofQueries, "proof-queries", 2000, "row proofs to time")
	flag.StringVar(&cfg.Store, "store", "", "postgres: compare ledgerd on PostgreSQL (1 and 2 replicas) with ledgerd on bbolt, medians of 3 runs")
	flag.IntVar(&cfg.SessionTurns, "session-turns", 20, "rows sharing one delegation token in the sessions corpus")
	flag.IntVar(&cfg.Sessions, "sessions", 500, "sessions taking turns at once in the sessions corpus")
	flag.IntVar(&cfg.VerifySamples, "verify-samples", 5000, "P-256 verifications timed for the unit of cost")
	flag.StringVar(&cfg.CPUProfile, "cpuprofile", "", "run only the profiled phase (ledgerd in process, gRPC, sessions corpus) and write its CPU profile here")
	flag.StringVar(&cfg.MemProfile, "memprofile", "", "run only the profiled phase and write the heap allocations of its load here")
	flag.StringVar(&cfg.ClientCPUProfile, "client-cpuprofile", "", "write a CPU profile of the load generator (this process) over each served scenario (not the growth windows) to this prefix, a dash, the phase's name and .pb; the profiling adds a little to the load generator's CPU")
	flag.BoolVar(&cfg.ProfileREST, "profile-rest", false, "post the profiled phase's load through the REST gateway instead of gRPC")
	flag.IntVar(&cfg.Batch, "batch", 8, "receipts a call in the batched gRPC scenarios (AppendReceipts, --concurrency receipts in flight); 0 leaves them out")
	flag.BoolVar(&cfg.Stream, "stream", true, "add the streamed gRPC scenarios (AppendReceiptStream, --concurrency receipts in flight on a stream a connection)")
	flag.Func("row-view", "the view every posted receipt asks its answer in: full (the default) or basic", func(v string) error {
		switch v {
		case "full":
			cfg.RowView = ledgerv1.RowView_ROW_VIEW_UNSPECIFIED
		case "basic":
			cfg.RowView = ledgerv1.RowView_ROW_VIEW_BASIC
		default:
			return fmt.Errorf("%q: full or basic", v)
		}
		return nil
	})
	flag.BoolVar(&cfg.ProfileStream, "profile-stream", false, "post the profiled phase's load on AppendReceiptStream")
	flag.IntVar(&cfg.ProfileBatch, "profile-batch", 0, "post the profiled phase's load in AppendReceipts calls of this many receipts (0: one AppendReceipt a receipt)")
	flag.IntVar(&cfg.ProfileOffered, "profile-offered", 0, "send the profiled phase's load at this many rows a second, open loop (0: --concurrency in flight)")
	flag.IntVar(&cfg.DensityRows, "density-rows", 20000, "real rows of each retention class recorded for the row store's bytes per row (0 skips it)")
	flag.Func("growth", "comma-separated ledger sizes in rows for the growth run (\"\" skips it; default 0,1000000,3000000,10000000)", func(v string) error {
		cfg.GrowthSteps = nil
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 {
				return fmt.Errorf("growth step %q is not a row count", f)
			}
			cfg.GrowthSteps = append(cfg.GrowthSteps, n)
		}
		return nil
	})
	flag.DurationVar(&cfg.GrowthWindow, "growth-window", 30*time.Second, "served window at each growth step")
	flag.IntVar(&cfg.GrowthQueries, "growth-queries", 1000, "ListRows queries timed at each growth step")
	flag.IntVar(&cfg.GrowthDrills, "growth-drills", 50, "dispute drills timed at each growth step")
	flag.IntVar(&cfg.GrowthPairs, "growth-pairs", 3, "windows at the last growth step's size and on an empty ledger, alternating, compared by their medians")
	flag.Func("disk-probe", "time commit-shaped writes (200 pages, two fdatasyncs) in one run and scattered over 64 MiB up to this many MiB of a scratch file (0 skips it)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want a size in MiB, got %q", v)
		}
		cfg.DiskProbe = n << 20
		return nil
	})
	flag.BoolVar(&cfg.SkipREST, "skip-rest", false, "leave out the REST scenarios")
	flag.BoolVar(&cfg.PairedCeilings, "paired-ceilings", true, "run the in-process ceiling on each closed-loop served scenario's corpus again just before it, and give its ratio to that run (false: to the ceilings at the run's start alone)")
	flag.Func("ledgerd-env", "NAME=VALUE added to every served ledgerd's environment, such as GOGC=400 (repeatable)", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want NAME=VALUE, got %q", v)
		}
		cfg.LedgerdEnv = append(cfg.LedgerdEnv, v)
		return nil
	})
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "ledgerbench:", err)
		os.Exit(1)
	}
}
