package heapfloor

import (
	"bytes"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		floor, live uint64
		base, want  int
	}{
		{256 * mib, 28 * mib, 100, 814},        // (256-28)/28
		{256 * mib, 128 * mib, 100, 100},       // GOGC's goal reaches the floor
		{256 * mib, 200 * mib, 100, 100},       // above it
		{256 * mib, 300 * mib, 100, 100},       // the live heap past the floor
		{256 * mib, 28 * mib, 1000, 1000},      // GOGC above what the floor asks
		{256 * mib, 0, 100, 6300},              // nothing live yet: from minLive
		{256 * mib, 1 * mib, 50, 6300},         // less than minLive
		{1 << 62, 4 * mib, 100, math.MaxInt32}, // held to an int32
		{math.MaxUint64, 4 * mib, 100, math.MaxInt32},
		{math.MaxInt32 / 100 * 4 * mib, 4 * mib, 100, math.MaxInt32/100*100 - 100},
	} {
		if got := Percent(tc.floor, tc.live, tc.base); got != tc.want {
			t.Errorf("Percent(%d MiB, %d MiB, %d) = %d, want %d", tc.floor/mib, tc.live/mib, tc.base, got, tc.want)
		}
	}
}

func TestGoal(t *testing.T) {
	for _, tc := range []struct {
		size, live uint64
		rate       float64
		want       uint64
	}{
		{256 * mib, 28 * mib, 0, 28 * mib},          // nothing allocated: the live heap, GOGC's goal
		{256 * mib, 28 * mib, 100 * mib, 128 * mib}, // a second's allocations over it
		{256 * mib, 28 * mib, 228 * mib, 256 * mib}, // up to the size
		{256 * mib, 28 * mib, 4000 * mib, 256 * mib},
		{256 * mib, 300 * mib, 100 * mib, 256 * mib}, // never above it: GOGC's goal governs there
		{256 * mib, 28 * mib, math.Inf(1), 256 * mib},
	} {
		if got := Goal(tc.size, tc.live, tc.rate); got != tc.want {
			t.Errorf("Goal(%d MiB, %d MiB, %.0f MiB/s) = %.1f MiB, want %d MiB", tc.size/mib, tc.live/mib, tc.rate/mib, float64(got)/mib, tc.want/mib)
		}
	}
}

// fakeHeap is a heap a test moves by hand, read as a cycle's end reads
// the process's.
type fakeHeap struct {
	mu sync.Mutex
	h  heapState
}

func (f *fakeHeap) read() heapState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h
}

// grow allocates bytes over d and leaves live bytes live.
func (f *fakeHeap) grow(bytes uint64, d time.Duration, live uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.h.allocs += bytes
	f.h.at = f.h.at.Add(d)
	f.h.live = live
}

