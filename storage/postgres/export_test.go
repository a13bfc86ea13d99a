package postgres

// Waiting returns how many Update calls wait for a group commit, so that
// a test can tell that its writes were queued, in order, into one batch.
func Waiting(s *Store) int { return len(s.reqs) }
