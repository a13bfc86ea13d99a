package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pactledger/pactledger/ledger"
)

// Leases: a row per lease with its holder, a token that grows with every
// acquisition, and an expiry judged by the database's clock
// (clock_timestamp(), never a replica's). See
// docs/design/016-store-boundary.md.
//
// Each lease call is bounded by the lease's ttl or CommitTimeout,
// whichever is shorter (ReleaseLease: CommitTimeout): a call that takes
// longer than the lease lasts is of no use, and a database that stopped
// answering must not hold up the runner until the operating system gives
// the connection up. Running out of it is an error wrapping
// ledger.ErrUnavailable, and the runner tries again.
//
// A fenced write locks its lease's row from its lease check, its last
// statement (tx.checkFence), until its transaction ends, and a lease call
// waits for that lock; when the writer vanished, the server
// ends its transaction only once it has been idle for the writer's
// CommitTimeout (liveness.go). So no lease call waits for the row for
// long: it gets half of its time for the wait (lock_timeout), after which
// the server gives the statement up itself and the call answers
// unavailable, to be tried again.

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
	found := false
	err := s.leaseStatement(ctx, "acquire lease "+name, min(ttl, s.cfg.CommitTimeout), `
INSERT INTO leases (name, holder, token, expires_at)
VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE
SET holder = EXCLUDED.holder, token = leases.token + 1, expires_at = EXCLUDED.expires_at
WHERE leases.expires_at < clock_timestamp() OR leases.holder = EXCLUDED.holder
RETURNING token`, []any{name, holder, ttl.Microseconds()}, func(rows pgx.Rows) error {
		if !rows.Next() {
			return rows.Err()
		}
		found = true
		return rows.Scan(&token)
	}, nil)
	switch {
	case err != nil:
		return 0, err
	case !found:
		return 0, s.leaseHeld(ctx, name, min(ttl, s.cfg.CommitTimeout))
	}
	return uint64(token), nil
}

// leaseHeld is the error for lease name held by another holder: a
// *ledger.LeaseHeldError naming the holder and the lease's expiry, or,
// when they cannot be read within bound, ledger.ErrLeaseHeld alone.
func (s *Store) leaseHeld(ctx context.Context, name string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var (
		holder  string
		expires time.Time
	)
	if err := s.pool.QueryRow(ctx, "SELECT holder, expires_at FROM leases WHERE name = $1", name).Scan(&holder, &expires); err != nil {
		return fmt.Errorf("%w: lease %s", ledger.ErrLeaseHeld, name)
	}
	return &ledger.LeaseHeldError{Lease: name, Holder: holder, Expires: expires.UTC()}
}

// RenewLease implements ledger.Leases.
func (s *Store) RenewLease(ctx context.Context, name, holder string, token uint64, ttl time.Duration) error {
	if s.closed() {
		return ledger.ErrClosed
	}
	if err := ledger.CheckLeaseTTL(name, ttl); err != nil {
		return err
	}
	var tag pgconn.CommandTag
	err := s.leaseStatement(ctx, "renew lease "+name, min(ttl, s.cfg.CommitTimeout), `
UPDATE leases SET expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > clock_timestamp()`,
		[]any{name, holder, int64(token), ttl.Microseconds()}, nil, func(ct pgconn.CommandTag) error { tag = ct; return nil })
	if err != nil {
		return err
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
	return s.leaseStatement(ctx, "release lease "+name, s.cfg.CommitTimeout, `
UPDATE leases SET holder = '', expires_at = timestamptz '1970-01-01 00:00:00+00'
WHERE name = $1 AND holder = $2 AND token = $3`, []any{name, holder, int64(token)}, nil, nil)
}

// leaseStatement runs sql, one statement on the lease table, within
// bound, in one round trip with the setting of its transaction's
// lock_timeout: three quarters of the time it has (bound, or less when
// ctx's deadline comes first), so that the server gives up the wait
// before the caller gives up the call (an answer that says the call
// failed is not followed by its taking effect), while a renewal waiting
// behind its holder's own fenced writes, which lock the lease's row from
// their lease check to their commit, waits as long as it can. rows reads a statement's rows, or exec its
// command tag. Running out of bound, or of the wait for the lease's row,
// is an error wrapping ledger.ErrUnavailable; the caller's own
// cancellation is not.
func (s *Store) leaseStatement(ctx context.Context, what string, bound time.Duration, sql string, args []any, rows func(pgx.Rows) error, exec func(pgconn.CommandTag) error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, bound, outOfTime(bound))
	defer cancel()
	// The wait is counted from when the statement can be sent: getting a
	// connection takes its share of the time first.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, acquireErr(ctx, err))
	}
	defer conn.Release()
	deadline, _ := ctx.Deadline()
	wait := max(time.Until(deadline)*3/4, time.Millisecond)
	b := &pgx.Batch{}
	// A batch is one transaction: the setting holds for the statement
	// after it.
	b.Queue("SELECT set_config('lock_timeout', $1, true)", strconv.FormatInt(wait.Milliseconds(), 10))
	q := b.Queue(sql, args...)
	switch {
	case rows != nil:
		q.Query(rows)
	case exec != nil:
		q.Exec(exec)
	}
	err = conn.SendBatch(ctx, b).Close()
	switch {
	case err == nil:
		return nil
	case lockNotAvailable(err):
		return unavailableErr(fmt.Sprintf("%s: the lease's row stayed locked by another transaction for %s", what, wait), err)
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errOutOfTime):
		return unavailableErr(what, context.Cause(ctx))
	}
	return classify(what, err, nil)
}

// lockNotAvailable reports whether err is a statement that gave up
// waiting for a lock (lock_timeout, SQLSTATE 55P03).
func lockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
