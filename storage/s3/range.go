package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/ledger"
)

// maxRange bounds one range read: a bundle is at most one request body.
const maxRange = 64 << 20

// GetRange implements ledger.RangeReader: length bytes of key from offset,
// one ranged GET of its latest version.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	return s.GetRangeVersion(ctx, key, "", offset, length)
}

// GetRangeVersion implements ledger.VersionReader: GetRange of the key's
// version (its latest for "").
func (s *Store) GetRangeVersion(ctx context.Context, key, version string, offset, length int64) ([]byte, error) {
	began := time.Now()
	b, err := s.getRange(ctx, key, version, offset, length)
	if err == nil || errors.Is(err, ledger.ErrNotFound) {
		s.observe(began, nil) // an answer
	} else {
		s.observe(began, err)
	}
	return b, err
}

func (s *Store) getRange(ctx context.Context, key, version string, offset, length int64) ([]byte, error) {
	if offset < 0 || length <= 0 || length > maxRange {
		return nil, fmt.Errorf("get %s: range %d+%d out of bounds", key, offset, length)
	}
	opts := minio.GetObjectOptions{VersionID: version}
	if err := opts.SetRange(offset, offset+length-1); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	obj, err := s.c.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, length))
	if err != nil {
		return nil, getError(key, err)
	}
	return b, nil
}
