package localdir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/pactledger/pactledger/ledger"
)

// maxRange bounds one range read: a bundle is at most one request body.
const maxRange = 64 << 20

// GetRange implements ledger.RangeReader: length bytes of key from offset.
func (s *Store) GetRange(_ context.Context, key string, offset, length int64) ([]byte, error) {
	if offset < 0 || length < 0 || length > maxRange {
		return nil, fmt.Errorf("get %s: range %d+%d out of bounds", key, offset, length)
	}
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer f.Close()
	b := make([]byte, length)
	n, err := f.ReadAt(b, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return b[:n], nil
}
