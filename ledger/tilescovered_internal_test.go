package ledger

import (
	"context"
	"strings"
	"testing"
)

// keys is a KeptLister of a folder of keys, each one version.
type keys []string

func (k keys) ListKept(_ context.Context, prefix string, fn func(KeptKey) error) error {
	for _, key := range k {
		if rest, ok := strings.CutPrefix(key, prefix); ok && !strings.Contains(rest, "/") {
			if err := fn(KeptKey{Key: key}); err != nil {
				return err
			}
		}
	}
	return nil
}

// The tiles cover the leaves of the partial tiles whose width is written
// as the ledger writes it; one written with a sign or leading zeros
// names no tile a reader asks for, and covers nothing.
func TestTilesCoverOnlyWidthsAsTheLedgerWritesThem(t *testing.T) {
	for _, tc := range []struct {
		keys keys
		want int64
	}{
		{keys{"log/tile/0/000", "log/tile/0/001.p/44"}, 300},
		{keys{"log/tile/0/000", "log/tile/0/001.p/44", "log/tile/0/001.p/0244"}, 300},
		{keys{"log/tile/0/000", "log/tile/0/001.p/44", "log/tile/0/001.p/+244"}, 300},
		{keys{"log/tile/0/000", "log/tile/0/001.p/244"}, 500},
	} {
		got, err := tilesCovered(context.Background(), tc.keys, 0)
		if err != nil || got != tc.want {
			t.Errorf("tiles %q cover %d (%v), want %d", tc.keys, got, err, tc.want)
		}
	}
}
