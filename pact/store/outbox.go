package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// reports whether it queued it. A time kept for a grant is dropped once
// every has passed since it (by the next call, for any grant): the record
// holds only the grants with a refusal queued within every.
func (s *Store) RecordEndedGrantAttempt(grant string, it pipeline.Item, every time.Duration, now time.Time) (bool, error) {
	queued := false
	err := s.update(func(tx *txn) error {
		if _, err := pruneEndedAttempts(tx.Tx, every, now); err != nil {
			return err
		}
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

// pruneEndedAttempts drops the times of ended grants' refusals queued
// every or longer before now, or after it (a clock set back): they no
// longer hold a refusal back. It returns how many it dropped.
func pruneEndedAttempts(tx *bolt.Tx, every time.Duration, now time.Time) (int, error) {
	b := tx.Bucket(bEndedAttempts)
	var stale [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var last time.Time
		if json.Unmarshal(v, &last) != nil || now.Sub(last) >= every || now.Before(last) {
			stale = append(stale, slices.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, k := range stale {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
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
				return &pipeline.UnreadableError{Seq: binary.BigEndian.Uint64(k), Err: err}
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
		for _, seq := range seqs {
			if _, _, err := tx.dequeue(seqKey(seq)); err != nil {
				return err
			}
		}
		return nil
	})
}

// SetAside implements pipeline.Outbox: the entry moves to
// pipeline_rejected as it is, and why with the time to
// pipeline_rejected_why, for an operator to look at (SetAsideEntries) and
// put back (RetrySetAside). It keeps its room under LimitOutbox, and an
// entry of a share of the outbox (an identity refusal, a denied consent's
// refusal) keeps its mark and its room in the share: the Provider still
// holds it for the ledger.
func (s *Store) SetAside(seq uint64, why string) error {
	s.asideMu.Lock()
	defer s.asideMu.Unlock()
	return s.update(func(tx *txn) error {
		k := seqKey(seq)
		v, in, err := tx.dequeue(k)
		if err != nil || v == nil {
			return err
		}
		aside := tx.Bucket(bSetAside)
		if old := aside.Get(k); old != nil {
			// Not expected (a sequence number is used once), but a count
			// kept must not drift.
			tx.asideGrown -= int64(len(old))
			tx.asideAdded--
			if sh := markedIn(tx.Bucket(bSetAsideWhy).Get(k)); sh != noShare {
				tx.shareGrown[sh] -= int64(len(old))
			}
		}
		if err := aside.Put(k, v); err != nil {
			return err
		}
		tx.asideGrown += int64(len(v))
		tx.asideAdded++
		if in != noShare {
			tx.shareGrown[in] += int64(len(v))
		}
		return put(tx.Tx, bSetAsideWhy, k, setAsideWhy{Why: why, At: time.Now().UTC(), Identity: in == identityShare, Denial: in == denialShare})
	})
}

// setAsideWhy is what pipeline_rejected_why keeps of an entry set aside.
type setAsideWhy struct {
	Why string    `json:"why"`
	At  time.Time `json:"at"`
	// Identity: the entry was an identity refusal in the outbox, so it is
	// one again when put back (RetrySetAside). Denial: the same for the
	// refusal of a denied consent.
	Identity bool `json:"identity,omitempty"`
	Denial   bool `json:"denial,omitempty"`
}

// share is the share of the outbox the entry set aside was marked in.
func (w setAsideWhy) share() share {
	switch {
	case w.Identity:
		return identityShare
	case w.Denial:
		return denialShare
	}
	return noShare
}

// markedIn is the share an entry set aside was marked in, by its record
// in pipeline_rejected_why: noShare for none, no record, or a record
// that cannot be read (such an entry goes back as an ordinary one).
func markedIn(raw []byte) share {
	var w setAsideWhy
	if raw == nil || json.Unmarshal(raw, &w) != nil {
		return noShare
	}
	return w.share()
}

// SetAsideEntry is an entry of pipeline_rejected, for an operator.
type SetAsideEntry struct {
	// Seq is its position in the outbox when it was queued.
	Seq uint64
	// Item is the entry; zero when it cannot be read.
	Item pipeline.Item
	// Unreadable says why it cannot be read; "" when it can.
	Unreadable string
	// Size is its length in the store, in bytes.
	Size int
	// Why it was set aside, and when: "" and zero for an entry set aside
	// before these were kept.
	Why string
	At  time.Time
}

// MaxSetAsidePage caps one page of SetAsideEntries.
const MaxSetAsidePage = 1000

// SetAsideEntries lists up to limit entries set aside after seq after (0:
// from the first), in the order they were queued; more says whether any
// follow the last.
func (s *Store) SetAsideEntries(after uint64, limit int) (entries []SetAsideEntry, more bool, err error) {
	if after == ^uint64(0) {
		return nil, false, nil
	}
	err = s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bSetAside).Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil; k, v = c.Next() {
			if len(entries) == limit {
				more = true
				break
			}
			e := SetAsideEntry{Seq: binary.BigEndian.Uint64(k), Size: len(v)}
			it, derr := pipeline.DecodeItem(v)
			if derr != nil {
				e.Unreadable = derr.Error()
			} else {
				e.Item = it
			}
			var w setAsideWhy
			if _, err := get(tx, bSetAsideWhy, k, &w); err != nil {
				return err
			}
			e.Why, e.At = w.Why, w.At
			entries = append(entries, e)
		}
		return nil
	})
	return entries, more, err
}

// MaxRetry caps the entries one RetrySetAside call puts back, and the
// unreadable ones it passes over on the way: the call is one write
// transaction of the store every turn writes to.
const MaxRetry = 10000

// ErrUnreadable: an entry set aside cannot be read, so posting it again
// cannot help.
var ErrUnreadable = errors.New("the entry cannot be read")

// Retried says what RetrySetAside put back, and what it passed over.
type Retried struct {
	// Retried entries went back at the end of the outbox.
	Retried int
	// Unreadable entries cannot be read, and Held ones hold refused:
	// passed over, they stay set aside (all only).
	Unreadable, Held int
}

// RetrySetAside puts entries set aside back at the end of the outbox, in
// the order they were first queued, each under a new sequence number and
// with its bytes as they were set aside (fields this version does not
// know included): the entry seq, or with all every one that can be read
// and that hold, when given, does not refuse, up to MaxRetry a call,
// passing over at most MaxRetry others. hold returns why an entry must
// not be posted again. An unknown seq is ErrNotFound, an unreadable one
// ErrUnreadable, one hold refuses hold's error.
func (s *Store) RetrySetAside(seq uint64, all bool, hold func(pipeline.Item) error) (Retried, error) {
	var out Retried
	s.asideMu.Lock()
	defer s.asideMu.Unlock()
	err := s.update(func(tx *txn) error {
		out = Retried{}
		aside, why := tx.Bucket(bSetAside), tx.Bucket(bSetAsideWhy)
		var keys [][]byte
		if all {
			c := aside.Cursor()
			for k, v := c.First(); k != nil && len(keys) < MaxRetry && out.Unreadable+out.Held < MaxRetry; k, v = c.Next() {
				it, err := pipeline.DecodeItem(v)
				switch {
				case err != nil:
					out.Unreadable++
				case hold != nil && hold(it) != nil:
					out.Held++
				default:
					keys = append(keys, slices.Clone(k))
				}
			}
		} else {
			k := seqKey(seq)
			v := aside.Get(k)
			if v == nil {
				return fmt.Errorf("no entry %d set aside: %w", seq, ErrNotFound)
			}
			it, err := pipeline.DecodeItem(v)
			if err != nil {
				return fmt.Errorf("entry %d: %w (%v): posting it again cannot help", seq, ErrUnreadable, err)
			}
			if hold != nil {
				if err := hold(it); err != nil {
					return fmt.Errorf("entry %d: %w", seq, err)
				}
			}
			keys = append(keys, k)
		}
		for _, k := range keys {
			v := aside.Get(k)
			nk, err := tx.enqueueRaw(v)
			if err != nil {
				return err
			}
			// A record that cannot be read holds no mark: the entry goes
			// back as an ordinary one rather than not at all. Its room,
			// in the outbox and its share, moves with it.
			n := int64(len(v))
			tx.asideGrown -= n
			tx.asideAdded--
			if sh := markedIn(why.Get(k)); sh != noShare {
				tx.shareGrown[sh] -= n
				if err := tx.mark(sh, nk, n, nil); err != nil {
					return err
				}
			}
			if err := aside.Delete(k); err != nil {
				return err
			}
			if err := why.Delete(k); err != nil {
				return err
			}
		}
		out.Retried = len(keys)
		return nil
	})
	if err != nil {
		return Retried{}, err
	}
	return out, nil
}

// MoveBack implements pipeline.MoveBacker: the receipt or refusal seq,
// which the ledger answered undecided because a signer's keys could not
// be fetched, moves to the outbox's end with every later receipt and
// refusal of its grant (pipeline.Item.Grant; a receipt whose grant
// cannot be read with the later receipts of none, as the ledger records
// those in order among themselves; a refusal without a grant alone), in
// their order, each under a new sequence number, as RetrySetAside puts
// an entry back. Each keeps its bytes and its room: the outbox's bytes do
// not change, and an entry of a share keeps its mark (and its owner) in
// it, so it neither counts twice nor makes room. Nothing moves, and the
// error is pipeline.ErrMustWait, when seq is a revocation or one of the
// entries moved would pass a revocation queued after it that it may not
// (pipeline.Item.MayPass). An entry not in the outbox, or that cannot be
// read, moves nothing. The walk reads the whole outbox, in one write
// transaction (but for a refusal without a grant, which moves alone): it
// is done at most once per entry round the outbox, and at most
// pipeline.MaxMovesPerRound times a round, while a signer's keys are
// down.
func (s *Store) MoveBack(seq uint64) ([]uint64, error) {
	var moved []uint64
	err := s.update(func(tx *txn) error {
		moved = nil
		b := tx.Bucket(bOutbox)
		c := b.Cursor()
		k, v := c.Seek(seqKey(seq))
		if k == nil || binary.BigEndian.Uint64(k) != seq {
			return nil
		}
		head, err := pipeline.DecodeItem(v)
		if err != nil {
			return nil
		}
		if head.Revocation != nil || (head.Receipt == nil && head.Refusal == nil) {
			return pipeline.ErrMustWait
		}
		g := head.Grant()
		if head.Refusal != nil && g == "" {
			// A refusal without a grant is read by no other entry's
			// check and reads none (it passes every revocation): it
			// moves alone, without reading the outbox.
			nk, err := tx.requeue(slices.Clone(k))
			if err != nil {
				return err
			}
			moved = append(moved, binary.BigEndian.Uint64(nk))
			return nil
		}
		ofGroup := func(it pipeline.Item) bool {
			switch {
			case it.Revocation != nil:
				return false
			case g != "":
				return it.Grant() == g
			}
			return head.Receipt != nil && it.Receipt != nil && it.Grant() == ""
		}
		keys := [][]byte{slices.Clone(k)}
		members := []pipeline.Item{head}
		for k, v = c.Next(); k != nil; k, v = c.Next() {
			it, err := pipeline.DecodeItem(v)
			if err != nil {
				continue
			}
			if it.Revocation != nil {
				for _, m := range members {
					if !m.MayPass(it.Revocation) {
						return pipeline.ErrMustWait
					}
				}
				continue
			}
			if ofGroup(it) {
				keys = append(keys, slices.Clone(k))
				members = append(members, it)
			}
		}
		for _, k := range keys {
			nk, err := tx.requeue(k)
			if err != nil {
				return err
			}
			moved = append(moved, binary.BigEndian.Uint64(nk))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.movedBack.Add(int64(len(moved)))
	return moved, nil
}

// MovedBack is how many entries MoveBack moved to the outbox's end since
// the store was opened.
func (s *Store) MovedBack() int64 { return s.movedBack.Load() }

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
// refused by the ledger as invalid, kept for an operator. It is a count
// kept with the bucket (Open counts it once), not a walk of it: the
// metrics read it at every scrape.
func (s *Store) SetAsideCount() int {
	s.asideMu.RLock()
	defer s.asideMu.RUnlock()
	return int(s.asideCount.Load())
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
	OutboxBytes          int64
	SetAside             int
	SetAsideBytes        int64
}

// Stats returns the store's counts.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.view(func(tx *bolt.Tx) error {
		n := func(b []byte) int { return tx.Bucket(b).Stats().KeyN }
		st = Stats{Conversations: n(bContexts), DeviceAuthorizations: n(bDevices), Grants: n(bGrants), ActionLogs: n(bActionLog),
			Outbox: n(bOutbox), OutboxBytes: s.outboxBytes.Load(), SetAside: int(s.asideCount.Load()), SetAsideBytes: s.asideBytes.Load()}
		return nil
	})
	return st, err
}

// OutboxBrands counts the entries waiting for the ledger by the brand
// whose keys the ledger checks them with (pipeline.Item.Brand): interface
// URL to count. Entries that name no brand, or cannot be read, are not
// counted.
func (s *Store) OutboxBrands() (map[string]int, error) {
	out := map[string]int{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bOutbox).ForEach(func(_, v []byte) error {
			if it, err := pipeline.DecodeItem(v); err == nil {
				if b := it.Brand(); b != "" {
					out[b]++
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", err)
	}
	return out, nil
}

// Held counts the entries for the ledger that carry a signature of one of
// the Provider's keys.
type Held struct {
	// Waiting entries are in the outbox; SetAside ones in
	// pipeline_rejected, which an operator may put back.
	Waiting, SetAside int
}

// SignedBy counts the entries waiting for the ledger and set aside by
// the kids of the Provider's keys that signed them
// (pipeline.Item.SignerKids): kid to count. An entry signed under two
// kids counts for each; entries that cannot be read are not counted.
func (s *Store) SignedBy() (map[string]Held, error) {
	out := map[string]Held{}
	err := s.view(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bOutbox, bSetAside} {
			err := tx.Bucket(b).ForEach(func(_, v []byte) error {
				it, err := pipeline.DecodeItem(v)
				if err != nil {
					return nil
				}
				for _, kid := range it.SignerKids() {
					h := out[kid]
					if string(b) == string(bOutbox) {
						h.Waiting++
					} else {
						h.SetAside++
					}
					out[kid] = h
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", err)
	}
	return out, nil
}
