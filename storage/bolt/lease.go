package bolt

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// leases is the lease table of one store. The file lock already keeps
// every other process out, so the table lives in the process; expiry is
// judged by the process's monotonic clock.
//
// A commit with a fenced member holds mu for reading from the fence check
// to the end of the commit, so a takeover (which holds it for writing)
// either comes before the check, and the fenced member fails, or waits for
// the commit.
type leases struct {
	mu     sync.RWMutex
	table  map[string]*lease
	tokens map[string]uint64 // the last token handed out for each name
}

type lease struct {
	holder  string
	token   uint64
	expires time.Time
}

func newLeases() *leases {
	return &leases{table: map[string]*lease{}, tokens: map[string]uint64{}}
}

// AcquireLease implements ledger.Leases.
func (s *Store) AcquireLease(_ context.Context, name, holder string, ttl time.Duration) (uint64, error) {
	if err := ledger.CheckLeaseTTL(name, ttl); err != nil {
		return 0, err
	}
	l := s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if cur := l.table[name]; cur != nil && cur.holder != holder && now.Before(cur.expires) {
		// Expiry by the monotonic clock, told as a wall time.
		return 0, &ledger.LeaseHeldError{Lease: name, Holder: cur.holder, Expires: now.Add(cur.expires.Sub(now)).Round(0).UTC()}
	}
	l.tokens[name]++
	l.table[name] = &lease{holder: holder, token: l.tokens[name], expires: now.Add(ttl)}
	return l.tokens[name], nil
}

// RenewLease implements ledger.Leases.
func (s *Store) RenewLease(_ context.Context, name, holder string, token uint64, ttl time.Duration) error {
	if err := ledger.CheckLeaseTTL(name, ttl); err != nil {
		return err
	}
	l := s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	cur := l.table[name]
	if cur == nil || cur.holder != holder || !l.heldLocked(name, token, now) {
		return fmt.Errorf("lease %s: %w", name, ledger.ErrLeaseLost)
	}
	cur.expires = now.Add(ttl)
	return nil
}

// ReleaseLease implements ledger.Leases.
func (s *Store) ReleaseLease(_ context.Context, name, holder string, token uint64) error {
	l := s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.table[name]; cur != nil && cur.holder == holder && cur.token == token {
		delete(l.table, name)
	}
	return nil
}

// heldLocked reports whether lease name is held under token and unexpired
// at now; the caller holds mu.
func (l *leases) heldLocked(name string, token uint64, now time.Time) bool {
	cur := l.table[name]
	return cur != nil && cur.token == token && now.Before(cur.expires)
}

// checkLocked returns an error wrapping ledger.ErrLeaseLost unless fence
// f still holds; the caller holds mu.
func (l *leases) checkLocked(f ledger.Fence) error {
	if !l.heldLocked(f.Lease, f.Token, time.Now()) {
		return fmt.Errorf("lease %s token %d: %w", f.Lease, f.Token, ledger.ErrLeaseLost)
	}
	return nil
}
