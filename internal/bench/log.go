package bench

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// The Merkle log's figures: write throughput with the log on against off
// (in-process, alternating runs on fresh stores), commit-to-checkpoint
// latency at an offered rate (served), proof serving at a large tree, and
// the bytes of tiles per row.

// inProcess is a ledger on a fresh bbolt file with a local evidence
// directory.
type inProcess struct {
	l       *ledger.Ledger
	store   *bolt.Store
	objects *localdir.Store
	dir     string
}

func newInProcess(sc *pacttest.Scenario, dir string) (*inProcess, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	store, err := bolt.Open(filepath.Join(dir, "ledger.db"), bolt.Config{})
	if err != nil {
		return nil, err
	}
	objects, err := localdir.Open(filepath.Join(dir, "evidence"))
	if err != nil {
		store.Close()
		return nil, err
	}
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		store.Close()
		return nil, err
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience, CheckedBy: "pactledger bench"})
	l, err := ledger.New(store, objects, v, reg, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		store.Close()
		return nil, err
	}
	return &inProcess{l: l, store: store, objects: objects, dir: dir}, nil
}

func (p *inProcess) append(ctx context.Context, req *ledgerv1.AppendReceiptRequest) error {
	a := req.GetActions()[0]
	_, _, err := p.l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: req.GetReceiptJws(), RequestJWT: req.GetRequestJwt(), DelegationToken: req.GetDelegationToken(),
		Actions: []verifier.Action{{Tool: a.GetTool(), Target: a.GetTarget(), ArgsJSON: a.GetArgsJson()}}})
	return err
}

// enableLog turns the log on with the origin and key ledgerd would use for
// a data directory dir (created there when missing).
func (p *inProcess) enableLog(dir string, maxBatch int) error {
	c := config.Default()
	c.DataDir = dir
	signer, _, _, err := config.EnsureLogKey(&c)
	if err != nil {
		return err
	}
	return p.l.EnableLog(ledger.LogConfig{Signer: signer, Interval: time.Duration(c.MerkleLog.Interval), MaxBatch: maxBatch})
}

// tileBytes sums the sizes of the log's objects under dir: hash tiles
// (full and partial), entry bundles (full and partial) and checkpoints.
type tileBytes struct {
	full, partial, entriesFull, entriesPartial, checkpoints int64
}

func measureTiles(dir string) (tileBytes, error) {
	var b tileBytes
	root := filepath.Join(dir, filepath.FromSlash(ledger.LogPrefix))
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		partial := strings.Contains(rel, ".p/")
		switch {
		case strings.HasPrefix(rel, "tile/entries/") && partial:
			b.entriesPartial += info.Size()
		case strings.HasPrefix(rel, "tile/entries/"):
			b.entriesFull += info.Size()
		case strings.HasPrefix(rel, "tile/") && partial:
			b.partial += info.Size()
		case strings.HasPrefix(rel, "tile/"):
			b.full += info.Size()
		default:
			b.checkpoints += info.Size()
		}
		return nil
	})
	return b, err
}

// logThroughput is one in-process run: rows/s with the log on or off.
type logThroughput struct {
	on     bool
	rate   float64
	leaves int64
	tiles  tileBytes
}

