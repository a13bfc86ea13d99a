package move

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pactledger/pactledger/storage/postgres"
)

// ErrServed: a ledgerd has the database open (a session holding the
// store's lock, or an unexpired lease).
var ErrServed = errors.New("a ledgerd is running on this database: stop it first")

// lockDatabase opens a session of its own on pc's database and takes
// there, for as long as it stays open, the move's lock (a second move
// fails with ErrConcurrent) and the store's lock exclusive (a database a
// ledgerd has a session on fails with ErrServed, and no ledgerd opens one
// until the session closes: storage/postgres lock.go). Closing the
// session releases both, and the server releases them when the move dies.
func lockDatabase(ctx context.Context, pc *pgxpool.Config) (*pgx.Conn, error) {
	cc := pc.ConnConfig.Copy()
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cc); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	fail := func(err error) (*pgx.Conn, error) {
		conn.Close(context.Background())
		return nil, err
	}
	var mine, store bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", postgres.MoveLockKey).Scan(&mine); err != nil {
		return fail(fmt.Errorf("take the move's lock: %w", err))
	}
	if !mine {
		return fail(ErrConcurrent)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", postgres.StoreLockKey).Scan(&store); err != nil {
		return fail(fmt.Errorf("take the store's lock: %w", err))
	}
	if !store {
		return fail(fmt.Errorf("%w (a session of a ledgerd holds the store's lock)", ErrServed))
	}
	// The session sits idle while the move runs: the server's
	// idle_session_timeout (PostgreSQL 14 on) would end it, and the locks
	// with it. checkLock finds a session that ended for any reason.
	if _, err := conn.Exec(ctx, "SELECT set_config(name, '0', false) FROM pg_settings WHERE name = 'idle_session_timeout'"); err != nil {
		return fail(fmt.Errorf("keep the move's session open: %w", err))
	}
	// A ledgerd with no session open at the moment still holds its
	// leases while it runs.
	var leases bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('leases') IS NOT NULL").Scan(&leases); err != nil {
		return fail(fmt.Errorf("read the leases: %w", err))
	}
	if !leases {
		return conn, nil
	}
	var name, holder string
	var until time.Time
	err = conn.QueryRow(ctx, "SELECT name, holder, expires_at FROM leases WHERE expires_at > clock_timestamp() ORDER BY expires_at DESC LIMIT 1").Scan(&name, &holder, &until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return conn, nil
	case err != nil:
		return fail(fmt.Errorf("read the leases: %w", err))
	}
	return fail(fmt.Errorf("%w (%s holds the lease %q until %s; a ledgerd that crashed keeps its leases until they expire)",
		ErrServed, holder, name, until.UTC().Format(time.RFC3339)))
}

// checkLock returns an error wrapping ErrLockLost unless the session
// holding the move's locks still answers: a session that answers holds
// them, for only its end releases them. The move checks before each chunk
// it writes and before it marks the move verified, so that a move whose
// lock was lost (and that a second move or a ledgerd may meet) writes
// nothing more.
func (m *mover) checkLock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var one int
	if err := m.lock.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: the session holding it ended (%v), as a server's idle_session_timeout, a restart or pg_terminate_backend ends one; the move is not verified: run the move again", ErrLockLost, err)
	}
	return nil
}
