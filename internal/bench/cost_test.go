package bench

import (
	"slices"
	"strings"
	"testing"
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
