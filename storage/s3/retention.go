package s3

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/ledger"
)

// Retention returns the Object Lock retention of key's version (its
// latest for ""): its mode, "COMPLIANCE" or "GOVERNANCE", and its
// retain-until date ("" and the zero time for a version under none), and
// when the version was put (its Last-Modified). A
// reader who does not write to the bucket (an auditor) learns from it
// whether anyone could remove the version: under COMPLIANCE nobody can
// before the date, under GOVERNANCE whoever may bypass it can.
func (s *Store) Retention(ctx context.Context, key, version string) (mode string, until, put time.Time, err error) {
	began := time.Now()
	defer func() { s.observe(began, err) }()
	// The lock's headers of a HEAD, as S3 gives them to a reader of the
	// version: some servers answer GetObjectRetention in another XML
	// element than S3's.
	st, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{VersionID: version})
	if err != nil {
		return "", time.Time{}, time.Time{}, fmt.Errorf("retention: %w", getError(key, err))
	}
	put = st.LastModified.UTC()
	mode = st.Metadata.Get("X-Amz-Object-Lock-Mode")
	if v := st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"); v != "" {
		if until, err = time.Parse(time.RFC3339, v); err != nil {
			return "", time.Time{}, time.Time{}, fmt.Errorf("retention of %s: retain-until %q: %w", key, v, err)
		}
		until = until.UTC()
	}
	return mode, until, put, nil
}

// LegalHold implements ledger.LegalHoldReader, from the lock's header of
// a HEAD of the version (X-Amz-Object-Lock-Legal-Hold).
func (s *Store) LegalHold(ctx context.Context, loc ledger.Location) (on bool, err error) {
	began := time.Now()
	defer func() { s.observe(began, err) }()
	st, err := s.c.StatObject(ctx, s.bucket, loc.Key, minio.StatObjectOptions{VersionID: loc.VersionID})
	if err != nil {
		return false, fmt.Errorf("legal hold: %w", getError(loc.Key, err))
	}
	return strings.EqualFold(st.Metadata.Get("X-Amz-Object-Lock-Legal-Hold"), "ON"), nil
}
