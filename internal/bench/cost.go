package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The cost of a row in units of one signature check: ledgerd's CPU per
// verified durable row divided by one P-256 verification measured in the
// same run, for each way a writer reaches it (gRPC, the REST gateway) and
// each shape of traffic (a delegation token per session of turns, or one
// per row).

// makeSessionCorpus signs n receipts in sessions of turns turns, each
// session one user and grant with one delegation token sent with every
// turn. active sessions take turns in rotation, so consecutive turns of a
// session are active rows apart, as concurrent conversations interleave.
func makeSessionCorpus(sc *pacttest.Scenario, n, turns, active int) []*ledgerv1.AppendReceiptRequest {
	out := make([]*ledgerv1.AppendReceiptRequest, n)
	block := turns * active
	sessions := (n + block - 1) / block * active
	base := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	var wg sync.WaitGroup
	workers := runtime.NumCPU()
	for wi := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := wi; s < sessions; s += workers {
				mintSession(sc, out, s, turns, active, base)
			}
		}()
	}
	wg.Wait()
	return out
}

// mintSession signs session s's turns into their places in out.
func mintSession(sc *pacttest.Scenario, out []*ledgerv1.AppendReceiptRequest, s, turns, active int, base time.Time) {
	first := (s/active)*turns*active + s%active
	var token string
	for k := range turns {
		i := first + k*active
		if i >= len(out) {
			return
		}
		r := sc.Mint(pacttest.Spec{Target: "S-" + strconv.Itoa(i), User: "sess-" + strconv.Itoa(s), GrantID: "a2agrant_s" + strconv.Itoa(s), At: base.Add(time.Duration(i) * time.Millisecond)})
		if k == 0 {
			token = r.DelegationToken
		}
		out[i] = &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: token,
			Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
	}
}

// transport is how the benchmark's writers reach ledgerd.
type transport string

const (
	viaGRPC transport = "gRPC"
	viaREST transport = "REST"
)

// scenario is one served measurement: a corpus, a transport, and either
// conc requests in flight (rate 0) or rate rows/s offered.
type scenario struct {
	name string
	via  transport
	// batch, above zero, posts the corpus in AppendReceipts calls of that
	// many receipts (over gRPC).
	batch int
	// stream posts the corpus on AppendReceiptStream, a receipt a message
	// (over gRPC).
	stream bool
	corpus []*ledgerv1.AppendReceiptRequest
	// ceiling is the in-process run on the same corpus of the ledger as
	// ledgerd runs it, bare the rate of the ledger's alone (verify +
	// durable commit), both measured in the same run; the served rate is
	// compared with each, and the served row's CPU with the ceiling's.
	// With paired ceilings (paired, Config.PairedCeilings) ceiling is the
	// one run just before the scenario and first the rate of the one at
	// the run's start; otherwise the two are the same. bare is always the
	// one at the run's start.
	ceiling     *result
	first, bare float64
	paired      bool
}

// servedEnv is what every served scenario needs: the ledgerd binary, a
// work directory for fresh data directories, the scenario's keys and S3.
type servedEnv struct {
	bin  string
	work string
	sc   *pacttest.Scenario
	s3   *s3test.Server
	env  []string // added to ledgerd's environment
	n    int      // data directories made so far
	// clientProfile, when set, is where the load generator's CPU profile
	// of each served scenario goes (Config.ClientCPUProfile).
	clientProfile string
	// restFor, when set, is how long ledgerd is left at rest after each
	// served scenario before its memory is read again (Config.RestFor).
	restFor time.Duration
}

// fresh starts ledgerd on an empty data directory and S3 bucket, so that
// each scenario can post the same corpus from the start.
func (e *servedEnv) fresh(ctx context.Context) (*daemon, error) {
	e.n++
	return startLedgerdEnv(ctx, e.bin, filepath.Join(e.work, "served-"+strconv.Itoa(e.n)), e.sc, e.s3, e.env)
}

