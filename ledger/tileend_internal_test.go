package ledger

import (
	"math"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// tileEnd is the tree size a tile needs, and math.MaxInt64 for every
// tile no tree of int64 leaves holds, however its product would wrap.
func TestTileEndOfTilesNoTreeHolds(t *testing.T) {
	for _, c := range []struct {
		path string
		want int64
	}{
		{"tile/8/0/000", 256},
		{"tile/8/0/001.p/45", 301},
		{"tile/8/1/000.p/1", 256},
		{"tile/8/2/003", 4 << 24},
		{"tile/8/6/126", 127 << 56},
		{"tile/8/6/127", math.MaxInt64}, // ends at 2^63
		{"tile/8/7/000", math.MaxInt64},
		{"tile/8/7/000.p/127", 127 << 56},
		{"tile/8/7/000.p/128", math.MaxInt64},
		{"tile/8/7/000.p/200", math.MaxInt64},
		{"tile/8/8/000", math.MaxInt64},
		{"tile/8/0/x036/x028/x797/x018/x963/967.p/1", math.MaxInt64 - 254}, // tile 2^55-1: its first leaf is 2^63-256
		{"tile/8/0/x036/x028/x797/x018/x963/967", math.MaxInt64},
		{"tile/8/0/x036/x028/x797/x018/x963/968", math.MaxInt64},
	} {
		tile, err := tlog.ParseTilePath(c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if got := tileEnd(tile); got != c.want {
			t.Errorf("tileEnd(%s) = %d, want %d", c.path, got, c.want)
		}
	}
}
