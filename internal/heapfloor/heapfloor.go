// Package heapfloor keeps the Go collector's heap goal at or above a
// floor that follows the load.
//
// The collector starts a cycle when the heap has grown by GOGC percent
// of what the last cycle found live. A ledger's live heap is small (tens
// of MiB) next to what a write allocates (about 65 KiB a row), so at
// GOGC=100 it collects several times a second under load, and every
// cycle marks the whole live heap. With a floor the goal is the larger
// of the floor and what GOGC gives: a small heap is collected several
// times less often, for more memory; a heap whose GOGC goal is above the
// floor is collected as without one.
//
// The floor is what the process allocates in a second (Interval) over
// the live heap, at most the size Start is given: a process that
// allocates little is collected as GOGC alone would, and takes no more
// memory than it; under full load the heap grows to the size given. The
// rate is read at each cycle's end, over the cycle before it; when it
// falls, the rate the floor holds halves at most once an Interval. The floor
// at most doubles the heap goal from one cycle to the next, so that a
// burst over a few short cycles (a process starting, a small heap) does
// not take the heap to the size.
//
// After each cycle the floor sets the collector's percentage to the
// larger of GOGC and what takes the live heap to the floor. A memory
// limit (GOMEMLIMIT) still holds over it; GOGC=off turns the floor off.
package heapfloor

