package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestPrintCommits checks the group commit's figures: the commits' µs a
// row split into the disk's, the spill's and the rest, and the
// committer's busy share of the window; without bbolt's times (-1, a
// store without them), only the commits' own line.
func TestPrintCommits(t *testing.T) {
	c := counters{commits: 100, writes: 2500, timed: 100, commitSeconds: 0.8, within16ms: 90, within64ms: 100, diskSeconds: 0.4, spillSeconds: 0.04}
	var b strings.Builder
	c.printCommits(&b, 1, 2000)
	want := "  group commit: 100 commits, 25.0 writes a commit, 8.0 ms a commit on average, 10 over 16 ms, 0 over 64 ms\n" +
		"  the commits: 400 µs a row, of it writing and syncing pages 200 µs, spilling nodes 20 µs, the rest (running the writes, bbolt's other work) 180 µs; the committer busy 80 % of the window\n"
	if b.String() != want {
		t.Errorf("printCommits:\n%s\nwant:\n%s", b.String(), want)
	}

	c.diskSeconds, c.spillSeconds = -1, -1
	b.Reset()
	c.printCommits(&b, 1, 2000)
	if want := strings.SplitAfter(want, "\n")[0]; b.String() != want {
		t.Errorf("printCommits without bbolt's times:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	counters{}.printCommits(&b, 1, 2000)
	if b.String() != "" {
		t.Errorf("printCommits without commits: %q, want nothing", b.String())
	}
}

// TestPrintAllocs checks the allocations' line: per row, their KiB, and
// the rows a collection took; nothing when the runtime's metrics were
// not read (-1) or no row was recorded, and no collections when none ran.
func TestPrintAllocs(t *testing.T) {
	c := counters{mallocs: 1_200_000, allocBytes: 150 * 1024 * 2000, collections: 8}
	var b strings.Builder
	c.printAllocs(&b, 2000)
	if want := "  ledgerd's heap allocations: 600 a row, 150.0 KiB a row; 8 collections, one every 250 rows\n"; b.String() != want {
		t.Errorf("printAllocs:\n%q\nwant:\n%q", b.String(), want)
	}
	b.Reset()
	c.collections = 0
	c.printAllocs(&b, 2000)
	if want := "  ledgerd's heap allocations: 600 a row, 150.0 KiB a row\n"; b.String() != want {
		t.Errorf("printAllocs without a collection:\n%q\nwant:\n%q", b.String(), want)
	}
	for _, tc := range []struct {
		c    counters
		rows int
	}{{counters{mallocs: -1, allocBytes: -1, collections: -1}, 2000}, {c, 0}} {
		b.Reset()
		tc.c.printAllocs(&b, tc.rows)
		if b.String() != "" {
			t.Errorf("printAllocs(%+v, %d) = %q, want nothing", tc.c, tc.rows, b.String())
		}
	}
	// since keeps an unknown reading unknown.
	if got := (counters{mallocs: -1}).since(counters{mallocs: 5}); got.mallocs != -1 {
		t.Errorf("since of an unknown count = %v, want -1", got.mallocs)
	}
	if got := (counters{mallocs: 50, allocBytes: 70, collections: 3}).since(counters{mallocs: 20, allocBytes: 10, collections: 1}); got.mallocs != 30 || got.allocBytes != 60 || got.collections != 2 {
		t.Errorf("since = %+v, want 30 allocations, 60 bytes, 2 collections", got)
	}
}

// TestSummaryAllocations checks the summary table's last column: a served
// scenario's allocations a row, empty for a ceiling and for a scenario
// whose allocations are unknown, every row with as many cells as the
// header.
func TestSummaryAllocations(t *testing.T) {
	ceil := ceiling{result: &result{rate: 3000}, name: "sessions", asServed: true}
	known := &served{result: &result{rate: 2000, ok: 4000}, scenario: scenario{name: "sessions"}, counters: counters{mallocs: 2_300_000}}
	unknown := &served{result: &result{rate: 2000, ok: 4000}, scenario: scenario{name: "a token per row"}, counters: counters{mallocs: -1}}
	var b strings.Builder
	printCostSummary(&b, verifyUnit{}, []ceiling{ceil}, []*served{known, unknown}, Config{Concurrency: 64})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var table []string
	for _, l := range lines {
		if strings.HasPrefix(l, "|") {
			table = append(table, l)
		}
	}
	if len(table) != 5 {
		t.Fatalf("summary: %d table lines, want 5 (header, separator, one ceiling, two scenarios):\n%s", len(table), b.String())
	}
	cells := func(l string) []string { return strings.Split(strings.Trim(l, "|"), "|") }
	head := cells(table[0])
	if last := strings.TrimSpace(head[len(head)-1]); last != "heap allocations a row" {
		t.Errorf("the last column is %q, want the heap allocations a row", last)
	}
	for i, want := range []string{"", "", "575", ""} {
		c := cells(table[i+1])
		if len(c) != len(head) {
			t.Errorf("table line %d has %d cells, the header %d:\n%s", i+2, len(c), len(head), table[i+1])
			continue
		}
		if i == 0 {
			continue // the separator
		}
		if got := strings.TrimSpace(c[len(c)-1]); got != want {
			t.Errorf("table line %d ends with %q, want %q:\n%s", i+2, got, want, table[i+1])
		}
	}
}

// TestGrowthOrder checks that the growth run's pairs turn their order, so
// that a machine that speeds up or slows down over them favours neither
// the grown ledger nor the empty one.
func TestGrowthOrder(t *testing.T) {
	got := growthOrder(3)
	want := []bool{true, false, false, true, true, false}
	if !slices.Equal(got, want) {
		t.Errorf("growthOrder(3) = %v, want %v", got, want)
	}
	for pairs := 1; pairs <= 6; pairs++ {
		o := growthOrder(pairs)
		if len(o) != 2*pairs || !o[0] {
			t.Fatalf("growthOrder(%d) = %v: want %d windows, the first at the last step's size", pairs, o, 2*pairs)
		}
		grown := 0
		for _, g := range o {
			if g {
				grown++
			}
		}
		if grown != pairs {
			t.Errorf("growthOrder(%d) = %v: %d windows at the last size, want %d", pairs, o, grown, pairs)
		}
	}
}

// TestUsageOf reads /proc/PID/stat's text, a command name with spaces
// and parentheses included, and this process's own usage, which grows
// as it works.
func TestUsageOf(t *testing.T) {
	stat := "4242 (led gerd (x)) S 1 4242 4242 0 -1 4194560 1500 0 7 0 250 40 0 0 20 0 9 0 100 0 0\n"
	got := usageOf(statFields(stat))
	want := procUsage{user: 2.5, sys: 0.4, minflt: 1500, majflt: 7}
	if got != want {
		t.Errorf("usageOf = %+v, want %+v", got, want)
	}
	if got := usageOf(statFields("4242 (short) S 1 2")); got != (procUsage{}) {
		t.Errorf("usageOf a short line = %+v, want zero", got)
	}

	u0 := procUsageOf(selfPid)
	sum := 0
	for i := 0; ; i++ {
		if d := procUsageOf(selfPid).since(u0); d.user+d.sys > 0 && d.minflt > 0 {
			break
		}
		if i > 1e6 {
			t.Fatalf("this process's CPU and minor faults never grew while it touched fresh memory (%d)", sum)
		}
		buf := make([]byte, 1<<20) // fresh pages: faults and CPU
		for j := range buf {
			sum += int(buf[j]) + j
		}
	}
}

// TestProcIOOf reads this process's /proc/PID/io: a write and a read
// of a file each count one system call more.
func TestProcIOOf(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "calls"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	io0, ok := procIOOf(selfPid)
	if !ok {
		t.Skip("the kernel does not count this process's system calls (/proc/PID/io)")
	}
	for range 3 {
		if _, err := f.WriteAt([]byte("row"), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(make([]byte, 3), 0); err != nil {
			t.Fatal(err)
		}
	}
	io1, ok := procIOOf(selfPid)
	if !ok {
		t.Fatal("/proc/PID/io unreadable the second time")
	}
	if d := io1.writes - io0.writes; d < 3 {
		t.Errorf("write system calls grew by %d over three writes, want at least 3", d)
	}
	if d := io1.reads - io0.reads; d < 3 {
		t.Errorf("read system calls grew by %d over three reads, want at least 3", d)
	}
	if _, ok := procIOOf(-1); ok {
		t.Error("procIOOf(-1) = ok, want false")
	}
}

// TestPrintWritten checks the line on ledgerd's bytes written a row, and
// that it says nothing when the kernel did not count them.
func TestPrintWritten(t *testing.T) {
	var b strings.Builder
	(&result{ok: 1000, io: procIO{written: 16 << 20}, ioKnown: true}).printWritten(&b)
	if want := "  ledgerd 16.4 KiB written to disk per row\n"; b.String() != want {
		t.Errorf("printWritten = %q, want %q", b.String(), want)
	}
	b.Reset()
	(&result{ok: 1000, io: procIO{written: 16 << 20}}).printWritten(&b)
	if b.String() != "" {
		t.Errorf("printWritten unknown = %q, want nothing", b.String())
	}
}

// TestPrintKernel checks the line on ledgerd's CPU in its code and in
// the kernel, and the growth run's medians of it.
func TestPrintKernel(t *testing.T) {
	r := &result{ok: 1000, usage: procUsage{user: 0.5, sys: 0.1, minflt: 3000, majflt: 2}}
	var b strings.Builder
	r.printKernel(&b)
	want := "  ledgerd's CPU a row: in its own code 500 µs, in the kernel 100 µs; page faults a row: 3.00 minor, 0.002 major (read from disk)\n"
	if b.String() != want {
		t.Errorf("printKernel:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	c := *r
	c.io, c.ioKnown = procIO{reads: 620, writes: 3550}, true
	c.printKernel(&b)
	want = "  ledgerd's CPU a row: in its own code 500 µs, in the kernel 100 µs; page faults a row: 3.00 minor, 0.002 major (read from disk); system calls a row: 3.55 writes (answers, bbolt's pages, uploads), 0.62 reads\n"
	if b.String() != want {
		t.Errorf("printKernel with system calls:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	(&result{ok: 1000}).printKernel(&b)
	if b.String() != "" {
		t.Errorf("printKernel without usage: %q, want nothing", b.String())
	}

	e := &result{ok: 1000, usage: procUsage{user: 0.4, sys: 0.05, minflt: 1000}}
	b.Reset()
	printUsageMedians(&b, []*result{r, r, r}, []*result{e, e, r})
	want = "  ledgerd's CPU a row, medians: in its own code 500 against 400 µs, in the kernel 100 against 50 µs; page faults a row 3.00 against 1.00 minor, 0.002 against 0.000 major\n"
	if b.String() != want {
		t.Errorf("printUsageMedians:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printUsageMedians(&b, []*result{r}, []*result{{ok: 10}})
	if b.String() != "" {
		t.Errorf("printUsageMedians without a split: %q, want nothing", b.String())
	}
}

// TestServedRatios checks the summary's ratio cell: with paired ceilings
// the ceiling run just before the scenario comes first, then the one at
// the run's start, then the ledger's alone; without, the first and the
// last; an offered-rate scenario has none.
func TestServedRatios(t *testing.T) {
	paired := &served{result: &result{rate: 1800, ok: 3600, elapsed: 2 * time.Second, cpu: 1.2},
		scenario: scenario{ceiling: &result{rate: 2000, ok: 9000, elapsed: 4500 * time.Millisecond, cpu: 1.5, collections: 3}, first: 2400, bare: 3000, paired: true}}
	alone := &served{result: &result{rate: 1800}, scenario: scenario{ceiling: &result{rate: 2400}, first: 2400, bare: 3000}}
	offered := &served{result: &result{rate: 1000}}
	for _, c := range []struct {
		s    *served
		want string
	}{
		{paired, "0.90 / 0.75 / 0.60"},
		{alone, "0.75 / 0.60"},
		{offered, "—"},
	} {
		if got := c.s.ratios(); got != c.want {
			t.Errorf("ratios(%+v) = %q, want %q", c.s.scenario, got, c.want)
		}
	}
	// The scenario's own figures say which ceiling each ratio is to.
	var b strings.Builder
	paired.print(&b, verifyUnit{}, 64, time.Second, 0)
	for _, want := range []string{
		"the ledger as ledgerd runs it (2000 rows/s, run just before this scenario; 3 collections in this process, one every 3000 rows): 0.90\n",
		"ratio to the same ceiling at the run's start (2400 rows/s): 0.75\n",
		"verify + durable commit alone, at the run's start (3000 rows/s): 0.60\n",
		"  CPU a row, every process: served 667 µs (ledgerd 667, the load generator 0, versitygw 0; 1.20 cores busy), the ceiling 750 µs",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("print of a paired scenario lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	alone.print(&b, verifyUnit{}, 64, time.Second, 0)
	if s := b.String(); strings.Contains(s, "just before") || strings.Contains(s, "same ceiling at the run's start") {
		t.Errorf("print of a scenario without a paired ceiling speaks of one:\n%s", s)
	}
}

// TestCPUGap checks the line that sets a served row's CPU, every process
// counted, beside the ceiling's: per row from cores over the window, the
// ceiling's share of the served's, and the served's more by process.
func TestCPUGap(t *testing.T) {
	// Served: 4,000 rows in 2 s; ledgerd 1.2 cores (600 µs a row), the
	// load generator 0.3 (150), versitygw 0.1 (50). The ceiling: 5,000
	// rows in 2 s; its process 1.5 cores (600 µs a row), versitygw 0.1 (40).
	s := &result{ok: 4000, elapsed: 2 * time.Second, cpu: 1.2, clientCPU: 0.3, s3cpu: 0.1}
	c := &result{ok: 5000, elapsed: 2 * time.Second, cpu: 1.5, s3cpu: 0.1}
	want := "  CPU a row, every process: served 800 µs (ledgerd 600, the load generator 150, versitygw 50; 1.60 cores busy), " +
		"the ceiling 640 µs (its process 600, versitygw 40; 1.60 cores busy), 0.80 of the served's; " +
		"the served row's more: ledgerd +0 µs, the load generator +150 µs, versitygw +10 µs\n"
	if got := cpuGap(s, c); got != want {
		t.Errorf("cpuGap:\n%q\nwant:\n%q", got, want)
	}
	if got := cpuGap(s, &result{}); got != "" {
		t.Errorf("cpuGap against a ceiling without rows: %q, want nothing", got)
	}
}

// TestProfileClient checks the load generator's profile of a served
// phase: its file name from the phase, a CPU profile in it, and nothing
// when the run asks for none.
func TestProfileClient(t *testing.T) {
	if got, want := fileName("gRPC, AppendReceiptStream sessions of 20 turns per delegation token"), "grpc-appendreceiptstream-sessions-of-20-turns-per-delegation-token"; got != want {
		t.Errorf("fileName = %q, want %q", got, want)
	}
	if got, want := fileName("  REST: one token/row  "), "rest-one-token-row"; got != want {
		t.Errorf("fileName = %q, want %q", got, want)
	}

	dir := t.TempDir()
	stop, err := (&servedEnv{}).profileClient(scenario{name: "sessions", via: viaGRPC}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e := &servedEnv{clientProfile: filepath.Join(dir, "client")}
	stop, err = e.profileClient(scenario{name: "sessions", via: viaGRPC, stream: true}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "client-grpc-appendreceiptstream-sessions-1000-rows-a-second.pb")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no profile where the phase's name says: %v", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(p.SampleType) == 0 || p.SampleType[len(p.SampleType)-1].Type != "cpu" {
		t.Errorf("%s holds %v samples, want cpu", path, p.SampleType)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files written, want the one profile", len(entries))
	}
}

// rest reads ledgerd's memory again after its time at rest, and only
// when asked; the phase's report says when.
func TestRest(t *testing.T) {
	d := &daemon{pid: os.Getpid()}
	out := &served{}
	if err := (&servedEnv{}).rest(t.Context(), d, out); err != nil || out.restFor != 0 || out.rested.anon != 0 {
		t.Fatalf("rest without restFor: %v, %+v", err, out.rested)
	}
	if err := (&servedEnv{restFor: time.Millisecond}).rest(t.Context(), d, out); err != nil {
		t.Fatal(err)
	}
	if out.restFor != time.Millisecond || out.rested.anon <= 0 {
		t.Fatalf("after rest: %s, %+v", out.restFor, out.rested)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := (&servedEnv{restFor: time.Hour}).rest(ctx, d, &served{}); err == nil {
		t.Fatal("rest ran out a cancelled context")
	}
	var b strings.Builder
	out.result, out.counters = &result{}, counters{}
	out.print(&b, verifyUnit{cpu: []time.Duration{70 * time.Microsecond}, wall: []time.Duration{70 * time.Microsecond}}, 64, time.Second, 0)
	if !strings.Contains(b.String(), "ledgerd memory 1ms later, at rest: ") {
		t.Errorf("the report does not give the memory after the rest:\n%s", b.String())
	}
}
