package ledger

import (
	"slices"
	"testing"
)

func TestSpansLeft(t *testing.T) {
	incs := func(seqs ...uint64) []*IncidentRecord {
		var out []*IncidentRecord
		for _, s := range seqs {
			out = append(out, &IncidentRecord{ID: IncidentID(s)})
		}
		return out
	}
	for _, c := range []struct {
		name   string
		lo, hi uint64
		found  []*IncidentRecord
		want   []seqSpan
	}{
		{"none found", 3, 7, nil, []seqSpan{{3, 7}}},
		{"all found", 3, 5, incs(5, 4, 3), nil},
		{"the ends found", 3, 7, incs(7, 3), []seqSpan{{4, 6}}},
		{"the middle found", 3, 7, incs(5), []seqSpan{{6, 7}, {3, 4}}},
		{"one number, found", 1, 1, incs(1), nil},
		{"above the highest read, up to the newest found", 10, 14, incs(14, 11), []seqSpan{{12, 13}, {10, 10}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spansLeft(c.lo, c.hi, c.found); !slices.Equal(got, c.want) {
				t.Fatalf("spansLeft(%d, %d, found) = %v, want %v", c.lo, c.hi, got, c.want)
			}
		})
	}
}

// Gaps far below the highest incident number are numbers whose writes
// rolled back: a sweep does not read them again page after page.
func TestRecentGapsKeepsOnlyThoseNearTheTop(t *testing.T) {
	top := uint64(10_000)
	gaps := []seqSpan{{9_990, 9_995}, {5_900, 5_910}, {5_000, 5_100}, {2, 3}}
	want := []seqSpan{{9_990, 9_995}, {top - gapWindow + 1, 5_910}}
	if got := recentGaps(gaps, top); !slices.Equal(got, want) {
		t.Fatalf("recentGaps = %v, want %v", got, want)
	}
	if got := recentGaps(gaps[3:], 100); !slices.Equal(got, gaps[3:]) {
		t.Fatalf("below the window: %v", got)
	}
}
