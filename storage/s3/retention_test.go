package s3_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/s3test"
)

// Retention reads what a version is locked under: COMPLIANCE until the
// date the ledger put it with, GOVERNANCE for one put so by another
// writer, nothing for one put with no retention.
func TestRetentionSaysWhatAVersionIsLockedUnder(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	loc, err := st.Put(ctx, "log/checkpoint", []byte("checkpoint\n"), until)
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{loc.VersionID, ""} {
		mode, got, put, err := st.Retention(ctx, "log/checkpoint", version)
		if err != nil || mode != "COMPLIANCE" || !got.Equal(until) || time.Since(put) > time.Minute || time.Until(put) > time.Minute {
			t.Fatalf("retention of version %q: %q until %v, put %v, %v; want COMPLIANCE until %v, put now", version, mode, got, put, err, until)
		}
	}
	c := rawClient(t)
	gov := minio.Governance
	if _, err := c.PutObject(ctx, bucket, "log/governed", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{Mode: gov, RetainUntilDate: until, SendContentMd5: true}); err != nil {
		t.Fatal(err)
	}
	if mode, got, _, err := st.Retention(ctx, "log/governed", ""); err != nil || mode != "GOVERNANCE" || !got.Equal(until) {
		t.Fatalf("retention of a version under GOVERNANCE: %q until %v, %v", mode, got, err)
	}
	if _, err := c.PutObject(ctx, bucket, "log/unlocked", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{SendContentMd5: true}); err != nil {
		t.Fatal(err)
	}
	if mode, got, _, err := st.Retention(ctx, "log/unlocked", ""); err != nil || mode != "" || !got.IsZero() {
		t.Fatalf("retention of a version under none: %q until %v, %v; want none", mode, got, err)
	}
}
