// Package s3 is write-once evidence storage on any S3 service with Object
// Lock (AWS S3, MinIO, Ceph RGW, versitygw): every object is created
// create-only (If-None-Match: *) with COMPLIANCE retention until its
// retain-until date.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/pactledger/pactledger/ledger"
)

// ErrNoObjectLock: the bucket does not have Object Lock enabled.
var ErrNoObjectLock = errors.New("bucket does not have object lock enabled")

// Config locates the bucket.
type Config struct {
	Endpoint  string // host:port
	Bucket    string
	AccessKey string
	SecretKey string
	Region    string // default us-east-1
	Insecure  bool   // plain http (loopback test servers)
	// CreateBucket creates the bucket with Object Lock when it is missing.
	CreateBucket bool
}

// Store is a ledger.ObjectStore on an S3 bucket with Object Lock.
type Store struct {
	c      *minio.Client
	bucket string
}

// Open connects and checks that the bucket exists with Object Lock enabled;
// it refuses a bucket without it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("s3: endpoint and bucket are required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       !cfg.Insecure,
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client %s: %w", cfg.Endpoint, err)
	}
	s := &Store{c: c, bucket: cfg.Bucket}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("s3 bucket %s at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		if !cfg.CreateBucket {
			return nil, fmt.Errorf("s3 bucket %s at %s does not exist", cfg.Bucket, cfg.Endpoint)
		}
		if err := c.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region, ObjectLocking: true}); err != nil {
			return nil, fmt.Errorf("create s3 bucket %s with object lock: %w", cfg.Bucket, err)
		}
	}
	enabled, _, _, _, err := c.GetObjectLockConfig(ctx, cfg.Bucket)
	if err != nil || enabled != "Enabled" {
		return nil, fmt.Errorf("s3 bucket %s: %w", cfg.Bucket, ErrNoObjectLock)
	}
	return s, nil
}

// Put implements ledger.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, body []byte, retainUntil time.Time) (ledger.Location, error) {
	opts := minio.PutObjectOptions{
		ContentType:      "application/json",
		Mode:             minio.Compliance,
		RetainUntilDate:  retainUntil.UTC(),
		DisableMultipart: true,
	}
	opts.SetMatchETagExcept("*")
	info, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(body), int64(len(body)), opts)
	loc := ledger.Location{Store: "s3", Bucket: s.bucket, Key: key, RetainUntil: retainUntil.UTC()}
	if err == nil {
		loc.VersionID = info.VersionID
		return loc, nil
	}
	if minio.ToErrorResponse(err).StatusCode != http.StatusPreconditionFailed {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	// Already there: from an earlier attempt whose outbox removal did not commit.
	have, err := s.Get(ctx, key)
	if err != nil {
		return loc, err
	}
	if !bytes.Equal(have, body) {
		return loc, fmt.Errorf("put %s: a different object already holds this key", key)
	}
	st, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err == nil {
		loc.VersionID = st.VersionID
		if t, err := time.Parse(time.RFC3339, st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")); err == nil {
			loc.RetainUntil = t.UTC()
		}
	}
	return loc, nil
}

// Get implements ledger.ObjectStore.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	obj, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil, fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
		}
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return b, nil
}

// Ping implements ledger.ObjectStore.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.c.BucketExists(ctx, s.bucket)
	return err
}

// SetLegalHold implements ledger.ObjectStore.
func (s *Store) SetLegalHold(ctx context.Context, loc ledger.Location, on bool) error {
	st := minio.LegalHoldDisabled
	if on {
		st = minio.LegalHoldEnabled
	}
	if err := s.c.PutObjectLegalHold(ctx, s.bucket, loc.Key, minio.PutObjectLegalHoldOptions{VersionID: loc.VersionID, Status: &st}); err != nil {
		return fmt.Errorf("legal hold %s: %w", loc.Key, err)
	}
	return nil
}

// ExtendRetention implements ledger.ObjectStore.
func (s *Store) ExtendRetention(ctx context.Context, loc ledger.Location, until time.Time) error {
	st, err := s.c.StatObject(ctx, s.bucket, loc.Key, minio.StatObjectOptions{VersionID: loc.VersionID})
	if err != nil {
		return fmt.Errorf("retention of %s: %w", loc.Key, err)
	}
	if cur, err := time.Parse(time.RFC3339, st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date")); err == nil && !until.After(cur) {
		return nil // never shorten
	}
	mode := minio.Compliance
	until = until.UTC()
	if err := s.c.PutObjectRetention(ctx, s.bucket, loc.Key, minio.PutObjectRetentionOptions{Mode: &mode, RetainUntilDate: &until, VersionID: loc.VersionID}); err != nil {
		return fmt.Errorf("extend retention of %s: %w", loc.Key, err)
	}
	return nil
}

// Delete implements ledger.ObjectStore: it removes the object's version.
// The bucket refuses while the version is retained or under legal hold.
func (s *Store) Delete(ctx context.Context, loc ledger.Location) error {
	if err := s.c.RemoveObject(ctx, s.bucket, loc.Key, minio.RemoveObjectOptions{VersionID: loc.VersionID}); err != nil {
		return fmt.Errorf("delete %s: %w", loc.Key, err)
	}
	return nil
}
