package ledger

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decimalPrefixes starts exactly the numbers of its range, zero-padded as
// AccessKey writes them, with few prefixes.
func TestDecimalPrefixesStartExactlyTheRange(t *testing.T) {
	for _, tc := range []struct {
		first, last uint64
		want        []string
	}{
		{7, 7, []string{"00000000000000000007"}},
		{10, 19, []string{"0000000000000000001"}},
		{1, 1000, []string{
			"00000000000000000001", "00000000000000000002", "00000000000000000003", "00000000000000000004",
			"00000000000000000005", "00000000000000000006", "00000000000000000007", "00000000000000000008",
			"00000000000000000009", "0000000000000000001", "0000000000000000002", "0000000000000000003",
			"0000000000000000004", "0000000000000000005", "0000000000000000006", "0000000000000000007",
			"0000000000000000008", "0000000000000000009", "000000000000000001", "000000000000000002",
			"000000000000000003", "000000000000000004", "000000000000000005", "000000000000000006",
			"000000000000000007", "000000000000000008", "000000000000000009", "00000000000000001000",
		}},
	} {
		if got := decimalPrefixes(tc.first, tc.last); !slices.Equal(got, tc.want) {
			t.Errorf("decimalPrefixes(%d, %d) = %q, want %q", tc.first, tc.last, got, tc.want)
		}
	}
	for _, r := range [][2]uint64{{1234, 1299}, {999, 1001}, {5, 12345}, {18446744073709551610, 18446744073709551615}} {
		ps := decimalPrefixes(r[0], r[1])
		for n := r[0] - min(r[0], 3); n <= r[1]+3 && n >= r[0]-min(r[0], 3); n++ {
			s := AccessKey(n, n)
			in := slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(s, accessPrefix+p) })
			if in != (n >= r[0] && n <= r[1]) {
				t.Fatalf("range %d–%d: %d (%s) started by %q: %v", r[0], r[1], n, strconv.FormatUint(n, 10), ps, in)
			}
			if n == ^uint64(0) {
				break
			}
		}
	}
}

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
