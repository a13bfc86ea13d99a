package postgres

// Waiting returns how many Update calls wait for a group commit, so that
// a test can tell that its writes were queued, in order, into one batch.
func Waiting(s *Store) int { return len(s.reqs) }

// AloneRuns returns how many writes were moved out of a group commit to
// run in a transaction of their own, having found a grant held elsewhere.
func AloneRuns() int64 { return aloneRuns.Load() }
