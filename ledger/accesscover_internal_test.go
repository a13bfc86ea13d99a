package ledger

import (
	"slices"
	"testing"
)

// accessCover reports the runs of numbers no batch holds, from the oldest
// record kept to the last number, and none below the oldest batch.
func TestAccessCoverFindsTheNumbersNoBatchHolds(t *testing.T) {
	c := &accessCover{oldest: 3, last: 20, gapless: true, known: true, pending: []accessSpan{{8, 9}, {19, 19}}}
	for _, s := range []accessSpan{{1, 2}, {3, 5}, {10, 12}, {15, 16}} {
		c.see(s.first, s.last)
	}
	want := []accessSpan{{6, 7}, {13, 14}, {17, 18}, {20, 20}}
	if got := c.end(); !slices.Equal(got, want) {
		t.Fatalf("gaps %v, want %v", got, want)
	}
	c = &accessCover{oldest: 5, last: 9, gapless: true, known: true}
	c.see(7, 9) // 5 and 6: records written before the log was anchored
	if got := c.end(); len(got) != 0 {
		t.Fatalf("gaps %v below the oldest batch", got)
	}
}
