package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// probePages is how many 4-KiB pages one probe commit writes: about
// what a group commit of 30 rows writes to bbolt (26–30 KiB a row in
// the growth run's windows).
const probePages = 200

// probeCommits is how many probe commits are timed at each span in each
// of the probe's two rounds.
const probeCommits = 100

// runDiskProbe times, on the disk under dir, a write shaped like a bbolt
// commit: probePages pages of 4 KiB written where they fall, an fdatasync,
// one page rewritten at the file's start (the meta page) and another
// fdatasync. It writes a scratch file of size bytes first, then times the
// commit with its pages in one run and with its pages scattered at
// random over spans from 64 MiB up to size, the spans in two rounds in
// turn so that a drifting machine favours none. A bbolt commit reuses
// the pages its tree freed, so its pages lie scattered over the file: a
// disk that syncs scattered pages more slowly over a larger span commits
// more slowly as the file grows, whatever the B+tree's own work.
func runDiskProbe(w io.Writer, dir string, size int64) error {
	size = max(size&^(4096-1), 64<<20)
	path := filepath.Join(dir, "disk-probe")
	defer os.Remove(path)
	fmt.Fprintf(w, "\nthe disk: writing a %s scratch file for the probe (not measured)...\n", mib(size))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for off := int64(0); off < size; off += int64(len(chunk)) {
		if _, err := f.WriteAt(chunk[:min(int64(len(chunk)), size-off)], off); err != nil {
			return fmt.Errorf("disk probe: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("disk probe: %w", err)
	}

	spans := probeSpans(size)
	times := make([][]float64, len(spans)+1) // ms; the last: contiguous
	rnd := rand.New(rand.NewPCG(1, 2))
	for round := range 2 {
		for k := range times {
			i := k
			if round == 1 {
				i = len(times) - 1 - k
			}
			for range probeCommits {
				var pages []int64
				if i == len(spans) {
					pages = contiguousPages(rnd, size/4096)
				} else {
					pages = scatteredPages(rnd, spans[i]/4096)
				}
				d, err := probeCommit(f, pages)
				if err != nil {
					return fmt.Errorf("disk probe: %w", err)
				}
				times[i] = append(times[i], float64(d)/float64(time.Millisecond))
			}
		}
	}
	fmt.Fprint(w, formatDiskProbe(spans, times))
	return nil
}

// probeSpans are the spans the probe scatters its pages over: 64 MiB and
// each eight times the one before, up to size, and size itself.
func probeSpans(size int64) []int64 {
	var out []int64
	for s := int64(64 << 20); s < size; s *= 8 {
		out = append(out, s)
	}
	return append(out, size)
}

// scatteredPages picks probePages distinct pages at random among pages
// 1 to n-1 (page 0 is the meta page), in ascending order as bbolt writes
// them.
func scatteredPages(rnd *rand.Rand, n int64) []int64 {
	seen := make(map[int64]bool, probePages)
	out := make([]int64, 0, probePages)
	for len(out) < probePages {
		if p := 1 + rnd.Int64N(n-1); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// contiguousPages is probePages pages in one run starting at random
// among pages 1 to n-1.
func contiguousPages(rnd *rand.Rand, n int64) []int64 {
	start := 1 + rnd.Int64N(n-probePages)
	out := make([]int64, probePages)
	for i := range out {
		out[i] = start + int64(i)
	}
	return out
}

// probeCommit writes pages, syncs, rewrites page 0 and syncs again, and
// returns how long that took.
func probeCommit(f *os.File, pages []int64) (time.Duration, error) {
	var page [4096]byte
	page[0] = byte(len(pages))
	t0 := time.Now()
	for _, p := range pages {
		if _, err := f.WriteAt(page[:], p*4096); err != nil {
			return 0, err
		}
	}
	if err := fdatasync(f); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt(page[:], 0); err != nil {
		return 0, err
	}
	if err := fdatasync(f); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// formatDiskProbe prints the probe's medians, times in ms: the
// contiguous commit (times' last), then each span's, with the ratio to
// the smallest span.
func formatDiskProbe(spans []int64, times [][]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "the disk: a commit of %d pages of 4 KiB and two fdatasyncs, medians of %d:\n", probePages, len(times[len(spans)]))
	fmt.Fprintf(&b, "  pages in one run: %.2f ms\n", medianOf(times[len(spans)]))
	first := medianOf(times[0])
	for i, s := range spans {
		m := medianOf(times[i])
		fmt.Fprintf(&b, "  pages scattered over %s: %.2f ms (%.2f times over %s)\n", mib(s), m, m/max(first, 1e-9), mib(spans[0]))
	}
	return b.String()
}