// call returns the function that posts one request through via.
func (d *daemon) call(via transport, onAck func(id string)) func(context.Context, *ledgerv1.AppendReceiptRequest) error {
	if via == viaREST {
		return d.restAppend(onAck)
	}
	return d.grpcAppend(onAck)
}

// restAppend posts through the REST gateway with the generated message's
// JSON encoding, keeping up to 256 connections alive.
func (d *daemon) restAppend(onAck func(id string)) func(context.Context, *ledgerv1.AppendReceiptRequest) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}, Timeout: time.Minute}
	url := "http://" + d.httpAddr + "/v1/receipts"
	return func(ctx context.Context, req *ledgerv1.AppendReceiptRequest) error {
		body, err := protojson.Marshal(req)
		if err != nil {
			return err
		}
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Authorization", "Bearer "+writerKey)
		resp, err := client.Do(hreq)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return err
		}
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, rb)
		}
		if onAck != nil {
			var rep ledgerv1.AppendReceiptResponse
			if err := protojson.Unmarshal(rb, &rep); err != nil {
				return err
			}
			onAck(rep.GetRow().GetId())
		}
		return nil
	}
}

// metrics reads series from one scrape of ledgerd's /metrics, each named
// as printed (labels included, such as a histogram's
// `_bucket{le="0.016"}`); a series it does not find reads -1.
func (d *daemon) metrics(names ...string) []float64 {
	out := make([]float64, len(names))
	for i := range out {
		out[i] = -1
	}
	resp, err := http.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if i := slices.Index(names, f[0]); i >= 0 {
			out[i], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	return out
}

// counters is what a served phase reads from ledgerd's metrics: the
// signature cache's hits and misses, the group commits and the writes
// (rows and the ledger's own) they carried; from the commits' timing,
// how many were timed, the seconds they took and how many took at most
// 16 and 64 ms (one histogram, read at once, so these four agree); of
// the commits' seconds, those bbolt spent writing and syncing pages
// (disk) and spilling nodes to pages (spill); from the Go runtime's
// metrics, the heap allocations ledgerd made, their bytes, and the
// collector's cycles.
type counters struct {
	hits, misses, commits, writes                float64
	timed, commitSeconds, within16ms, within64ms float64
	diskSeconds, spillSeconds                    float64
	mallocs, allocBytes, collections             float64
}

// counters reads ledgerd's counters so far. The commit times are -1 from
// a ledgerd without pactledger_commit_seconds, the disk's and the
// spill's from one without the bbolt store's, the allocations and
// collections from one without the Go runtime's metrics.
func (d *daemon) counters() counters {
	v := d.metrics("pactledger_signature_cache_hits_total", "pactledger_signature_cache_misses_total",
		"pactledger_commit_batch_rows_count", "pactledger_commit_batch_rows_sum",
		"pactledger_commit_seconds_count", "pactledger_commit_seconds_sum",
		`pactledger_commit_seconds_bucket{le="0.016"}`, `pactledger_commit_seconds_bucket{le="0.064"}`,
		"pactledger_bbolt_write_seconds_total", "pactledger_bbolt_spill_seconds_total",
		"go_memstats_mallocs_total", "go_memstats_alloc_bytes_total", "go_gc_duration_seconds_count")
	return counters{hits: v[0], misses: v[1], commits: v[2], writes: v[3], timed: v[4], commitSeconds: v[5], within16ms: v[6], within64ms: v[7],
		diskSeconds: v[8], spillSeconds: v[9], mallocs: v[10], allocBytes: v[11], collections: v[12]}
}

// since is what the counters gained after c0.
func (c counters) since(c0 counters) counters {
	return counters{hits: c.hits - c0.hits, misses: c.misses - c0.misses, commits: c.commits - c0.commits, writes: c.writes - c0.writes,
		timed: gained(c.timed, c0.timed), commitSeconds: gained(c.commitSeconds, c0.commitSeconds), within16ms: gained(c.within16ms, c0.within16ms), within64ms: gained(c.within64ms, c0.within64ms),
		diskSeconds: gained(c.diskSeconds, c0.diskSeconds), spillSeconds: gained(c.spillSeconds, c0.spillSeconds),
		mallocs: gained(c.mallocs, c0.mallocs), allocBytes: gained(c.allocBytes, c0.allocBytes), collections: gained(c.collections, c0.collections)}
}

// printAllocs writes a line on ledgerd's heap allocations in a window
// that recorded rows rows: how many a row and their bytes, and how many
// rows a collection took. Unlike the CPU a row, these do not depend on
// the machine's speed or load: a change to the write path's allocations
// reads here from one run. Nothing when they are unknown.
func (c counters) printAllocs(w io.Writer, rows int) {
	n, ok := c.allocsPerRow(rows)
	if !ok || c.allocBytes < 0 {
		return
	}
	fmt.Fprintf(w, "  ledgerd's heap allocations: %.0f a row, %.1f KiB a row", n, c.allocBytes/float64(rows)/1024)
	if c.collections > 0 {
		fmt.Fprintf(w, "; %.0f collections, one every %.0f rows", c.collections, float64(rows)/c.collections)
	}
	fmt.Fprintln(w)
}

// allocsPerRow is the heap allocations a row of a window that recorded
// rows rows; ok is false when they are unknown or no row was recorded.
func (c counters) allocsPerRow(rows int) (n float64, ok bool) {
	if rows <= 0 || c.mallocs < 0 {
		return 0, false
	}
	return c.mallocs / float64(rows), true
}

// printCommits writes a line on the group commits of a window of el
// seconds that recorded rows rows: how many, how many writes each, how
// long each took and how many took over 16 and 64 ms, and, from a bbolt
// store, the commits' µs a row and what of it was the disk's (writing
// and syncing pages) and the spill's, and how much of the window the
// committer was busy. Nothing when no commit was counted.
func (c counters) printCommits(w io.Writer, el float64, rows int) {
	if c.commits <= 0 {
		return
	}
	fmt.Fprintf(w, "  group commit: %.0f commits, %.1f writes a commit", c.commits, c.writes/c.commits)
	if c.timed > 0 && c.commitSeconds >= 0 && c.within16ms >= 0 && c.within64ms >= 0 {
		fmt.Fprintf(w, ", %.1f ms a commit on average, %.0f over 16 ms, %.0f over 64 ms",
			1000*c.commitSeconds/c.timed, c.timed-c.within16ms, c.timed-c.within64ms)
		if c.diskSeconds >= 0 && c.spillSeconds >= 0 && rows > 0 && el > 0 {
			perRow := func(s float64) float64 { return 1e6 * s / float64(rows) }
			fmt.Fprintf(w, "\n  the commits: %.0f µs a row, of it writing and syncing pages %.0f µs, spilling nodes %.0f µs, the rest (running the writes, bbolt's other work) %.0f µs; the committer busy %.0f %% of the window",
				perRow(c.commitSeconds), perRow(c.diskSeconds), perRow(c.spillSeconds), perRow(c.commitSeconds-c.diskSeconds-c.spillSeconds), 100*c.commitSeconds/el)
		}
	}
	fmt.Fprintln(w)
}

// gained is v-v0, or -1 when either is unknown (-1).
func gained(v, v0 float64) float64 {
	if v < 0 || v0 < 0 {
		return -1
	}
	return v - v0
}

// served is one served scenario's figures.
type served struct {
	*result
	scenario
	counters     // during the load
	conc     int // requests in flight; 0 when a rate was offered
	depth    int
	drain    time.Duration
	atRest   memStat
	rested   memStat // after restFor more at rest; zero when not read
	restFor  time.Duration
	load     string // load average when the phase ended
}

// runServed runs sc against a fresh ledgerd: conc in flight for dur (rate
// 0), or rate rows/s offered for dur.
func runServed(ctx context.Context, env *servedEnv, sc scenario, conc int, dur time.Duration, rate int) (*served, error) {
	d, err := env.fresh(ctx)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	c0 := d.counters()
	stopProfile, err := env.profileClient(sc, rate)
	if err != nil {
		return nil, err
	}
	var res *result
	switch {
	case sc.batch > 0:
		res, err = d.measured(func() (*result, error) { return driveBatches(ctx, sc.corpus, conc, sc.batch, dur, d.grpcAppendBatch()) })
	case sc.stream:
		res, err = d.measured(func() (*result, error) { return d.driveStream(ctx, sc.corpus, conc, dur) })
	default:
		res, err = d.measure(ctx, sc.corpus, conc, dur, rate, d.call(sc.via, nil))
	}
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	out := &served{result: res, scenario: sc, counters: d.counters().since(c0), conc: conc, load: loadAvg()}
	out.depth = d.outboxDepth()
	out.drain = d.waitDrained(2 * time.Minute)
	out.atRest = procMem(d.pid)
	return out, env.rest(ctx, d, out)
}

// rest leaves ledgerd idle for e.restFor, when set, and reads its memory
// again: the Go runtime collects a process at least every two minutes,
// and returns memory it no longer needs to the system in the background.
func (e *servedEnv) rest(ctx context.Context, d *daemon, out *served) error {
	if e.restFor <= 0 {
		return nil
	}
	t := time.NewTimer(e.restFor)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	out.rested, out.restFor = procMem(d.pid), e.restFor
	return nil
}

// profileClient starts a CPU profile of this process, the load
// generator, for the served phase of sc at rate (0: closed loop) when
// the run asks for one; the function it returns stops it and closes the
// file.
func (e *servedEnv) profileClient(sc scenario, rate int) (func() error, error) {
	if e.clientProfile == "" {
		return startCPUProfile("")
	}
	phase := sc.how() + " " + sc.name
	if rate > 0 {
		phase += fmt.Sprintf(" %d rows a second", rate)
	}
	stop, err := startCPUProfile(e.clientProfile + "-" + fileName(phase) + ".pb")
	if err != nil {
		return nil, fmt.Errorf("the load generator's %w", err)
	}
	return stop, nil
}

// fileName is s as a file name: lower case letters and digits, each run
// of anything else a single dash.
func fileName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	return b.String()
}

