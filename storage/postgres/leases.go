package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// Leases: a row per lease with its holder, a token that grows with every
// acquisition, and an expiry judged by the database's clock
// (clock_timestamp(), never a replica's). See
// docs/design/016-store-boundary.md.

// AcquireLease implements ledger.Leases: one upsert takes the lease when
// it is new, expired or already the holder's, and returns the new token.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (uint64, error) {
	if s.closed() {
		return 0, ledger.ErrClosed
	}
	if err := ledger.CheckLeaseTTL(name, ttl); err != nil {
		return 0, err
	}
	var token int64
	err := s.pool.QueryRow(ctx, `
INSERT INTO leases (name, holder, token, expires_at)
VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE
SET holder = EXCLUDED.holder, token = leases.token + 1, expires_at = EXCLUDED.expires_at
WHERE leases.expires_at < clock_timestamp() OR leases.holder = EXCLUDED.holder
RETURNING token`, name, holder, ttl.Microseconds()).Scan(&token)
	switch {
	case err == nil:
		return uint64(token), nil
	case isNoRows(err):
		return 0, fmt.Errorf("%w: lease %s", ledger.ErrLeaseHeld, name)
	}
	return 0, classify("acquire lease "+name, err, nil)
}

// RenewLease implements ledger.Leases.
func (s *Store) RenewLease(ctx context.Context, name, holder string, token uint64, ttl time.Duration) error {
	if s.closed() {
		return ledger.ErrClosed
	}
	if err := ledger.CheckLeaseTTL(name, ttl); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `
UPDATE leases SET expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()`, name, holder, int64(token), ttl.Microseconds())
	if err != nil {
		return classify("renew lease "+name, err, nil)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s under token %d", ledger.ErrLeaseLost, name, token)
	}
	return nil
}

// ReleaseLease implements ledger.Leases: the lease expires at once, so
// that any holder may take it.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string, token uint64) error {
	if s.closed() {
		return ledger.ErrClosed
	}
	_, err := s.pool.Exec(ctx, `
UPDATE leases SET holder = '', expires_at = timestamptz '1970-01-01 00:00:00+00'
WHERE name = $1 AND holder = $2 AND token = $3`, name, holder, int64(token))
	if err != nil {
		return classify("release lease "+name, err, nil)
	}
	return nil
}
