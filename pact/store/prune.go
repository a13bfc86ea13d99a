package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Pruned counts what one Prune carried out.
type Pruned struct {
	// Devices is how many due entries of device authorizations it carried
	// out: request JWTs dropped, authorizations deleted.
	Devices int
	// Kept is how many steps of what is due for conversations, their
	// stored replies, the action log, grants and refresh tokens it carried
	// out (docs/design/040).
	Kept int
	// Consent is how many expired consent tickets and used login assertion
	// ids it dropped.
	Consent int
	// Sessions is how many expired Brand sessions it dropped.
	Sessions int
	// EndedAttempts is how many times of refusals under ended grants it
	// dropped (RecordEndedGrantAttempt).
	EndedAttempts int
	// Transactions is how many write transactions it took.
	Transactions int
}

// Total is how many things it carried out, of every kind.
func (p Pruned) Total() int { return p.Devices + p.Kept + p.Consent + p.Sessions + p.EndedAttempts }

// Prune carries out what is due at now, as the writes that add to the
// store do, without waiting for one: device authorizations, conversations
// and their stored replies, the action log, ended grants and refresh
// tokens, consent tickets and login assertion ids, Brand sessions, and
// the times of refusals under ended grants older than endedEvery (the
// every of RecordEndedGrantAttempt). Each kind goes in write transactions
// of its own that carry out at most the batch a write does, one after
// another while a batch was full, so that a backlog drains without one
// long transaction holding back the writes of turns. It stops between two
// transactions when ctx is done, returning ctx's error with what it
// carried out so far.
func (s *Store) Prune(ctx context.Context, now time.Time, endedEvery time.Duration) (Pruned, error) {
	var p Pruned
	// Each kind: prune carries out some of it at now in a transaction and
	// returns how many it carried out, at most batch (0: all at once).
	kinds := []struct {
		name  string
		done  *int
		batch int
		prune func(tx *bolt.Tx, now time.Time) (int, error)
	}{
		{"device authorizations", &p.Devices, devicePruneBatch, pruneDevices},
		{"conversations, grants and refresh tokens", &p.Kept, keepPruneBatch, pruneKept},
		{"consent tickets", &p.Consent, 0, pruneConsent},
		{"brand sessions", &p.Sessions, 0, pruneSessions},
		{"attempts under ended grants", &p.EndedAttempts, 0, func(tx *bolt.Tx, now time.Time) (int, error) {
			return pruneEndedAttempts(tx, endedEvery, now)
		}},
	}
	for _, k := range kinds {
		for {
			if err := ctx.Err(); err != nil {
				return p, err
			}
			var n int
			err := s.update(func(tx *txn) (err error) {
				n, err = k.prune(tx.Tx, now)
				return err
			})
			if err != nil {
				return p, fmt.Errorf("prune %s: %w", k.name, err)
			}
			p.Transactions++
			*k.done += n
			if k.batch == 0 || n < k.batch {
				break
			}
		}
	}
	return p, nil
}
