package ledger

import "testing"

// After a restore from an old backup the published leaves the row store
// lacks may be many: fsck names maxListedPublished of them one by one and
// the rest in one finding, so its answer stays within what a client
// takes.
func TestPublishedLeavesListedAreBounded(t *testing.T) {
	for _, tc := range []struct{ from, to, want int64 }{
		{0, 3, 3},
		{100, 100 + maxListedPublished, 100 + maxListedPublished},
		{100, 100 + maxListedPublished + 1, 100 + maxListedPublished},
		{7, 7 + 500_000, 7 + maxListedPublished},
	} {
		if got := listedUpTo(tc.from, tc.to); got != tc.want {
			t.Errorf("listedUpTo(%d, %d) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
}
