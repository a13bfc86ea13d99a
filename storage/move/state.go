package move

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The move keeps its own record in the database, beside the ledger's
// schema: which file it copies (path and last write transaction), when it
// began, copied and verified, and how far each kind got. They stay as the
// record of where the data came from. The store reads one thing of them:
// postgres.Open refuses the database while ledger_move's row has no
// verified_ns, for until then it holds part of the ledger.
const bookkeeping = `
CREATE TABLE IF NOT EXISTS ledger_move (
    id          smallint PRIMARY KEY CHECK (id = 1),
    source      text NOT NULL,
    version     bigint NOT NULL,
    started_ns  bigint NOT NULL,
    copied_ns   bigint,
    verified_ns bigint
);
CREATE TABLE IF NOT EXISTS ledger_move_progress (
    kind   text PRIMARY KEY,
    after  bytea,
    copied bigint NOT NULL,
    done   boolean NOT NULL
)`

// moveState is the move's record.
type moveState struct {
	source     string
	version    uint64
	started    time.Time
	verified   bool
	verifiedAt time.Time
}

// begin creates the move's record for a new move into an empty database,
// or reads the record of the move an earlier run began from the same file
// at the same version.
func (m *mover) begin(ctx context.Context, path string, version uint64) (*moveState, error) {
	st, err := m.readState(ctx)
	if err != nil {
		return nil, err
	}
	if st == nil {
		if m.marked != nil {
			// The file went into another database, where ledgerd runs
			// now: a second copy would be a second ledger.
			return nil, fmt.Errorf("%w: %s was moved to %s at %s, and a move into a second database would make a second ledger beside the one there; run ledgerd on that database. Only if it is no longer used (dropped, or the move abandoned): run `ledgerd unmark-moved %s`, then the move again",
				ErrMovedElsewhere, path, m.marked.Database, m.marked.At.UTC().Format(time.RFC3339), path)
		}
		return m.create(ctx, path, version)
	}
	switch {
	case st.source != path:
		return nil, fmt.Errorf("%w: it was begun from %s, not %s", ErrOtherSource, st.source, path)
	case st.version != version:
		return nil, fmt.Errorf("%w: %s was written to since the move began (last write transaction %d then, %d now); start again with an empty database",
			ErrOtherSource, path, st.version, version)
	}
	if !st.verified {
		m.rep.Resumed = true
		m.say("resuming the move begun on %s", st.started.UTC().Format(time.RFC3339))
	}
	return st, nil
}

// readState returns the move's record, or nil when there is none.
func (m *mover) readState(ctx context.Context) (*moveState, error) {
	var recorded bool
	if err := m.pool.QueryRow(ctx, "SELECT to_regclass('ledger_move') IS NOT NULL").Scan(&recorded); err != nil {
		return nil, fmt.Errorf("read the move's record: %w", err)
	}
	if !recorded {
		return nil, nil
	}
	var st moveState
	var version, started int64
	var verified *int64
	err := m.pool.QueryRow(ctx, "SELECT source, version, started_ns, verified_ns FROM ledger_move WHERE id = 1").Scan(&st.source, &version, &started, &verified)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the move's record: %w", err)
	}
	st.version, st.started = uint64(version), time.Unix(0, started)
	if verified != nil {
		st.verified, st.verifiedAt = true, time.Unix(0, *verified)
	}
	return &st, nil
}

// create checks that the database holds no ledger data and records a new
// move from path at version. The record's tables are made only then, so a
// move refused for the data it found leaves none (a ledgerd's sessions
// read them: storage/postgres lock.go).
func (m *mover) create(ctx context.Context, path string, version uint64) (*moveState, error) {
	for _, t := range dataTables {
		var has bool
		if err := m.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+pgx.Identifier{t}.Sanitize()+")").Scan(&has); err != nil {
			return nil, fmt.Errorf("check that %s is empty: %w", t, err)
		}
		if has {
			return nil, fmt.Errorf("%w (table %s has rows)", ErrNotEmpty, t)
		}
	}
	now := m.cfg.Now()
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, bookkeeping); err != nil {
			return fmt.Errorf("create the move's record: %w", err)
		}
		tag, err := tx.Exec(ctx, "INSERT INTO ledger_move (id, source, version, started_ns) VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING",
			path, int64(version), now.UnixNano())
		if err != nil {
			return fmt.Errorf("record the move: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return ErrConcurrent
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.say("the database is empty: copying")
	return &moveState{source: path, version: version, started: now}, nil
}

// markVerified records that the move verified.
func (m *mover) markVerified(ctx context.Context) error {
	_, err := m.pool.Exec(ctx, "UPDATE ledger_move SET verified_ns = $1 WHERE id = 1", m.cfg.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("record the verification: %w", err)
	}
	return nil
}

// progress is how far the copy of one kind got: the key of the last
// record copied, how many were, and whether the kind is done.
type progress struct {
	after  []byte
	copied int64
	done   bool
}

// progress reads how far the copy of kind got (zero when it has not begun).
func (m *mover) progress(ctx context.Context, kind string) (progress, error) {
	var p progress
	err := m.pool.QueryRow(ctx, "SELECT after, copied, done FROM ledger_move_progress WHERE kind = $1", kind).Scan(&p.after, &p.copied, &p.done)
	if errors.Is(err, pgx.ErrNoRows) {
		return progress{}, nil
	}
	if err != nil {
		return p, fmt.Errorf("read the progress of %s: %w", kind, err)
	}
	return p, nil
}

// setProgress moves kind's progress from prev to next in tx; when another
// run moved it in between, it fails with ErrConcurrent.
func setProgress(ctx context.Context, tx pgx.Tx, kind string, prev, next progress) error {
	tag, err := tx.Exec(ctx, `
INSERT INTO ledger_move_progress (kind, after, copied, done) VALUES ($1, $2, $3, $4)
ON CONFLICT (kind) DO UPDATE SET after = EXCLUDED.after, copied = EXCLUDED.copied, done = EXCLUDED.done
WHERE ledger_move_progress.copied = $5 AND NOT ledger_move_progress.done`, kind, next.after, next.copied, next.done, prev.copied)
	if err != nil {
		return fmt.Errorf("record the progress of %s: %w", kind, err)
	}
	if tag.RowsAffected() != 1 {
		return ErrConcurrent
	}
	return nil
}
