package s3_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// TestGetRange reads parts of an object with Object Lock, and a missing key.
func TestGetRange(t *testing.T) {
	ctx := context.Background()
	st, err := open(t, s3test.Bucket(), true)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("segment header\nrow-a 5\naaaaa\nrow-b 3\nbbb")
	if _, err := st.Put(ctx, "segments/x.seg", body, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off, n int64
		want   string
	}{{23, 5, "aaaaa"}, {37, 3, "bbb"}, {0, 7, "segment"}} {
		got, err := st.GetRange(ctx, "segments/x.seg", c.off, c.n)
		if err != nil || string(got) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", c.off, c.n, got, err, c.want)
		}
	}
	if _, err := st.GetRange(ctx, "segments/missing.seg", 0, 3); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing key: %v, want ErrNotFound", err)
	}
	var _ ledger.RangeReader = st
}