// print writes the scenario's figures in units of u.
func (s *served) print(w io.Writer, u verifyUnit, conc int, dur time.Duration, rate int) {
	load := fmt.Sprintf("%d in flight for %s", conc, dur)
	if rate > 0 {
		load = fmt.Sprintf("%d rows/s offered for %s", rate, dur)
	}
	fmt.Fprintf(w, "\n%s, %s, %s (load average %s):\n", s.how(), s.name, load, s.load)
	fmt.Fprintf(w, "  %.0f verified durable rows/s (%d rows; %s), p50 %s, p99 %s, errors %d\n",
		s.rate, s.ok, s.unitSaid(u), s.p(50), s.p(99), s.errors)
	fmt.Fprintf(w, "  ledgerd CPU %.2f cores = %s per row = %.2f verifications per row (%.2f in the unit measured at the run's start, %s); client (this process, same cores) %.2f cores; versitygw %.2f cores\n",
		s.cpu, us(s.cpuPerRow()), s.units(u), u.units(s.cpuPerRow().Seconds()), us(u.median()), s.clientCPU, s.s3cpu)
	s.printWritten(w)
	s.printKernel(w)
	s.counters.printCommits(w, s.elapsed.Seconds(), s.ok)
	s.counters.printAllocs(w, s.ok)
	if total := s.hits + s.misses; total > 0 {
		fmt.Fprintf(w, "  signature cache: %.1f %% hits (%.0f hits, %.0f misses)\n", 100*s.hits/total, s.hits, s.misses)
	}
	if s.ceiling != nil && s.ceiling.rate > 0 && rate == 0 {
		when := ""
		if s.paired {
			when = ", run just before this scenario; " + s.ceiling.collectionsSaid()
		}
		fmt.Fprintf(w, "  ratio to the in-process ceiling on the same corpus, the ledger as ledgerd runs it (%.0f rows/s%s): %.2f\n", s.ceiling.rate, when, s.rate/s.ceiling.rate)
		if s.paired && s.first > 0 {
			fmt.Fprintf(w, "  ratio to the same ceiling at the run's start (%.0f rows/s): %.2f\n", s.first, s.rate/s.first)
		}
		fmt.Fprint(w, cpuGap(s.result, s.ceiling))
	}
	if s.bare > 0 && rate == 0 {
		fmt.Fprintf(w, "  ratio to the in-process ceiling on the same corpus, verify + durable commit alone, at the run's start (%.0f rows/s): %.2f\n", s.bare, s.rate/s.bare)
	}
	fmt.Fprintf(w, "  ledgerd memory under load: %s\n", s.mem)
	fmt.Fprintf(w, "  ledgerd memory at rest (outbox drained): %s\n", s.atRest)
	if s.restFor > 0 {
		fmt.Fprintf(w, "  ledgerd memory %s later, at rest: %s\n", s.restFor, s.rested)
	}
	fmt.Fprintf(w, "  outbox depth when the load stopped: %d objects (%.2f s of writes), drained %s later\n", s.depth, float64(s.depth)/max(s.rate, 1), s.drain)
}

