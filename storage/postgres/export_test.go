package postgres

import "context"

// Waiting returns how many Update calls wait for a group commit, so that
// a test can tell that its writes were queued, in order, into one batch.
func Waiting(s *Store) int { return len(s.reqs) }

// AloneRuns returns how many writes were moved out of a group commit to
// run in a transaction of their own, having found a grant held elsewhere.
func AloneRuns() int64 { return aloneRuns.Load() }

// SetBackfillHooks sets how many rows a transaction of the backfill of
// schema version 9 reads and the function run after each, and returns a
// function that puts them back.
func SetBackfillHooks(batch int, after func() error) (restore func()) {
	oldBatch, oldAfter := backfillBatch, afterBackfillBatch
	backfillBatch, afterBackfillBatch = batch, after
	return func() { backfillBatch, afterBackfillBatch = oldBatch, oldAfter }
}

// Setting returns the value of the server setting name in a session of
// s's connections.
func Setting(ctx context.Context, s *Store, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}
