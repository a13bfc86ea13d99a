package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/storage/s3"
)

// ListVersions gives every version of each key under the prefix, the
// delete marker over one too, with the MD5 of each version's bytes as
// its entity tag and which version is its key's latest.
func TestListVersionsGivesEveryVersion(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	c := rawClient(t)
	until := time.Now().Add(time.Hour)
	for _, body := range []string{"first\n", "second\n"} {
		if _, err := c.PutObject(ctx, bucket, "log/tile/0/000.p/1", bytes.NewReader([]byte(body)), int64(len(body)), minio.PutObjectOptions{Mode: minio.Compliance, RetainUntilDate: until, SendContentMd5: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Put(ctx, "log/tile/0/001", []byte("third\n"), until); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveObject(ctx, bucket, "log/tile/0/001", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "log/checkpoint", []byte("elsewhere\n"), until); err != nil {
		t.Fatal(err)
	}
	md5of := func(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }
	var got []s3.Version
	if err := st.ListVersions(ctx, "log/tile/0/", func(v s3.Version) error { got = append(got, v); return nil }); err != nil {
		t.Fatal(err)
	}
	bodies := map[string]bool{md5of("first\n"): false, md5of("second\n"): false, md5of("third\n"): false}
	markers := 0
	for _, v := range got {
		switch {
		case v.DeleteMarker:
			markers++
			if v.Key != "log/tile/0/001" || !v.Latest {
				t.Errorf("the delete marker: %+v", v)
			}
		case v.VersionID == "" || v.Size == 0:
			t.Errorf("a version without its id or size: %+v", v)
		default:
			if _, ok := bodies[v.ETag]; !ok {
				t.Errorf("a version whose tag is not the MD5 of any body put: %+v", v)
			}
			bodies[v.ETag] = true
			if v.ETag == md5of("second\n") != v.Latest {
				t.Errorf("which version is the latest: %+v", v)
			}
		}
	}
	for tag, seen := range bodies {
		if !seen {
			t.Errorf("no version tagged %s in %+v", tag, got)
		}
	}
	if len(got) != 4 || markers != 1 {
		t.Errorf("listed %d versions, %d delete markers, want 4 and 1: %+v", len(got), markers, got)
	}
}
