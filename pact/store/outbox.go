package store

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/pipeline"
)

// The outbox: what waits for the ledger, in the order it was queued. It
// implements pipeline.Outbox.

// Queued is sent on after a transaction that queued entries for the ledger
// commits: the pipeline's wake-up. It holds at most one signal.
func (s *Store) Queued() <-chan struct{} { return s.queued }

// Enqueue queues items for the ledger in a transaction of their own: what
// the Provider puts on record of a turn it kept nothing of.
func (s *Store) Enqueue(items ...pipeline.Item) error {
	return s.update(func(tx *txn) error {
		for _, it := range items {
			if err := tx.enqueue(it); err != nil {
				return err
			}
		}
		return nil
	})
}

// RecordEndedGrantAttempt queues it, the refusal of a request made under
// grant after the grant ended, unless one such refusal of that grant was
// queued less than every before now: however often a personal agent
// sends a token of an ended grant, the outbox gets at most one refusal of
// the grant per every (and only while a token of it still verifies). It
// reports whether it queued it.
func (s *Store) RecordEndedGrantAttempt(grant string, it pipeline.Item, every time.Duration, now time.Time) (bool, error) {
	queued := false
	err := s.update(func(tx *txn) error {
		var last time.Time
		if _, err := get(tx.Tx, bEndedAttempts, []byte(grant), &last); err != nil {
			return err
		}
		if !last.IsZero() && now.Sub(last) < every && !now.Before(last) {
			return nil
		}
		if err := put(tx.Tx, bEndedAttempts, []byte(grant), now); err != nil {
			return err
		}
		queued = true
		return tx.enqueue(it)
	})
	if err != nil {
		return false, fmt.Errorf("record an attempt under ended grant %s: %w", grant, err)
	}
	return queued, nil
}

// Head implements pipeline.Outbox. It stops before an entry it cannot
// read, which it returns as an error once that entry is the oldest.
func (s *Store) Head(n int) ([]pipeline.Entry, error) {
	var out []pipeline.Entry
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bOutbox).Cursor()
		for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
			it, err := pipeline.DecodeItem(v)
			if err != nil && len(out) > 0 {
				return nil // the entries before it go first
			}
			if err != nil {
				return fmt.Errorf("outbox entry %x: %w", k, err)
			}
			out = append(out, pipeline.Entry{Seq: binary.BigEndian.Uint64(k), Item: it})
		}
		return nil
	})
	return out, err
}

// Remove implements pipeline.Outbox.
func (s *Store) Remove(seqs ...uint64) error {
	return s.update(func(tx *txn) error {
		b := tx.Bucket(bOutbox)
		for _, seq := range seqs {
			if err := b.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		return nil
	})
}

// SetAside implements pipeline.Outbox: the entry moves to
// pipeline_rejected, for an operator to look at.
func (s *Store) SetAside(seq uint64) error {
	return s.update(func(tx *txn) error {
		k := seqKey(seq)
		v := tx.Bucket(bOutbox).Get(k)
		if v == nil {
			return nil
		}
		if err := tx.Bucket(bSetAside).Put(k, v); err != nil {
			return err
		}
		return tx.Bucket(bOutbox).Delete(k)
	})
}

// Depth implements pipeline.Outbox: the number of receipts, refusals and
// revocations waiting for the ledger.
func (s *Store) Depth() int {
	n := 0
	_ = s.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bOutbox).Stats().KeyN
		return nil
	})
	return n
}

// SetAsideCount is the number of entries set aside (pipeline_rejected):
// refused by the ledger as invalid, kept for an operator.
func (s *Store) SetAsideCount() int {
	n := 0
	_ = s.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bSetAside).Stats().KeyN
		return nil
	})
	return n
}

// Outbox lists up to limit entries waiting for the ledger, oldest first.
func (s *Store) Outbox(limit int) ([]pipeline.Item, error) {
	var out []pipeline.Item
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bOutbox).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			it, err := pipeline.DecodeItem(v)
			if err != nil {
				return fmt.Errorf("outbox entry %x: %w", k, err)
			}
			out = append(out, it)
		}
		return nil
	})
	return out, err
}

// Stats counts what the store holds.
type Stats struct {
	Conversations        int
	DeviceAuthorizations int
	Grants               int
	ActionLogs           int
	Outbox               int
	SetAside             int
}

// Stats returns the store's counts.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.view(func(tx *bolt.Tx) error {
		n := func(b []byte) int { return tx.Bucket(b).Stats().KeyN }
		st = Stats{Conversations: n(bContexts), DeviceAuthorizations: n(bDevices), Grants: n(bGrants), ActionLogs: n(bActionLog),
			Outbox: n(bOutbox), SetAside: n(bSetAside)}
		return nil
	})
	return st, err
}
