// Command ledgerbench is the load benchmark behind `make bench`: a real
// ledgerd on bbolt with S3 evidence (versitygw, from PACTLEDGER_VERSITYGW),
// gRPC clients posting pre-signed receipts, and the in-process ceiling
// measured in the same run, then the Merkle log's figures (throughput with
// the log on against off, time to a checkpoint, proof serving, tile bytes).
// It prints figures and ratios; it asserts nothing.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/pactledger/pactledger/internal/bench"
)

func main() {
	cfg := bench.Config{Out: os.Stdout}
	flag.DurationVar(&cfg.Duration, "duration", 60*time.Second, "sustained-load phase length")
	flag.IntVar(&cfg.Concurrency, "concurrency", 64, "requests in flight in the sustained phase")
	flag.IntVar(&cfg.Offered, "offered", 1000, "rows/s offered in the latency phase")
	flag.DurationVar(&cfg.OfferedFor, "offered-for", 20*time.Second, "latency phase length")
	flag.IntVar(&cfg.ListRows, "list-rows", 1000000, "rows stored for the ListRows and drill phase (0 skips it)")
	flag.IntVar(&cfg.ListQueries, "list-queries", 2000, "ListRows queries to time")
	flag.IntVar(&cfg.Drills, "drills", 200, "dispute drills to time (and a tenth as many monthly drills)")
	flag.IntVar(&cfg.LogPairs, "log-pairs", 6, "pairs of in-process runs with the Merkle log off and on (0 skips them)")
	flag.DurationVar(&cfg.LogRunFor, "log-run-for", 5*time.Second, "length of each run with the log off or on")
	flag.IntVar(&cfg.LogLeaves, "log-leaves", 1000000, "leaves of the Merkle log built for the proof phase (0 skips it)")
	flag.IntVar(&cfg.ProofQueries, "proof-queries", 2000, "row proofs to time")
	flag.StringVar(&cfg.Store, "store", "", "postgres: compare ledgerd on PostgreSQL (1 and 2 replicas) with ledgerd on bbolt, medians of 3 runs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := bench.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "ledgerbench:", err)
		os.Exit(1)
	}
}
