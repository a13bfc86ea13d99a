package ledger

import (
	"fmt"
	"testing"
)

func leafBytes(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "leaf %d", from+i)
	}
	return out
}

// recentLeaves holds the leaves stored last, contiguous and bounded; a
// round that does not follow them (another integrator stored some in
// between) replaces them.
func TestRecentLeaves(t *testing.T) {
	var r recentLeaves
	check := func(idx int64, want bool) {
		t.Helper()
		d, ok := r.get(idx)
		if ok != want || (ok && string(d) != fmt.Sprintf("leaf %d", idx)) {
			t.Errorf("get(%d) = %q, %v; want held %v", idx, d, ok, want)
		}
	}
	r.add(10, leafBytes(10, 5))
	r.add(15, leafBytes(15, 5))
	check(9, false)
	check(10, true)
	check(19, true)
	check(20, false)

	// Leaves 20-29 were stored by another integrator: 30 on replace them.
	r.add(30, leafBytes(30, 3))
	check(19, false)
	check(29, false)
	check(30, true)
	check(32, true)

	// Past the bound, the oldest go.
	r.add(33, leafBytes(33, recentLeavesMax))
	check(33, true)
	check(32, false)
	check(32+recentLeavesMax, true)
	if len(r.data) != recentLeavesMax {
		t.Errorf("%d leaves held, want at most %d", len(r.data), recentLeavesMax)
	}
}
