package heapfloor

import (
	"bytes"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
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

// A floor sets the percentage for the live heap each cycle finds, after
// every cycle, and GOGC back when stopped.
func TestFloorFollowsCycles(t *testing.T) {
	var live atomic.Uint64
	live.Store(28 * mib)
	sets := make(chan int, 16)
	f := newFloor(256*mib, 100, func(p int) { sets <- p }, live.Load)
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
	expect(814) // set when it starts
	live.Store(64 * mib)
	expect(300) // after a cycle
	live.Store(56 * mib)
	expect(357) // and after the next
	f.stop()
	if got := <-sets; got != 100 {
		t.Fatalf("stop set %d, want GOGC's 100", got)
	}
	// Stopped, it sets nothing more, whatever the cycles find.
	live.Store(8 * mib)
	for range 3 {
		runtime.GC()
	}
	f.afterGC()
	select {
	case got := <-sets:
		t.Fatalf("stopped floor set %d", got)
	default:
	}
}

// Start sets the process's percentage, a second Start shares the floor,
// and the last stop sets GOGC back.
func TestStartSharesAndRestores(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	stop1 := Start(256*mib, log)
	if got := gogc(); got <= 100 {
		t.Fatalf("GOGC %d with a floor over a test's small heap, want above 100", got)
	}
	raised := gogc()
	stop2 := Start(64*mib, log)
	if got := gogc(); got != raised {
		t.Errorf("a second Start changed GOGC from %d to %d", raised, got)
	}
	stop1()
	stop1() // a second call does nothing
	if got := gogc(); got == 100 {
		t.Errorf("GOGC set back while the second Start still holds the floor")
	}
	stop2()
	if got := gogc(); got != 100 {
		t.Errorf("GOGC %d after the last stop, want 100", got)
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
