package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Session is a User signed in at a Brand's built-in demo login.
type Session struct {
	Brand   string    `json:"brand"`
	User    string    `json:"user"`
	Expires time.Time `json:"expires"`
	// Secret keys the session's CSRF tokens.
	Secret []byte `json:"secret"`
}

// NewSession stores s under id (kept hashed), dropping expired sessions.
func (s *Store) NewSession(id string, sess Session, now time.Time) error {
	return s.update(func(tx *txn) error {
		if _, err := pruneSessions(tx.Tx, now); err != nil {
			return err
		}
		return put(tx.Tx, bBrandSessions, hash(id), sess)
	})
}

// pruneSessions drops the sessions that have expired at now, and returns
// how many it dropped.
func pruneSessions(tx *bolt.Tx, now time.Time) (int, error) {
	var n int
	c := tx.Bucket(bBrandSessions).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		var old Session
		if _, err := get(tx, bBrandSessions, k, &old); err == nil && now.After(old.Expires) {
			if err := c.Delete(); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

// Session returns the session id. Whether it has expired is the caller's
// to check.
func (s *Store) Session(id string) (Session, error) {
	var sess Session
	err := s.view(func(tx *bolt.Tx) error {
		found, err := get(tx, bBrandSessions, hash(id), &sess)
		if err == nil && !found {
			err = fmt.Errorf("session: %w", ErrNotFound)
		}
		return err
	})
	return sess, err
}

// DeleteSession ends the session id.
func (s *Store) DeleteSession(id string) error {
	return s.update(func(tx *txn) error { return tx.Bucket(bBrandSessions).Delete(hash(id)) })
}
