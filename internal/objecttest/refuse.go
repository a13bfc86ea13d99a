package objecttest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// ErrPutRefused is what a RefusingPuts answers a put of a key it refuses.
var ErrPutRefused = errors.New("put refused")

// RefusingPuts is an evidence directory that refuses the puts of the keys
// Refuse names, as a bucket that turns one object down while it takes the
// others; everything else, listings of kept keys included, is the
// directory's.
type RefusingPuts struct {
	*localdir.Store
	mu     sync.Mutex
	refuse map[string]bool
}

// NewRefusingPuts wraps dir, refusing the puts of keys.
func NewRefusingPuts(dir *localdir.Store, keys ...string) *RefusingPuts {
	s := &RefusingPuts{Store: dir, refuse: map[string]bool{}}
	for _, k := range keys {
		s.refuse[k] = true
	}
	return s
}

// Put implements ledger.ObjectStore.
func (s *RefusingPuts) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	s.mu.Lock()
	no := s.refuse[key]
	s.mu.Unlock()
	if no {
		return ledger.Location{}, ErrPutRefused
	}
	return s.Store.Put(ctx, key, body, until)
}

// Refuse starts (on) or stops refusing the puts of key.
func (s *RefusingPuts) Refuse(key string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse[key] = on
}
