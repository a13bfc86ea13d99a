package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// The store's lock: every session of a store holds PostgreSQL's
// session-level advisory lock StoreLockKey shared, taken when the session
// opens (sessionLock, one statement with the liveness settings' round
// trip, and one more on a database that holds a move's record; none on
// the write path), and released by the server when the session ends,
// however it ends. Replicas share it; a move from a bbolt
// file (storage/move) takes it exclusive for as long as it runs, so that
// a move cannot begin while a ledgerd has a session on the database, and
// no ledgerd opens a session while a move runs: its connection is refused
// with an error wrapping ErrMoveRunning. The cost is one entry in the
// server's lock table per session.
//
// A ledgerd whose pool had closed every session (idle past pgxpool's
// 30 minutes) holds no lock, and a move may then begin; each new session
// also reads the move's record (table ledger_move, when the database has
// it) and refuses the session when it names a move that has not verified
// or another move than the one the store's first session found: the
// ledgerd's state (the log's head, its numbers) is the empty database's,
// and it must start again on the moved one. The table alone, with no
// move in it, is no move (a move refused for the data it found left one
// before 2026-12-07).

// Advisory lock keys (pg_advisory_lock's bigint) of the database.
const (
	// StoreLockKey is held shared by every session of a Store and
	// exclusive by a move from a bbolt file.
	StoreLockKey int64 = 0x7061_6374_0001 // "pact" 1
	// MoveLockKey is held exclusive by a move from a bbolt file for as
	// long as it runs: a second move of the same database finds it held.
	MoveLockKey int64 = 0x7061_6374_0002 // "pact" 2
)

var (
	// ErrMoveRunning: a move of a bbolt ledger into the database is
	// running (it holds the store's lock exclusive).
	ErrMoveRunning = errors.New("a move of a bbolt ledger into this database is running (`ledgerd migrate --from`): start ledgerd once it says \"move verified\"")
	// ErrMovedSinceOpen: a move of a bbolt ledger into the database
	// began after this store opened it.
	ErrMovedSinceOpen = errors.New("a move of a bbolt ledger into this database began after this ledgerd opened it: restart ledgerd once the move says \"move verified\"")
)

// sessionLock returns the part of the AfterConnect hook that takes the
// store's lock shared for the new session and checks that no move began
// since the first session of the store.
func sessionLock() func(context.Context, *pgx.Conn) error {
	var (
		mu    sync.Mutex
		known bool  // first is set
		first int64 // started_ns of the move the first session found, 0 for none
	)
	return func(ctx context.Context, c *pgx.Conn) error {
		var locked, recorded bool
		if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock_shared($1), to_regclass('ledger_move') IS NOT NULL", StoreLockKey).Scan(&locked, &recorded); err != nil {
			return fmt.Errorf("take the store's lock: %w", err)
		}
		if !locked {
			return ErrMoveRunning
		}
		var started int64
		verified := true
		if recorded {
			var at *int64
			err := c.QueryRow(ctx, "SELECT started_ns, verified_ns FROM ledger_move WHERE id = 1").Scan(&started, &at)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return fmt.Errorf("read the record of a move: %w", err)
			default:
				verified = at != nil
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !known {
			// A move that has not verified fails Open (checkMove).
			known, first = true, started
			return nil
		}
		if started != first || !verified {
			return ErrMovedSinceOpen
		}
		return nil
	}
}
