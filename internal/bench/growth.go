package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"
	"gopkg.in/yaml.v3"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	s3store "github.com/pactledger/pactledger/storage/s3"
	"github.com/pactledger/pactledger/verifier"
)

// The growth run: one ledger grown in steps (to 1M, 3M and 10M rows by
// default), bulk-loaded between steps the way the read-side phase loads,
// and at each step ledgerd started on it and measured for a short window:
// served rows/s and p99, ListRows by order id, the dispute drill, and the
// bbolt file's bytes per row with its bucket stats.
//
// Bulk-loaded rows are in the state a row reaches once its evidence is in
// write-once storage and its leaf in the Merkle log: the row with its
// index entries, its request-JWT and expiry entries, the record of its
// evidence object (a real segment in S3, holding the bundle of the real
// row it copies), one more member counted for that segment, its leaf
// integrated into the tree and the log's tiles published. The row store
// keeps no bundle for them.

// growthTemplate is a real row recorded by the ledger, with where its
// evidence is held and its leaf.
type growthTemplate struct {
	row  *ledger.Row
	loc  ledger.Location
	leaf []byte
}

// grower is the growing ledger between its served windows.
type grower struct {
	dir     string
	cfg     config.Config // ledgerd's, with the bucket the evidence is in
	sc      *pacttest.Scenario
	tpl     []growthTemplate
	loaded  int // bulk-loaded rows so far
	written int // rows written through ledgerd so far
}

// inProcess opens the grower's ledger in this process, the Merkle log on
// with ledgerd's key, its evidence in ledgerd's bucket.
func (g *grower) inProcess(ctx context.Context) (*ledger.Ledger, *bolt.Store, error) {
	store, err := bolt.Open(filepath.Join(g.dir, "ledger.db"), bolt.Config{})
	if err != nil {
		return nil, nil, err
	}
	c := g.cfg.Evidence.S3
	objects, err := s3store.Open(ctx, s3store.Config{Endpoint: c.Endpoint, Bucket: c.Bucket, AccessKey: c.AccessKey, SecretKey: c.SecretKey, Insecure: c.Insecure, CreateBucket: true})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), g.sc.Brands(), g.sc.Agents())
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	v, _ := verifier.New(verifier.Config{Audience: g.sc.Audience, CheckedBy: "pactledger bench"})
	l, err := ledger.New(store, objects, v, reg, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	signer, _, _, err := config.EnsureLogKey(&g.cfg)
	if err == nil {
		err = l.EnableLog(ledger.LogConfig{Signer: signer, Interval: time.Duration(g.cfg.MerkleLog.Interval)})
	}
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return l, store, nil
}