// cpuGap says what a row cost every process on the machine when served
// (s) and in the ceiling its ratio is read against (c), and where the
// served row cost more: the transport's two ends and the load generator
// run only when served. When both phases kept the cores busy, the ratio
// of their rates is about the ratio of these costs; a rate ratio above it
// says the ceiling left more of the cores idle.
func cpuGap(s, c *result) string {
	if s.ok == 0 || c.ok == 0 {
		return ""
	}
	µs := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	ledgerd, client, s3 := µs(s.perRow(s.cpu)), µs(s.perRow(s.clientCPU)), µs(s.perRow(s.s3cpu))
	own, ownS3 := µs(c.perRow(c.cpu)), µs(c.perRow(c.s3cpu))
	served, ceiling := ledgerd+client+s3, own+ownS3
	return fmt.Sprintf("  CPU a row, every process: served %.0f µs (ledgerd %.0f, the load generator %.0f, versitygw %.0f; %.2f cores busy), "+
		"the ceiling %.0f µs (its process %.0f, versitygw %.0f; %.2f cores busy), %.2f of the served's; "+
		"the served row's more: ledgerd %+.0f µs, the load generator %+.0f µs, versitygw %+.0f µs\n",
		served, ledgerd, client, s3, s.cpu+s.clientCPU+s.s3cpu,
		ceiling, own, ownS3, c.cpu+c.s3cpu, ceiling/served,
		ledgerd-own, client, s3-ownS3)
}

// how is the scenario's transport in words: "gRPC", "REST", "gRPC,
// AppendReceipts of 8" or "gRPC, AppendReceiptStream".
func (s scenario) how() string {
	switch {
	case s.batch > 0:
		return fmt.Sprintf("%s, AppendReceipts of %d", s.via, s.batch)
	case s.stream:
		return fmt.Sprintf("%s, AppendReceiptStream", s.via)
	}
	return string(s.via)
}

// cpuPerRow is ledgerd's CPU time per recorded row.
func (r *result) cpuPerRow() time.Duration { return r.perRow(r.cpu) }

// perRow is the CPU time per recorded row of a process that kept cores
// busy over the phase.
func (r *result) perRow(cores float64) time.Duration {
	if r.ok == 0 {
		return 0
	}
	return time.Duration(cores * r.elapsed.Seconds() / float64(r.ok) * float64(time.Second))
}

// selfPid is this process, the load generator.
var selfPid = os.Getpid()
