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
// trip, none on the write path), and released by the server when the
// session ends, however it ends. Replicas share it; a move from a bbolt
// file (storage/move) takes it exclusive for as long as it runs, so that
// a move cannot begin while a ledgerd has a session on the database, and
// no ledgerd opens a session while a move runs: its connection is refused
// with an error wrapping ErrMoveRunning. The cost is one entry in the
// server's lock table per session.
//
// A ledgerd whose pool had closed every session (idle past pgxpool's
// 30 minutes) holds no lock, and a move may then begin; each new session
// also checks whether the move's record (table ledger_move) appeared
// since the store opened the database, and refuses the session if so:
// the ledgerd's state (the log's head, its numbers) is the empty
// database's, and it must start again on the moved one.

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
		known bool // seen is set
		seen  bool // the first session found ledger_move
	)
	return func(ctx context.Context, c *pgx.Conn) error {
		var locked, moved bool
		if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock_shared($1), to_regclass('ledger_move') IS NOT NULL", StoreLockKey).Scan(&locked, &moved); err != nil {
			return fmt.Errorf("take the store's lock: %w", err)
		}
		if !locked {
			return ErrMoveRunning
		}
		mu.Lock()
		defer mu.Unlock()
		if !known {
			known, seen = true, moved
		}
		if moved && !seen {
			return ErrMovedSinceOpen
		}
		return nil
	}
}
