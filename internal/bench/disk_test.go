package bench

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestProbeSpans(t *testing.T) {
	for _, c := range []struct {
		size int64
		want []int64
	}{
		{64 << 20, []int64{64 << 20}},
		{100 << 20, []int64{64 << 20, 100 << 20}},
		{6 << 30, []int64{64 << 20, 512 << 20, 4 << 30, 6 << 30}},
	} {
		if got := probeSpans(c.size); !slices.Equal(got, c.want) {
			t.Errorf("probeSpans(%d) = %v, want %v", c.size, got, c.want)
		}
	}
}

// TestProbePages: scattered pages are distinct, ascending and never the
// meta page; contiguous ones one run inside the file.
func TestProbePages(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		p := scatteredPages(rnd, 1000)
		if len(p) != probePages || !slices.IsSorted(p) || p[0] < 1 || p[len(p)-1] >= 1000 {
			t.Fatalf("scatteredPages: %d pages from %d to %d, sorted %v", len(p), p[0], p[len(p)-1], slices.IsSorted(p))
		}
		if len(slices.Compact(slices.Clone(p))) != probePages {
			t.Fatal("scatteredPages repeated a page")
		}
		c := contiguousPages(rnd, 1000)
		if len(c) != probePages || c[0] < 1 || c[len(c)-1] >= 1000 || c[len(c)-1]-c[0] != probePages-1 {
			t.Fatalf("contiguousPages: %d pages from %d to %d", len(c), c[0], c[len(c)-1])
		}
	}
}

func TestFormatDiskProbe(t *testing.T) {
	got := formatDiskProbe([]int64{64 << 20, 512 << 20}, [][]float64{{5, 4, 6}, {10, 12, 11}, {3, 2, 2}})
	want := "the disk: a commit of 200 pages of 4 KiB and two fdatasyncs, medians of 3:\n" +
		"  pages in one run: 2.00 ms\n" +
		"  pages scattered over 64 MiB: 5.00 ms (1.00 times over 64 MiB)\n" +
		"  pages scattered over 512 MiB: 11.00 ms (2.20 times over 64 MiB)\n"
	if got != want {
		t.Errorf("formatDiskProbe:\n%s\nwant:\n%s", got, want)
	}
}

// TestRunDiskProbe runs the probe over its smallest file and reads its
// figures back: each a positive time, and the scratch file removed.
func TestRunDiskProbe(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	if err := runDiskProbe(&b, dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"writing a 64 MiB scratch file", "medians of 200:", "pages in one run: ", "pages scattered over 64 MiB: "} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, " 0.00 ms") {
		t.Errorf("a probe time of zero:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("the scratch file was left behind: %v", left)
	}
}
