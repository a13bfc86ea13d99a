package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procCPU returns user+system CPU seconds of pid from /proc.
func procCPU(pid int) float64 {
	u := procUsageOf(pid)
	return u.user + u.sys
}

// procUsage is what /proc/PID/stat says a process used so far: CPU
// seconds in user code and in the kernel (system time: page writes,
// syncs, page faults, the network), and the page faults it took, minor
// (the page was in memory) and major (it was read from disk).
type procUsage struct {
	user, sys      float64
	minflt, majflt float64
}

// procUsageOf reads pid's procUsage; zero when the process is gone.
func procUsageOf(pid int) procUsage { return usageOf(procStat(pid)) }

// usageOf reads a procUsage from the fields of /proc/PID/stat after the
// command name (statFields): they count from the state, field 3 of
// proc(5), so minflt (field 10) is at 7, majflt at 9, utime at 11 and
// stime at 12.
func usageOf(f []string) procUsage {
	if len(f) < 13 {
		return procUsage{}
	}
	count := func(k int) float64 {
		v, _ := strconv.ParseFloat(f[k], 64)
		return v
	}
	return procUsage{user: ticks(f, 11), sys: ticks(f, 12), minflt: count(7), majflt: count(9)}
}

// since is what u gained after u0.
func (u procUsage) since(u0 procUsage) procUsage {
	return procUsage{user: u.user - u0.user, sys: u.sys - u0.sys, minflt: u.minflt - u0.minflt, majflt: u.majflt - u0.majflt}
}

// procStat returns the fields of /proc/pid/stat after the command name.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return statFields(string(b))
}

// statFields returns the fields of the text of /proc/PID/stat after the
// command name, which may hold spaces and parentheses: the first is the
// state, field 3 of proc(5).
func statFields(s string) []string {
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return nil
	}
	return strings.Fields(s[i+2:])
}

// ticks converts clock ticks (USER_HZ) to seconds.
func ticks(f []string, idx ...int) float64 {
	var sum float64
	for _, i := range idx {
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			sum += v
		}
	}
	return sum / 100
}

// procIO is what /proc/PID/io counts for a process: the bytes it caused
// to be written to storage (write_bytes: bbolt's page writes, the
// evidence a local store writes), and its read and write system calls
// (syscr, syscw: on sockets and files alike, vector and positioned forms
// included).
type procIO struct {
	written, reads, writes int64
}

// since is what io counted after io0.
func (io procIO) since(io0 procIO) procIO {
	return procIO{written: io.written - io0.written, reads: io.reads - io0.reads, writes: io.writes - io0.writes}
}

// procIOOf reads pid's procIO; false when the kernel does not say.
func procIOOf(pid int) (procIO, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return procIO{}, false
	}
	var io procIO
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ": ")
		var field *int64
		switch name {
		case "write_bytes":
			field = &io.written
		case "syscr":
			field = &io.reads
		case "syscw":
			field = &io.writes
		}
		if !ok || field == nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return procIO{}, false
		}
		*field = n
		found++
	}
	return io, found == 3
}

// memStat is a process's resident memory from /proc/PID/status: anonymous
// pages (the Go heap, stacks) apart from file pages (bbolt's mapped file,
// the binary), and the peak of the whole.
type memStat struct {
	anon, file, shmem, hwm int64
}

// procMem reads pid's memStat.
func procMem(pid int) memStat {
	var m memStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "RssAnon:":
			m.anon = v << 10
		case "RssFile:":
			m.file = v << 10
		case "RssShmem:":
			m.shmem = v << 10
		case "VmHWM:":
			m.hwm = v << 10
		}
	}
	return m
}

func (m memStat) String() string {
	return fmt.Sprintf("anonymous %s, file pages %s (peak RSS %s)", mib(m.anon), mib(m.file), mib(m.hwm))
}

// memSampler samples a process's memory every interval until stopped and
// keeps the largest anonymous and file figures seen.
type memSampler struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	peak   memStat
}

func sampleMem(pid int, every time.Duration) *memSampler {
	s := &memSampler{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			m := procMem(pid)
			s.mu.Lock()
			s.peak = memStat{anon: max(s.peak.anon, m.anon), file: max(s.peak.file, m.file), shmem: max(s.peak.shmem, m.shmem), hwm: max(s.peak.hwm, m.hwm)}
			s.mu.Unlock()
			select {
			case <-s.stopCh:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peaks.
func (s *memSampler) stop() memStat {
	close(s.stopCh)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}