// record writes n real rows through the ledger, uploads their evidence
// and integrates their leaves, and keeps them as templates.
func (g *grower) record(ctx context.Context, n int) error {
	l, store, err := g.inProcess(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	var ids []string
	for i := range n {
		r := g.sc.Mint(pacttest.Spec{User: "acct-t" + strconv.Itoa(i), GrantID: "a2agrant_t" + strconv.Itoa(i), Target: "T-" + strconv.Itoa(i)})
		row, _, err := l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
		if err != nil {
			return err
		}
		if row.Status != ledger.Authorized {
			return fmt.Errorf("template receipt %d: %v", i, row.Status)
		}
		ids = append(ids, row.ID)
	}
	if err := settle(ctx, l); err != nil {
		return err
	}
	var leafAt []int64
	err = store.View(ctx, func(tx ledger.Tx) error {
		for _, id := range ids {
			t := growthTemplate{}
			var err error
			if t.row, err = tx.Row(id); err != nil {
				return err
			}
			if t.loc, err = tx.Object(ledger.EvidenceKey(id)); err != nil {
				return fmt.Errorf("template %s not uploaded: %w", id, err)
			}
			idx, err := tx.LeafIndex(id)
			if err != nil {
				return err
			}
			g.tpl, leafAt = append(g.tpl, t), append(leafAt, idx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Through the ledger: a leaf of a full tile is in the tiles only.
	for i, idx := range leafAt {
		leaves, err := l.Leaves(ctx, idx, 1)
		if err != nil || len(leaves) != 1 {
			return fmt.Errorf("template %s: leaf %d: %d leaves, %w", ids[i], idx, len(leaves), err)
		}
		g.tpl[i].leaf = leaves[0]
	}
	return nil
}

// settle uploads every outbox entry, integrates every queued leaf,
// publishes the log's tiles and drops the published full tiles from the
// row store, as ledgerd's uploader and integrator do. A bulk load drops
// them all at once, and compacts the file after: ledgerd drops no faster
// than its writes reuse the pages freed.
func settle(ctx context.Context, l *ledger.Ledger) error {
	for {
		n, err := l.UploadRound(ctx, 512, 8)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	if _, err := l.Integrate(ctx); err != nil {
		return err
	}
	if err := l.PublishTiles(ctx); err != nil {
		return err
	}
	_, err := l.PruneAllPublished(ctx, nil)
	return err
}

// growthRow is bulk-loaded row i: a copy of a template under a new id,
// order id (two rows an order id), time and request-JWT hash. Its receipt
// hash stays the template's, which its evidence (the template's bundle)
// hashes to.
func (g *grower) growthRow(i int) (*ledger.Row, growthTemplate) {
	t := g.tpl[i%len(g.tpl)]
	r := *t.row
	r.ID = fmt.Sprintf("%064x", uint64(i)*0x9E3779B97F4A7C15+1)
	// Within the template's token lifetime, so the grant pull holds.
	r.IssuedAt = t.row.IssuedAt.Add(time.Duration(i%3000) * 10 * time.Millisecond)
	r.Actions = append([]verifier.RowAction(nil), t.row.Actions...)
	r.Actions[0].Target = "L-" + strconv.Itoa(i/2)
	sum := sha256.Sum256([]byte("request " + r.ID))
	r.RequestJWTSHA256 = hex.EncodeToString(sum[:])
	return &r, t
}

// load bulk-loads rows until upTo are loaded, then integrates their
// leaves.
func (g *grower) load(ctx context.Context, upTo int) error {
	if upTo <= g.loaded {
		return nil
	}
	l, store, err := g.inProcess(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	const batch = 20000
	for g.loaded < upTo {
		end := min(g.loaded+batch, upTo)
		err := store.Update(ctx, func(tx ledger.Tx) error {
			for i := g.loaded; i < end; i++ {
				r, t := g.growthRow(i)
				if err := ledger.AddRow(tx, r); err != nil {
					return err
				}
				if _, err := tx.Count(ledger.RefSegment, t.loc.Key, 1); err != nil {
					return err
				}
				if err := tx.SetObject(ledger.EvidenceKey(r.ID), t.loc); err != nil {
					return err
				}
				if err := tx.QueueLeaf(r.ID, []byte(strings.Replace(string(t.leaf), t.row.ID, r.ID, 1))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		g.loaded = end
	}
	// A ledger grown by served rows publishes its tiles as its leaves are
	// integrated: so does the bulk load, or the next window would spend
	// itself publishing the whole backlog. (The loaded rows queue no
	// uploads.)
	if err := settle(ctx, l); err != nil {
		return err
	}
	if err := store.Close(); err != nil {
		return err
	}
	// Transactions of 20,000 rows leave the pages their last commits freed
	// (a quarter of the file), a free list every later commit would write
	// and sort; a ledger grown by ordinary commits has a small one.
	return bolt.CompactFile(filepath.Join(g.dir, "ledger.db"), 0)
}

// start starts ledgerd on the grower's data directory, on new ports.
func (g *grower) start(ctx context.Context, bin string, s3 *s3test.Server, env []string) (*daemon, error) {
	return withFreshPorts(func() (*daemon, error) {
		var err error
		if g.cfg.Listen.GRPC, err = freeAddr(); err != nil {
			return nil, err
		}
		if g.cfg.Listen.HTTP, err = freeAddr(); err != nil {
			return nil, err
		}
		raw, err := yaml.Marshal(g.cfg)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(g.dir, "ledgerd.yaml")
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return nil, err
		}
		return startLedgerdAt(ctx, bin, path, g.cfg, s3, env)
	})
}

// growthStep is what one step measured.
type growthStep struct {
	rows         int
	loadTime     time.Duration
	served       *result
	commits      counters // the window's group commits
	list, drills *result
	passed, all  int
	file         fileStats
	load         string
	atRest       memStat       // after the window's outbox drained and the reads
	filterWait   time.Duration // from ledgerd ready to its key filter built (-1: not within the limit)
}

// runGrowth grows one ledger through cfg.GrowthSteps and measures each
// step; corpus supplies the served windows' receipts (each step posts the
// next part of it).
func runGrowth(ctx context.Context, bin, work string, sc *pacttest.Scenario, s3 *s3test.Server, corpus []*ledgerv1.AppendReceiptRequest, unit verifyUnit, cfg Config) error {
	w := cfg.Out
	dir := filepath.Join(work, "growth")
	lcfg, err := ledgerdConfig(dir, sc, s3)
	if err != nil {
		return err
	}
	g := &grower{dir: dir, cfg: lcfg, sc: sc}
	fmt.Fprintf(w, "\ngrowth run: steps %v rows, a %s window of %d in flight over gRPC at each (sessions corpus), then %d ListRows and %d dispute drills\n",
		cfg.GrowthSteps, cfg.GrowthWindow, cfg.Concurrency, cfg.GrowthQueries, cfg.GrowthDrills)
	if err := g.record(ctx, 1000); err != nil {
		return fmt.Errorf("growth templates: %w", err)
	}
	per := len(corpus) / growthSlices(cfg)
	part := func(i int) []*ledgerv1.AppendReceiptRequest { return corpus[i*per : (i+1)*per] }
	var steps []growthStep
	for i, n := range cfg.GrowthSteps {
		t0 := time.Now()
		if err := g.load(ctx, n); err != nil {
			return fmt.Errorf("growth: load to %d rows: %w", n, err)
		}
		st, err := g.serve(ctx, bin, s3, part(i), cfg, true)
		if err != nil {
			return fmt.Errorf("growth at %d rows: %w", n, err)
		}
		st.loadTime = time.Since(t0) - cfg.GrowthWindow
		steps = append(steps, st)
		printGrowthStep(w, st, unit, cfg)
	}
	printGrowthSummary(w, steps)
	if len(steps) < 2 {
		return os.RemoveAll(dir)
	}
	// The machine changes over the hour of loading (other work, the page
	// cache), and from one 30-s window to the next: the last step's size
	// and an empty ledger are measured in turn, pairs of windows side by
	// side, and compared by their medians. The order turns from one pair
	// to the next (growthOrder), so that a machine speeding up or slowing
	// down over the pairs favours neither side. Each empty ledger is a new
	// one (the same receipts, posted to a ledger that has not seen them);
	// each window at the last size posts receipts of its own.
	last := steps[len(steps)-1]
	grown, grownCommits := []*result{last.served}, []counters{last.commits}
	var empty []*result
	var emptyCommits []counters
	pairs := max(cfg.GrowthPairs, 1)
	order := growthOrder(pairs)
	for k, atLast := range order[1:] {
		if atLast {
			st, err := g.serve(ctx, bin, s3, part(len(steps)+len(grown)-1), cfg, false)
			if err != nil {
				return fmt.Errorf("growth at %d rows again: %w", last.rows, err)
			}
			grown, grownCommits = append(grown, st.served), append(grownCommits, st.commits)
			fmt.Fprintf(w, "\nat %d rows again (load average %s; key filter built %s after ledgerd was ready): %.0f rows/s, p99 %s, %.2f verifications per row\n",
				g.rows(), st.load, st.filterWait, st.served.rate, st.served.p(99), unit.units(st.served.cpuPerRow().Seconds()))
			st.served.printWritten(w)
			st.served.printKernel(w)
			st.commits.printCommits(w, st.served.elapsed.Seconds(), st.served.ok)
			st.commits.printAllocs(w, st.served.ok)
			continue
		}
		refDir := filepath.Join(work, fmt.Sprintf("growth-reference-%d", len(empty)+1))
		rcfg, err := ledgerdConfig(refDir, sc, s3)
		if err != nil {
			return err
		}
		ref := &grower{dir: refDir, cfg: rcfg, sc: sc}
		if err := ref.record(ctx, 1000); err != nil {
			return fmt.Errorf("growth reference: %w", err)
		}
		rs, err := ref.serve(ctx, bin, s3, part(len(steps)+pairs-1), cfg, false)
		if err != nil {
			return fmt.Errorf("growth reference: %w", err)
		}
		empty, emptyCommits = append(empty, rs.served), append(emptyCommits, rs.commits)
		when := "right after"
		if k+2 < len(order) && order[k+2] {
			when = "right before the next window at that size"
		}
		fmt.Fprintf(w, "\nan empty ledger again, %s (load average %s; key filter built %s after ledgerd was ready): %.0f rows/s, p99 %s, %.2f verifications per row\n",
			when, rs.load, rs.filterWait, rs.served.rate, rs.served.p(99), unit.units(rs.served.cpuPerRow().Seconds()))
		rs.served.printWritten(w)
		rs.served.printKernel(w)
		rs.commits.printCommits(w, rs.served.elapsed.Seconds(), rs.served.ok)
		rs.commits.printAllocs(w, rs.served.ok)
		if err := os.RemoveAll(refDir); err != nil {
			return err
		}
	}
	printGrowthPairs(w, last.rows, grown, empty)
	printGrowthCommits(w, grown, empty, grownCommits, emptyCommits)
	return os.RemoveAll(dir)
}

// growthOrder is the order of the windows that compare the last step's
// size with an empty ledger, pairs of them: true for a window at the last
// size, false for an empty ledger. The first is the last step's own
// window; the order within a pair turns from one pair to the next
// (grown, empty; empty, grown; grown, empty; ...).
func growthOrder(pairs int) []bool {
	var out []bool
	for i := range pairs {
		out = append(out, i%2 == 0, i%2 == 1)
	}
	return out
}

// growthSlices is how many parts the growth run's corpus is cut into: one
// for each step, one for each further window at the last step's size, and
// one that every empty ledger is served.
func growthSlices(cfg Config) int {
	return len(cfg.GrowthSteps) + max(cfg.GrowthPairs, 1)
}

// printGrowthPairs compares the windows at the last step's size with the
// empty ledgers measured between them: each pair's ratios and the medians'.
func printGrowthPairs(w io.Writer, rows int, grown, empty []*result) {
	var gr, er, gc, ec, rateRatio, cpuRatio []float64
	for i := range empty {
		g, e := grown[i], empty[i]
		gr, er = append(gr, g.rate), append(er, e.rate)
		gc, ec = append(gc, g.cpuPerRow().Seconds()), append(ec, e.cpuPerRow().Seconds())
		rateRatio = append(rateRatio, g.rate/max(e.rate, 1))
		cpuRatio = append(cpuRatio, g.cpuPerRow().Seconds()/max(e.cpuPerRow().Seconds(), 1e-9))
	}
	fmt.Fprintf(w, "\nthe last step (%d rows and more) against an empty ledger, %d pairs of windows side by side:\n", rows, len(empty))
	for i := range empty {
		fmt.Fprintf(w, "  pair %d: %.0f against %.0f rows/s = %.2f of the rate, %.2f of the CPU per row\n", i+1, gr[i], er[i], rateRatio[i], cpuRatio[i])
	}
	fmt.Fprintf(w, "  medians: %.0f against %.0f rows/s = %.2f of the rate (median of the pairs' ratios %.2f), %.2f of the CPU per row (pairs' %.2f)\n",
		medianOf(gr), medianOf(er), medianOf(gr)/max(medianOf(er), 1), medianOf(rateRatio), medianOf(gc)/max(medianOf(ec), 1e-9), medianOf(cpuRatio))
	printUsageMedians(w, grown[:len(empty)], empty)
}

// printUsageMedians compares where ledgerd's CPU a row went in the
// windows at the last size and on the empty ledgers: its own code and
// the kernel, and the page faults a row, as medians. Nothing when a
// window has no split.
func printUsageMedians(w io.Writer, grown, empty []*result) {
	type fig struct{ user, sys, minflt, majflt []float64 }
	read := func(rs []*result) (f fig, ok bool) {
		for _, r := range rs {
			u, n := r.usage, float64(r.ok)
			if n == 0 || u.user+u.sys <= 0 {
				return f, false
			}
			f.user, f.sys = append(f.user, 1e6*u.user/n), append(f.sys, 1e6*u.sys/n)
			f.minflt, f.majflt = append(f.minflt, u.minflt/n), append(f.majflt, u.majflt/n)
		}
		return f, len(rs) > 0
	}
	g, gok := read(grown)
	e, eok := read(empty)
	if !gok || !eok {
		return
	}
	fmt.Fprintf(w, "  ledgerd's CPU a row, medians: in its own code %.0f against %.0f µs, in the kernel %.0f against %.0f µs; page faults a row %.2f against %.2f minor, %.3f against %.3f major\n",
		medianOf(g.user), medianOf(e.user), medianOf(g.sys), medianOf(e.sys), medianOf(g.minflt), medianOf(e.minflt), medianOf(g.majflt), medianOf(e.majflt))
}

// printGrowthCommits compares the group commits of the same windows as
// printGrowthPairs: the commits' µs a row, the disk's part of them
// (bbolt writing and syncing pages), and how busy the committer was, as
// medians over the windows at the last step's size and over the empty
// ledgers. A committer busy most of a window bounds the rate, whatever
// the CPU left. Nothing from a ledgerd without these metrics.
func printGrowthCommits(w io.Writer, grown, empty []*result, gc, ec []counters) {
	type fig struct{ commit, disk, busy []float64 }
	read := func(rs []*result, cs []counters) (f fig, ok bool) {
		for i, c := range cs {
			r := rs[i]
			if c.commitSeconds < 0 || c.diskSeconds < 0 || r.ok == 0 || r.elapsed <= 0 {
				return f, false
			}
			f.commit = append(f.commit, 1e6*c.commitSeconds/float64(r.ok))
			f.disk = append(f.disk, 1e6*c.diskSeconds/float64(r.ok))
			f.busy = append(f.busy, 100*c.commitSeconds/r.elapsed.Seconds())
		}
		return f, len(cs) > 0
	}
	g, gok := read(grown, gc)
	e, eok := read(empty, ec)
	if !gok || !eok {
		return
	}
	fmt.Fprintf(w, "  the commits, medians: %.0f against %.0f µs a row, of it writing and syncing pages %.0f against %.0f µs; the committer busy %.0f %% against %.0f %% of the window\n",
		medianOf(g.commit), medianOf(e.commit), medianOf(g.disk), medianOf(e.disk), medianOf(g.busy), medianOf(e.busy))
}

// rows is how many rows the grown ledger holds.
func (g *grower) rows() int { return len(g.tpl) + g.loaded + g.written }

// serve starts ledgerd on the grown ledger and serves a window; with
// reads, it then times ListRows and drills, and after ledgerd stopped
// reads the file's bucket stats. The outbox is drained before it stops.
func (g *grower) serve(ctx context.Context, bin string, s3 *s3test.Server, corpus []*ledgerv1.AppendReceiptRequest, cfg Config, reads bool) (growthStep, error) {
	st := growthStep{}
	d, err := g.start(ctx, bin, s3, cfg.LedgerdEnv)
	if err != nil {
		return st, err
	}
	defer d.stop()
	// The window measures the served rate, not the start: it begins once
	// the store's key filter is built (docs/design/020).
	st.filterWait = d.waitKeyFilter(5 * time.Minute)
	c0 := d.counters()
	if st.served, err = d.measure(ctx, corpus, cfg.Concurrency, cfg.GrowthWindow, 0, d.grpcAppend(nil)); err != nil {
		return st, err
	}
	st.commits = d.counters().since(c0)
	st.load = loadAvg()
	g.written += st.served.ok
	if reads {
		st.list, st.drills, st.passed, st.all = queryReadSide(ctx, d, g.loaded/2, cfg.GrowthQueries, cfg.GrowthDrills)
	}
	d.waitDrained(2 * time.Minute)
	st.atRest = procMem(d.pid)
	d.stop()
	st.rows = g.rows()
	if reads {
		st.file, err = readFileStats(filepath.Join(g.dir, "ledger.db"))
	}
	return st, err
}

// queryReadSide times ListRows by order id and dispute drills over gRPC on
// order ids L-0 to L-(targets-1), two rows each.
func queryReadSide(ctx context.Context, d *daemon, targets, queries, drills int) (list, drill *result, passed, total int) {
	list, drill = &result{}, &result{}
	if targets == 0 {
		return list, drill, 0, 0
	}
	client := ledgerv1.NewLedgerServiceClient(d.conns[0])
	rctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readerKey)
	sctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+supportKey)
	rnd := rand.New(rand.NewPCG(5, 6))
	t0 := time.Now()
	for range queries {
		q0 := time.Now()
		rep, err := client.ListRows(rctx, &ledgerv1.ListRowsRequest{Target: "L-" + strconv.Itoa(rnd.IntN(targets))})
		if err != nil || len(rep.GetRows()) != 2 {
			list.errors++
			continue
		}
		list.lat = append(list.lat, time.Since(q0))
		list.ok++
	}
	list.rate = float64(list.ok) / time.Since(t0).Seconds()
	for range drills {
		q0 := time.Now()
		rep, err := client.RunDrill(sctx, &ledgerv1.RunDrillRequest{Target: "L-" + strconv.Itoa(rnd.IntN(targets))})
		if err != nil {
			drill.errors++
			continue
		}
		drill.lat = append(drill.lat, time.Since(q0))
		drill.ok++
		passed += int(rep.GetReport().GetChecksPassed())
		total += int(rep.GetReport().GetChecksTotal())
	}
	return list, drill, passed, total
}

func printGrowthStep(w io.Writer, st growthStep, unit verifyUnit, cfg Config) {
	s := st.served
	fmt.Fprintf(w, "\ngrowth step, %d rows in the file (loaded in %s; load average %s; key filter built %s after ledgerd was ready):\n", st.rows, st.loadTime.Round(time.Second), st.load, st.filterWait)
	fmt.Fprintf(w, "  served: %.0f rows/s, p50 %s, p99 %s, errors %d; ledgerd CPU %.2f cores = %.2f verifications per row (%s each); memory %s\n",
		s.rate, s.p(50), s.p(99), s.errors, s.cpu, unit.units(s.cpuPerRow().Seconds()), us(unit.median()), s.mem)
	s.printWritten(w)
	s.printKernel(w)
	st.commits.printCommits(w, s.elapsed.Seconds(), s.ok)
	st.commits.printAllocs(w, s.ok)
	fmt.Fprintf(w, "  memory at rest (outbox drained, after the reads): %s\n", st.atRest)
	fmt.Fprintf(w, "  ListRows by order id: p50 %s, p99 %s (%d queries, errors %d); dispute drill: p50 %s, p99 %s, max %s (%d drills, %d/%d pulls passed, errors %d)\n",
		st.list.p(50), st.list.p(99), st.list.ok, st.list.errors, st.drills.p(50), st.drills.p(99), st.drills.p(100), st.drills.ok, st.passed, st.all, st.drills.errors)
	st.file.print(w, st.rows)
}

func printGrowthSummary(w io.Writer, steps []growthStep) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintf(w, "\ngrowth summary (served window at each size; rate relative to the first step):\n")
	fmt.Fprintf(w, "| rows | rows/s | vs first | p99 | ListRows p99 | drill p99 | bbolt file (pages used) | bytes per row | load avg |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, st := range steps {
		fmt.Fprintf(w, "| %d | %.0f | %.2f | %s | %s | %s | %s (%s) | %.0f | %s |\n", st.rows, st.served.rate, st.served.rate/max(steps[0].served.rate, 1),
			st.served.p(99), st.list.p(99), st.drills.p(99), mib(st.file.size), mib(st.file.used), float64(st.file.used)/float64(max(st.rows, 1)), st.load)
	}
}
