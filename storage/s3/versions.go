package s3

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// Version is one version of a key as a listing of the bucket's versions
// gives it.
type Version struct {
	Key, VersionID string
	// ETag is the version's entity tag without quotes: the hex MD5 of
	// its bytes for an object put in one part and not encrypted with a
	// customer's or KMS key, as the ledger puts its own.
	ETag         string
	Size         int64
	LastModified time.Time
	DeleteMarker bool
	// Latest reports that the version is its key's latest: a delete
	// marker that is hides the key from a read by name.
	Latest bool
}

// ListVersions calls fn for each version of each key under prefix,
// delete markers included, in the order S3 lists them (by key, each
// key's newest first). It keeps nothing: fn bounds what it keeps, and
// ctx how long the listing runs.
func (s *Store) ListVersions(ctx context.Context, prefix string, fn func(Version) error) (err error) {
	if err := s.ready(); err != nil {
		return err
	}
	began := time.Now()
	var fnErr error
	defer func() {
		if fnErr == nil {
			s.observe(began, err)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing's requests when it stops early
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, WithVersions: true, Recursive: true}) {
		if o.Err != nil {
			return fmt.Errorf("list the versions under %s: %w", prefix, o.Err)
		}
		v := Version{Key: o.Key, VersionID: o.VersionID, ETag: strings.Trim(o.ETag, `"`), Size: o.Size, LastModified: o.LastModified, DeleteMarker: o.IsDeleteMarker, Latest: o.IsLatest}
		if fnErr = fn(v); fnErr != nil {
			return fnErr
		}
	}
	return nil
}