// The floor follows the allocation rate up to its size at once, and
// down by halving at most once an Interval; it sets GOGC back when
// stopped and nothing after.
func TestFloorFollowsRate(t *testing.T) {
	heap := &fakeHeap{h: heapState{live: 28 * mib, at: time.Unix(1e9, 0)}}
	var sets []int
	var setsMu sync.Mutex
	f := newFloor(256*mib, 100, func(p int) { setsMu.Lock(); sets = append(sets, p); setsMu.Unlock() }, heap.read)
	percent := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.percent
	}
	if got := percent(); got != 100 {
		t.Fatalf("percentage %d before any cycle, want GOGC's 100", got)
	}
	for i, step := range []struct {
		allocs uint64
		d      time.Duration
		live   uint64
		want   int
	}{
		{100 * mib, time.Second, 28 * mib, 300},           // 100 MiB/s asks 128 MiB; the goal at most doubles, from GOGC's 56 to 112
		{1000 * mib, time.Second, 28 * mib, 700},          // 1000 MiB/s asks the size; doubled again, 224 MiB
		{0, time.Second, 64 * mib, 300},                   // load gone: half the rate, still past the size, 256 MiB
		{0, time.Second, 64 * mib, 300},                   // 250 MiB/s: still past it
		{0, time.Second, 64 * mib, 195},                   // 125 MiB/s: 189 MiB
		{0, time.Second, 64 * mib, 100},                   // 62.5 MiB/s: under GOGC's 128 MiB
		{10 * mib, 100 * time.Millisecond, 64 * mib, 156}, // 100 MiB/s again: up at once, to 164 MiB
		{10 * mib, 0, 64 * mib, 156},                      // no time passed: no rate to read
		{4 * mib, 2 * time.Minute, 64 * mib, 100},         // at rest till the runtime's own cycle: GOGC's goal
		{500 * mib, time.Second, 32 * mib, 700},           // the load back: 256 MiB, twice GOGC's goal of the cycle before
		{0, 3 * time.Second, 32 * mib, 195},               // an eighth of it after three seconds: 62.5 MiB over 32
	} {
		heap.grow(step.allocs, step.d, step.live)
		// A cycle may read the step first; either way it is read once.
		f.afterGC()
		if got := percent(); got != step.want {
			t.Fatalf("step %d: percentage %d, want %d", i, got, step.want)
		}
	}
	f.stop()
	if got := percent(); got != 100 {
		t.Fatalf("stopped: percentage %d, want GOGC's 100", got)
	}
	setsMu.Lock()
	n := len(sets)
	setsMu.Unlock()
	heap.grow(1000*mib, time.Second, 8*mib)
	f.afterGC()
	setsMu.Lock()
	defer setsMu.Unlock()
	if len(sets) != n {
		t.Fatalf("a stopped floor set %v", sets[n:])
	}
	if want := []int{300, 700, 300, 195, 100, 156, 100, 700, 195, 100}; !slices.Equal(sets, want) {
		t.Fatalf("set %v, want %v", sets, want)
	}
}

// A burst over a process's first short cycles raises the heap goal by
// doubling it a cycle, not to the size at once.
func TestFloorStartsSlowly(t *testing.T) {
	heap := &fakeHeap{h: heapState{live: 1 * mib, at: time.Unix(1e9, 0)}}
	f := newFloor(256*mib, 100, func(int) {}, heap.read)
	defer f.stop()
	for i, step := range []struct {
		allocs uint64
		d      time.Duration
		live   uint64
		want   int
	}{
		{4 * mib, 10 * time.Millisecond, 2 * mib, 300},   // 400 MiB/s asks the size: 16 MiB, twice GOGC's 8 over minLive
		{16 * mib, 40 * time.Millisecond, 3 * mib, 700},  // 32 MiB
		{28 * mib, 70 * time.Millisecond, 4 * mib, 1500}, // 64 MiB
	} {
		heap.grow(step.allocs, step.d, step.live)
		f.afterGC()
		f.mu.Lock()
		got := f.percent
		f.mu.Unlock()
		if got != step.want {
			t.Fatalf("step %d: percentage %d, want %d", i, got, step.want)
		}
	}
}

// The collector's cycles drive the floor: each one re-arms it for the
// next.
func TestFloorFollowsCycles(t *testing.T) {
	heap := &fakeHeap{h: heapState{live: 28 * mib, at: time.Unix(1e9, 0)}}
	sets := make(chan int, 16)
	f := newFloor(256*mib, 100, func(p int) { sets <- p }, heap.read)
	defer f.stop()
	expect := func(want int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			runtime.GC() // its cleanups run after it, on their own goroutine
			select {
			case got := <-sets:
				if got != want {
					t.Fatalf("set %d, want %d", got, want)
				}
				return
			case <-deadline:
				t.Fatalf("no percentage set; want %d", want)
			default:
				runtime.Gosched()
			}
		}
	}
	heap.grow(100*mib, time.Second, 28*mib)
	expect(300) // after a cycle
	heap.grow(1000*mib, time.Second, 64*mib)
	expect(250) // and after the next: 224 MiB, twice the goal before
}

