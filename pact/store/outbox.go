package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/pipeline"
)

// The outbox: what waits for the ledger, in the order it was queued. It
// implements pipeline.Outbox.

// Queued is sent on after a transaction that queued entries for the ledger
// commits: the pipeline's wake-up. It holds at most one signal.
func (s *Store) Queued() <-chan struct{} { return s.queued }

// Oldest implements pipeline.Outbox.
func (s *Store) Oldest() (uint64, pipeline.Item, bool, error) {
	var seq uint64
	var it pipeline.Item
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bOutbox).Cursor().First()
		if k == nil {
			return nil
		}
		var err error
		if it, err = pipeline.DecodeItem(v); err != nil {
			return fmt.Errorf("outbox entry %x: %w", k, err)
		}
		seq, ok = binary.BigEndian.Uint64(k), true
		return nil
	})
	return seq, it, ok, err
}

// Remove implements pipeline.Outbox.
func (s *Store) Remove(seq uint64) error {
	return s.update(func(tx *txn) error { return tx.Bucket(bOutbox).Delete(seqKey(seq)) })
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