import (
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// A floor keeps the heap goal at or above a second's allocations over
// the live heap, at most its size, until stopped.
type floor struct {
	size uint64 // bytes
	base int    // GOGC as the process had it

	mu      sync.Mutex
	stopped bool
	percent int              // what the floor set last
	set     func(int)        // debug.SetGCPercent, or a test's
	read    func() heapState // readHeap, or a test's
	last    heapState        // at the cycle before
	rate    float64          // bytes a second the floor was last set for
}

// heapState is the heap as a cycle's end finds it.
type heapState struct {
	live   uint64    // bytes the cycle found live
	allocs uint64    // bytes allocated since the process started
	at     time.Time // when it was read
}

// Interval is the time whose allocations the floor holds over the live
// heap: under a steady load the collector runs about once an Interval
// until the floor reaches its size, and more often above that load.
const Interval = time.Second

// minLive is the live heap the percentage is computed from when a cycle
// found less: a process's first cycles find a few MiB or less, and the
// percentage of a floor over next to nothing is not one to set.
const minLive = 4 << 20

// The process has one collector. While a floor is in force, a second
// Start (another server in the same process, as in tests and the
// benchmark) shares it rather than taking its percentage for GOGC; the
// last stop sets GOGC back.
var (
	activeMu sync.Mutex
	active   *floor
	users    int
)

// Start keeps the heap goal at or above an Interval's allocations over
// the live heap, at most size bytes, until stop is called (once; later
// calls do nothing), then sets GOGC back. The size is lowered to a
// quarter of the memory the system lets the process use (a cgroup's
// limit, the machine's memory: systemLimit) and to half of a memory
// limit set with GOMEMLIMIT. It logs the size in force. A size of 0, or
// GOGC=off, leaves the collector as it is.
func Start(size uint64, log *slog.Logger) (stop func()) {
	activeMu.Lock()
	defer activeMu.Unlock()
	if active != nil {
		users++
		return sync.OnceFunc(release)
	}
	base := gogc()
	if size == 0 || base < 0 {
		if size != 0 {
			log.Info("collector: no heap floor, the collector is off (GOGC=off)")
		}
		return func() {}
	}
	why := ""
	if limit, from := systemLimit(); limit > 0 && limit/4 < size {
		size, why = limit/4, "a quarter of "+from
	}
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 && uint64(limit)/2 < size {
		size, why = uint64(limit)/2, "half of GOMEMLIMIT"
	}
	attrs := []any{slog.Uint64("heap_floor_mib", size>>20), slog.Int("gogc", base)}
	if why != "" {
		attrs = append(attrs, slog.String("lowered_to", why))
	}
	log.Info("collector: heap floor: a second's allocations over the live heap, at most heap_floor_mib", attrs...)
	active, users = newFloor(size, base, func(p int) { debug.SetGCPercent(p) }, readHeap), 1
	return sync.OnceFunc(release)
}

// release is a user's stop: the last one stops the floor.
func release() {
	activeMu.Lock()
	defer activeMu.Unlock()
	if users--; users == 0 {
		active.stop()
		active = nil
	}
}

// newFloor starts a floor of at most size bytes over GOGC base: it sets
// the percentage after every cycle, from the allocations since the one
// before (none yet: GOGC's until the first).
func newFloor(size uint64, base int, set func(int), read func() heapState) *floor {
	f := &floor{size: size, base: base, percent: base, set: set, read: read, last: read()}
	f.arm()
	return f
}

// Goal is the heap goal the floor asks for a live heap grown by rate
// bytes a second: live and an Interval's allocations, at most size.
func Goal(size, live uint64, rate float64) uint64 {
	g := float64(live) + rate*Interval.Seconds()
	if g >= float64(size) {
		return size
	}
	return uint64(g)
}

// goalOf is the heap goal a percentage sets over a heap of live bytes.
func goalOf(live uint64, percent int) float64 {
	return float64(max(live, minLive)) * (1 + float64(percent)/100)
}

// Percent is the GOGC that takes a heap of live bytes to a goal of at
// least floor bytes, and never below base.
func Percent(floor, live uint64, base int) int {
	live = max(live, minLive)
	if floor <= live {
		return base
	}
	over := floor - live
	if over > math.MaxInt32/100*live {
		return math.MaxInt32
	}
	return max(int(over*100/live), base)
}

// afterGC sets the percentage for the live heap the last cycle found and
// the rate the process allocated at since the cycle before, and asks to
// be called again after the next cycle. When the rate falls, the rate
// the floor holds halves at most once an Interval: a pause in the load
// does not take the floor away from the cycle after it, and a ledger at
// rest is back to GOGC's goal at its next cycle.
func (f *floor) afterGC() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	now := f.read()
	dt := now.at.Sub(f.last.at)
	if dt <= 0 { // no time to read a rate over
		f.arm()
		return
	}
	if now.allocs >= f.last.allocs {
		f.rate = max(float64(now.allocs-f.last.allocs)/dt.Seconds(), f.rate*math.Exp2(-float64(dt)/float64(Interval)))
	}
	// The goal the last percentage set, over the heap the cycle before
	// found live, at most doubles.
	limit := 2 * goalOf(f.last.live, f.percent)
	f.last = now
	p := Percent(uint64(min(float64(Goal(f.size, now.live, f.rate)), limit)), now.live, f.base)
	if p != f.percent {
		f.set(p)
		f.percent = p
	}
	f.arm()
}

// arm calls afterGC after the next cycle.
func (f *floor) arm() {
	runtime.AddCleanup(&sentinel{}, (*floor).afterGC, f)
}

// sentinel is an object nothing keeps: its cleanup runs after the cycle
// that finds it unreachable. It holds a pointer so that it is not
// allocated inside a block shared with other small objects (the tiny
// allocator's), which can outlive it.
type sentinel struct {
	_ *int
	_ [2]uint64
}

func (f *floor) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.percent != f.base {
		f.set(f.base)
		f.percent = f.base
	}
}

// read returns runtime metric name's value (0 where it is not a uint64).
func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// readHeap is the heap as the last cycle left it, and the bytes
// allocated so far.
func readHeap() heapState {
	return heapState{live: read("/gc/heap/live:bytes"), allocs: read("/gc/heap/allocs:bytes"), at: time.Now()}
}

// gogc is the GOGC in force: -1 for off.
func gogc() int {
	v := read("/gc/gogc:percent")
	if v > math.MaxInt32 {
		return -1
	}
	return int(v)
}