// Start sets the process's percentage, a second Start shares the floor,
// and the last stop sets GOGC back.
func TestStartSharesAndRestores(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	stop1 := Start(256*mib, log)
	raisedUnderLoad(t)
	// The collector's cycles go on moving the percentage the floor sets,
	// so sharing is read from the floor in force, not from GOGC.
	floorInForce := func() (*floor, int) {
		activeMu.Lock()
		defer activeMu.Unlock()
		return active, users
	}
	first, _ := floorInForce()
	stop2 := Start(64*mib, log)
	if f, n := floorInForce(); f != first || n != 2 {
		t.Errorf("a second Start put floor %p (%d users) in force, want the first's %p shared by 2", f, n, first)
	}
	if first.size != 256*mib {
		t.Errorf("the shared floor's size is %d MiB, want the first Start's 256", first.size/mib)
	}
	stop1()
	stop1() // a second call does nothing
	if f, n := floorInForce(); f != first || n != 1 {
		t.Errorf("after the first stop: floor %p (%d users), want the first's %p held by the second Start", f, n, first)
	}
	first.mu.Lock()
	stopped := first.stopped
	first.mu.Unlock()
	if stopped {
		t.Errorf("the floor stopped while the second Start still holds it")
	}
	stop2()
	if got := gogc(); got != 100 {
		t.Errorf("GOGC %d after the last stop, want 100", got)
	}
	if f, n := floorInForce(); f != nil || n != 0 {
		t.Errorf("after the last stop: floor %p (%d users), want none", f, n)
	}
	if n := strings.Count(logs.String(), "heap floor"); n != 1 {
		t.Errorf("logged the floor %d times, want once:\n%s", n, logs.String())
	}
}

// GOGC=off, or a floor of 0, leaves the collector as it is.
func TestOff(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	Start(0, slog.New(slog.DiscardHandler))()
	if got := gogc(); got != 100 {
		t.Errorf("a floor of 0 set GOGC %d", got)
	}
	debug.SetGCPercent(-1)
	var logs bytes.Buffer
	stop := Start(256*mib, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := gogc(); got != -1 {
		t.Errorf("GOGC=off: the floor set GOGC %d", got)
	}
	stop()
	if !strings.Contains(logs.String(), "GOGC=off") {
		t.Errorf("log does not say why there is no floor: %s", logs.String())
	}
}

// The floor is lowered to half of GOMEMLIMIT and to a quarter of the
// system's memory, and says so.
func TestLowered(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	Start(1<<50, log)()
	limit, from := systemLimit()
	if limit == 0 {
		t.Skip("the system's memory is not known here")
	}
	want := "heap_floor_mib=" + strconv.FormatUint(limit/4>>20, 10) + ` gogc=100 lowered_to="a quarter of ` + from + `"`
	if !strings.Contains(logs.String(), want) {
		t.Errorf("log %q, want %q", logs.String(), want)
	}

	defer debug.SetMemoryLimit(debug.SetMemoryLimit(96 * mib))
	logs.Reset()
	Start(256*mib, log)()
	if want := `heap_floor_mib=48 gogc=100 lowered_to="half of GOMEMLIMIT"`; !strings.Contains(logs.String(), want) {
		t.Errorf("log %q, want %q", logs.String(), want)
	}
}

// sink keeps raisedUnderLoad's allocations from being optimised away.
var sink []byte

// raisedUnderLoad allocates as a loaded server does, until a cycle's end
// has raised GOGC over 100, and returns it.
func raisedUnderLoad(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for range 64 {
			sink = make([]byte, 1<<20)
		}
		runtime.GC()
		runtime.Gosched()
		if got := gogc(); got > 100 {
			return got
		}
	}
	t.Fatalf("GOGC %d after allocating 64 MiB a cycle under a floor, want above 100", gogc())
	return 0
}
