package s3_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/s3"
)

var srv *s3test.Server

func TestMain(m *testing.M) { s3test.Main(m, &srv) }

func rawClient(t *testing.T) *minio.Client {
	c, err := minio.New(srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func open(t *testing.T, bucket string, create bool) (*s3.Store, error) {
	return s3.Open(context.Background(), s3.Config{Endpoint: srv.Endpoint, Bucket: bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true, CreateBucket: create})
}

func TestRefusesBucketWithoutObjectLock(t *testing.T) {
	bucket := s3test.Bucket()
	if err := rawClient(t).MakeBucket(context.Background(), bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, bucket, false); !errors.Is(err, s3.ErrNoObjectLock) {
		t.Fatalf("open without object lock: %v, want ErrNoObjectLock", err)
	}
	if _, err := open(t, s3test.Bucket(), false); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("open missing bucket: %v", err)
	}
}

func TestWriteOnceCompliance(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	body := []byte(`{"receiptJws":"x"}`)
	loc, err := st.Put(ctx, "rows/abc.json", body, until)
	if err != nil {
		t.Fatal(err)
	}
	if loc.VersionID == "" || loc.Store != "s3" || loc.Bucket != bucket {
		t.Fatalf("location: %+v", loc)
	}
	// Retention is COMPLIANCE until the given date.
	c := rawClient(t)
	info, err := c.StatObject(ctx, bucket, "rows/abc.json", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Metadata.Get("X-Amz-Object-Lock-Mode"); mode != "COMPLIANCE" {
		t.Fatalf("lock mode %q", mode)
	}
	got, err := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
	if err != nil || !got.Equal(until) {
		t.Fatalf("retain until %v (%v), want %v", got, err, until)
	}
	// The same bytes again are accepted (a retried upload); other bytes are not.
	if _, err := st.Put(ctx, "rows/abc.json", body, until); err != nil {
		t.Fatalf("idempotent put: %v", err)
	}
	// Other bytes are ErrObjectExists, which the uploader moves to the dead
	// letters at once rather than retrying for ever.
	if _, err := st.Put(ctx, "rows/abc.json", []byte(`{"receiptJws":"forged"}`), until); !errors.Is(err, ledger.ErrObjectExists) {
		t.Fatalf("overwrite through the store: %v, want ErrObjectExists", err)
	}
	// Straight S3: an overwrite with If-None-Match fails, deleting the locked version fails.
	opts := minio.PutObjectOptions{DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	if _, err := c.PutObject(ctx, bucket, "rows/abc.json", bytes.NewReader([]byte("x")), 1, opts); err == nil {
		t.Fatal("create-only overwrite through S3 succeeded")
	}
	if err := c.RemoveObject(ctx, bucket, "rows/abc.json", minio.RemoveObjectOptions{VersionID: loc.VersionID}); err == nil {
		t.Fatal("deleting a COMPLIANCE-locked version succeeded")
	}
	if err := c.RemoveObject(ctx, bucket, "rows/abc.json", minio.RemoveObjectOptions{VersionID: loc.VersionID, GovernanceBypass: true}); err == nil {
		t.Fatal("governance bypass deleted a COMPLIANCE-locked version")
	}
	// Shortening retention is refused.
	shorter := time.Now().Add(time.Hour)
	mode := minio.Compliance
	if err := c.PutObjectRetention(ctx, bucket, "rows/abc.json", minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &shorter, VersionID: loc.VersionID}); err == nil {
		t.Fatal("shortening COMPLIANCE retention succeeded")
	}
	// The original bytes are still there.
	have, err := st.Get(ctx, "rows/abc.json")
	if err != nil || !bytes.Equal(have, body) {
		t.Fatalf("get after attacks: %q %v", have, err)
	}
	if _, err := st.Get(ctx, "rows/missing.json"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing object: %v", err)
	}
}

// The same object put again with a later retain-until is retained for
// the later put too (a JWKS snapshot named anew by a row of a longer
// class), as in an evidence directory; an earlier one leaves it as it is.
func TestPutAgainRetainsForTheNewPut(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	st, err := open(t, bucket, true)
	if err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	later := soon.Add(90 * 24 * time.Hour)
	first, err := st.Put(ctx, "jwks/s.json", []byte("keys"), soon)
	if err != nil {
		t.Fatal(err)
	}
	retained := func() time.Time {
		t.Helper()
		info, err := rawClient(t).StatObject(ctx, bucket, "jwks/s.json", minio.StatObjectOptions{VersionID: first.VersionID})
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339, info.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	again, err := st.Put(ctx, "jwks/s.json", []byte("keys"), later)
	if err != nil || again.VersionID != first.VersionID || !again.RetainUntil.Equal(later) {
		t.Fatalf("put again for longer: %+v %v, want version %s until %v", again, err, first.VersionID, later)
	}
	if got := retained(); !got.Equal(later) {
		t.Fatalf("the bucket retains it until %v, want %v", got, later)
	}
	shorter, err := st.Put(ctx, "jwks/s.json", []byte("keys"), soon)
	if err != nil || !shorter.RetainUntil.Equal(later) || !retained().Equal(later) {
		t.Fatalf("put again for less: %+v %v, want it kept until %v", shorter, err, later)
	}
}