// runLogThroughput alternates in-process runs with the log off and on
// (off-on, on-off, ...), each on a fresh store with the same receipts, and
// returns them in the order run. With the log on the integrator runs as
// in ledgerd (500 ms) and publishes tiles to the evidence directory.
func runLogThroughput(ctx context.Context, sc *pacttest.Scenario, corpus []*ledgerv1.AppendReceiptRequest, work string, cfg Config) ([]logThroughput, error) {
	var out []logThroughput
	for pair := range cfg.LogPairs {
		order := []bool{false, true}
		if pair%2 == 1 {
			order = []bool{true, false}
		}
		for _, on := range order {
			r, err := oneLogRun(ctx, sc, corpus, filepath.Join(work, fmt.Sprintf("log-%d-%v", pair, on)), on, cfg)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func oneLogRun(ctx context.Context, sc *pacttest.Scenario, corpus []*ledgerv1.AppendReceiptRequest, dir string, on bool, cfg Config) (logThroughput, error) {
	p, err := newInProcess(sc, dir)
	if err != nil {
		return logThroughput{}, err
	}
	defer os.RemoveAll(dir)
	defer p.store.Close()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if on {
		if err := p.enableLog(dir, 0); err != nil {
			stop()
			return logThroughput{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.l.RunIntegrator(runCtx)
		}()
	}
	res, err := drive(ctx, corpus, cfg.Concurrency, cfg.LogRunFor, 0, p.append)
	stop()
	wg.Wait()
	if err != nil {
		return logThroughput{}, err
	}
	r := logThroughput{on: on, rate: res.rate}
	if on {
		// What the integrator had not reached when the load stopped.
		if _, err := p.l.Integrate(ctx); err != nil {
			return r, err
		}
		if err := p.l.PublishTiles(ctx); err != nil {
			return r, err
		}
		if r.leaves, err = p.l.TreeSize(ctx); err != nil {
			return r, err
		}
		if r.tiles, err = measureTiles(filepath.Join(dir, "evidence")); err != nil {
			return r, err
		}
	}
	return r, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printLogThroughput(cfg Config, runs []logThroughput) {
	w := cfg.Out
	fmt.Fprintf(w, "\nwrite throughput with the Merkle log on and off (in-process: verify + durable bbolt commit, %d in flight, %s per run, fresh store each, alternating):\n", cfg.Concurrency, cfg.LogRunFor)
	var ratios, offs, ons []float64
	for i := 0; i+1 < len(runs); i += 2 {
		a, b := runs[i], runs[i+1]
		off, on := a, b
		if a.on {
			off, on = b, a
		}
		ratio := on.rate / off.rate
		ratios, offs, ons = append(ratios, ratio), append(offs, off.rate), append(ons, on.rate)
		fmt.Fprintf(w, "  pair %d: off %.0f rows/s, on %.0f rows/s, on/off %.3f\n", i/2+1, off.rate, on.rate, ratio)
	}
	fmt.Fprintf(w, "  median: off %.0f rows/s, on %.0f rows/s, on/off %.3f (target >= 0.90)\n", median(offs), median(ons), median(ratios))
	// Tile bytes per row of the run with the median total.
	var on []logThroughput
	for _, r := range runs {
		if r.on && r.leaves > 0 {
			on = append(on, r)
		}
	}
	if len(on) == 0 {
		return
	}
	slices.SortFunc(on, func(a, b logThroughput) int { return cmp.Compare(a.perRow(), b.perRow()) })
	r := on[len(on)/2]
	n, t := float64(r.leaves), r.tiles
	fmt.Fprintf(w, "  tile bytes per row (median of %d runs; %d leaves, tiles published every 500 ms): hash tiles %.1f B full + %.1f B partial, entry bundles %.0f B full + %.0f B partial, checkpoints %.1f B; all %.0f B (runs: %.0f to %.0f B)\n",
		len(on), r.leaves, float64(t.full)/n, float64(t.partial)/n, float64(t.entriesFull)/n, float64(t.entriesPartial)/n, float64(t.checkpoints)/n,
		r.perRow(), on[0].perRow(), on[len(on)-1].perRow())
}

// perRow is the log's bytes in write-once storage per leaf.
func (r logThroughput) perRow() float64 {
	t := r.tiles
	return float64(t.full+t.partial+t.entriesFull+t.entriesPartial+t.checkpoints) / float64(max(r.leaves, 1))
}

// ack is an acknowledged write: its row id and when the client had it.
type ack struct {
	id string
	at time.Time
}

// seenCheckpoint is a tree size and when a client first saw it.
type seenCheckpoint struct {
	size int64
	at   time.Time
}

// watchCheckpoints polls GetCheckpoint every poll until stop is called and
// returns each new size with when it was first seen.
func (d *daemon) watchCheckpoints(ctx context.Context, poll time.Duration) (stop func() []seenCheckpoint) {
	client := ledgerv1.NewLedgerServiceClient(d.conns[len(d.conns)-1])
	ctx, cancel := context.WithCancel(ctx)
	var seen []seenCheckpoint
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(poll)
		defer t.Stop()
		for {
			rep, err := client.GetCheckpoint(ctx, &ledgerv1.GetCheckpointRequest{})
			if err == nil && (len(seen) == 0 || rep.GetSize() > seen[len(seen)-1].size) {
				seen = append(seen, seenCheckpoint{size: rep.GetSize(), at: time.Now()})
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() []seenCheckpoint {
		cancel()
		<-done
		return seen
	}
}

// inclusion returns, for each acknowledged row, the time from its
// acknowledgement to the first checkpoint seen that includes its leaf. It
// asks for each row's leaf index (waiting for the last rows to be logged)
// while the watcher runs.
func (d *daemon) inclusion(ctx context.Context, acks []ack, stopWatch func() []seenCheckpoint) (*result, error) {
	client := ledgerv1.NewLedgerServiceClient(d.conns[0])
	rctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readerKey)
	index := make([]int64, len(acks))
	deadline := time.Now().Add(time.Minute)
	for i, a := range acks {
		for {
			rep, err := client.GetRowProof(rctx, &ledgerv1.GetRowProofRequest{Id: a.id})
			if err == nil {
				index[i] = rep.GetLeafIndex()
				break
			}
			if time.Now().After(deadline) {
				stopWatch()
				return nil, fmt.Errorf("row %s not logged a minute after the load: %w", a.id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	seen := stopWatch()
	res := &result{}
	for i, a := range acks {
		j, _ := slices.BinarySearchFunc(seen, index[i]+1, func(s seenCheckpoint, size int64) int {
			switch {
			case s.size < size:
				return -1
			case s.size > size:
				return 1
			}
			return 0
		})
		if j == len(seen) {
			res.errors++
			continue
		}
		res.lat = append(res.lat, max(seen[j].at.Sub(a.at), 0))
		res.ok++
	}
	return res, nil
}

// runProofs builds a tree of cfg.LogLeaves leaves (one real row, the rest
// synthetic leaves of the same shape queued through the store as rows'
// transactions queue them), publishes its tiles to a local directory,
// times proofs in process, then starts ledgerd on the file and times
// GetRowProof over gRPC.
func runProofs(ctx context.Context, bin, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server, real *ledgerv1.AppendReceiptRequest, cfg Config) error {
	w := cfg.Out
	fmt.Fprintf(w, "\nbuilding a Merkle log of %d leaves for the proof phase...\n", cfg.LogLeaves)
	p, err := newInProcess(sc, dataDir)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			p.store.Close()
		}
	}()
	if err := p.enableLog(dataDir, 0); err != nil {
		return err
	}
	if err := p.append(ctx, real); err != nil {
		return err
	}
	var tpl ledger.PendingLeaf
	if err := p.store.View(ctx, func(tx ledger.Tx) error {
		pl, err := tx.PendingLeaves(1)
		if err != nil || len(pl) != 1 {
			return fmt.Errorf("the real row's leaf: %v", err)
		}
		tpl = pl[0]
		return nil
	}); err != nil {
		return err
	}
	refs := make([]string, cfg.LogLeaves)
	refs[0] = tpl.Ref
	t0 := time.Now()
	const batch = 20000
	for start := 1; start < cfg.LogLeaves; start += batch {
		err := p.store.Update(ctx, func(tx ledger.Tx) error {
			for i := start; i < min(start+batch, cfg.LogLeaves); i++ {
				refs[i] = fmt.Sprintf("%064x", uint64(i)*0x9E3779B97F4A7C15+1)
				if err := tx.QueueLeaf(refs[i], []byte(strings.Replace(string(tpl.Data), "\nrow "+tpl.Ref+"\n", "\nrow "+refs[i]+"\n", 1))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	queued := time.Since(t0)
	t1 := time.Now()
	n, err := p.l.Integrate(ctx)
	if err != nil {
		return err
	}
	integrated := time.Since(t1)
	t2 := time.Now()
	if err := p.l.PublishTiles(ctx); err != nil {
		return err
	}
	published := time.Since(t2)
	tb, err := measureTiles(filepath.Join(dataDir, "evidence"))
	if err != nil {
		return err
	}
	st, _ := os.Stat(filepath.Join(dataDir, "ledger.db"))
	fmt.Fprintf(w, "  queued in %s, integrated %d leaves in %s (%.0f leaves/s), tiles published to a local directory in %s; bbolt file %s\n",
		queued.Round(time.Millisecond), n, integrated.Round(time.Millisecond), float64(n)/integrated.Seconds(), published.Round(time.Millisecond), mib(st.Size()))
	fmt.Fprintf(w, "  tile bytes per leaf of the whole tree, once: hash tiles %.2f B, entry bundles %.0f B (leaf %d B + 2)\n",
		float64(tb.full+tb.partial)/float64(n), float64(tb.entriesFull+tb.entriesPartial)/float64(n), len(tpl.Data))

	rnd := rand.New(rand.NewPCG(3, 4))
	local := &result{}
	for range cfg.ProofQueries {
		q0 := time.Now()
		if _, err := p.l.Proof(ctx, refs[rnd.IntN(len(refs))]); err != nil {
			local.errors++
			continue
		}
		local.lat = append(local.lat, time.Since(q0))
		local.ok++
	}
	fmt.Fprintf(w, "  ledger.Proof in process with %d leaves: p50 %s, p99 %s (%d proofs, errors %d)\n", n, local.p(50), local.p(99), local.ok, local.errors)
	if err := p.store.Close(); err != nil {
		return err
	}
	closed = true

	d, err := startLedgerdOn(ctx, bin, dataDir, sc, s3)
	if err != nil {
		return err
	}
	defer d.stop()
	client := ledgerv1.NewLedgerServiceClient(d.conns[0])
	rctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readerKey)
	served := &result{}
	t3 := time.Now()
	for range cfg.ProofQueries {
		q0 := time.Now()
		rep, err := client.GetRowProof(rctx, &ledgerv1.GetRowProofRequest{Id: refs[rnd.IntN(len(refs))]})
		if err != nil || rep.GetBundle() == "" {
			served.errors++
			continue
		}
		served.lat = append(served.lat, time.Since(q0))
		served.ok++
	}
	served.rate = float64(served.ok) / time.Since(t3).Seconds()
	fmt.Fprintf(w, "GetRowProof over gRPC with %d leaves: p50 %s, p99 %s, max %s (%d proofs, %.0f/s one at a time, errors %d)\n",
		n, served.p(50), served.p(99), served.p(100), served.ok, served.rate, served.errors)
	return nil
}
