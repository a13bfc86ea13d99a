// Package store is the Provider's own bbolt file: conversations and their
// stored replies, device authorizations, grants and refresh tokens,
// consent tickets and Brand sessions, the changes stored over brand
// records, the action log and the outbox for the ledger. Its operations
// are named for what they do (BeginTurn, RecordTurn, RedeemDeviceCode,
// DecideByTicket...), each one transaction; no caller sees a bbolt
// transaction. The rules each operation applies live in the domain
// packages (oauth, records, pipeline); the store keeps them atomic.
package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/pactledger/pactledger/pact/pipeline"
)

// Buckets of the Provider's file.
var (
	bContexts      = []byte("contexts")
	bReplies       = []byte("replies")
	bDevices       = []byte("device_codes")
	bUserCodes     = []byte("user_codes")
	bGrants        = []byte("grants")
	bRefresh       = []byte("refresh_tokens")
	bOrders        = []byte("order_status") // statuses kept before brands defined record types; read, never written
	bRecords       = []byte("record_fields")
	bActionLog     = []byte("action_log")
	bOutbox        = []byte("pipeline")
	bSetAside      = []byte("pipeline_rejected")
	bSetAsideWhy   = []byte("pipeline_rejected_why") // why and when each entry of pipeline_rejected was set aside
	bAssertions    = []byte("login_assertions")      // used assertion ids, until they expire
	bTickets       = []byte("consent_tickets")
	bBrandSessions = []byte("brand_sessions")
	// bEndedAttempts: when an attempt under an ended grant was last put
	// on record, by grant id, for a minute (RecordEndedGrantAttempt).
	bEndedAttempts = []byte("ended_grant_attempts")
	// bIdentityRefusals: the sequence numbers of the outbox entries that
	// are identity refusals (TurnRecord.IdentityRefusal), with empty
	// values: what LimitIdentityRefusals bounds, with those set aside
	// (marked in pipeline_rejected_why). An entry leaves it when it leaves
	// the outbox, in the same transaction.
	bIdentityRefusals = []byte("pipeline_identity_refusals")
	// bDeniedConsents: the same for the refusals of denied consents
	// (decide): what LimitDeniedConsents bounds.
	bDeniedConsents = []byte("pipeline_denied_consents")
)

// share is a part of the outbox that one kind of entry may hold, apart
// from the outbox's own bound (LimitOutbox): entries that callers can
// make in numbers, so that however many come, the rest of the outbox
// stays for the others. A share's entries are marked in a bucket of its
// own (sequence number, empty value), in the transaction that queues them
// and in the one that takes them out, and Open sums them, so the share
// holds across a crash. An entry set aside keeps counting against its
// share (its mark moves to the record of why it was set aside) until the
// ledger takes it: refusals the ledger refuses make no room for more.
type share int

const (
	// identityShare holds the identity refusals (LimitIdentityRefusals).
	identityShare share = iota
	// denialShare holds the refusals of denied consents
	// (LimitDeniedConsents).
	denialShare
	// shares is how many there are.
	shares
	// noShare is the share of an entry of none.
	noShare share = -1
)

// bucket is where sh's entries are marked.
func (sh share) bucket() []byte {
	return [shares][]byte{identityShare: bIdentityRefusals, denialShare: bDeniedConsents}[sh]
}

// Store is the Provider's bbolt file. Its methods are safe for concurrent
// use.
type Store struct {
	db *bolt.DB
	// queued is sent on (without blocking) after a transaction that added
	// entries to the outbox commits.
	queued chan struct{}
	// lastTurn is the latest time of a turn under a grant that committed,
	// read and written in write transactions only (bbolt runs one at a
	// time): a revocation that commits after is dated no earlier.
	lastTurn time.Time
	// outboxBytes is the size of the outbox's entries, as committed;
	// asideBytes and asideCount the size and number of the entries set
	// aside (pipeline_rejected). maxOutbox bounds the two sizes together,
	// what turns may queue (LimitOutbox), 0 for no bound.
	outboxBytes atomic.Int64
	asideBytes  atomic.Int64
	// heldMu is held while outboxBytes and asideBytes change together
	// after a commit, and while held reads them.
	heldMu     sync.Mutex
	asideCount atomic.Int64
	maxOutbox  atomic.Int64
	// asideMu is held by the transactions that move entries in or out of
	// pipeline_rejected, until their counts above are added, and read-held
	// by SetAsideCount and SetAsideBytes: a reader that saw such a
	// transaction's commit (an entry gone from the outbox) then reads
	// counts that hold it.
	asideMu sync.RWMutex
	// shareBytes is the size of each share's entries among them, waiting
	// or set aside, as committed; shareMax bounds it
	// (LimitIdentityRefusals, LimitDeniedConsents), 0 for no bound but
	// maxOutbox.
	shareBytes, shareMax [shares]atomic.Int64
	// movedBack counts the entries MoveBack moved to the outbox's end.
	movedBack atomic.Int64
}

// ErrOutboxFull: the outbox holds LimitOutbox's bytes or more, so a turn
// that would queue a receipt or refusal for the ledger is kept nothing of.
var ErrOutboxFull = errors.New("the outbox for the ledger is full")

// LimitOutbox bounds the bytes of receipts and refusals the Provider
// holds for the ledger, waiting in the outbox or set aside (the ledger
// refused them; they stay until it takes them): past max, a transaction
// that would queue one more fails with ErrOutboxFull. Revocations are
// queued whatever the outbox holds, and entries an operator puts back
// take no more room than they held set aside. 0 means no bound.
func (s *Store) LimitOutbox(max int64) { s.maxOutbox.Store(max) }

// OutboxLimit is LimitOutbox's bound; 0 for none.
func (s *Store) OutboxLimit() int64 { return s.maxOutbox.Load() }

// OutboxBytes is the size of the entries waiting in the outbox.
func (s *Store) OutboxBytes() int64 { return s.outboxBytes.Load() }

// SetAsideBytes is the size of the entries set aside: with OutboxBytes,
// what LimitOutbox bounds.
func (s *Store) SetAsideBytes() int64 {
	s.asideMu.RLock()
	defer s.asideMu.RUnlock()
	return s.asideBytes.Load()
}

// LimitIdentityRefusals bounds the bytes the identity refusals
// (TurnRecord.IdentityRefusal) may hold of the outbox, so that however
// many such refusals come, the rest of LimitOutbox's bound stays for
// receipts and the other refusals: past max, or past LimitOutbox's
// bound, RecordTurn keeps a turn without its identity refusal. 0 means
// no bound but LimitOutbox's.
func (s *Store) LimitIdentityRefusals(max int64) { s.shareMax[identityShare].Store(max) }

// IdentityRefusalBytes is the size of the identity refusals waiting in
// the outbox or set aside.
func (s *Store) IdentityRefusalBytes() int64 { return s.shareBytes[identityShare].Load() }

// LimitDeniedConsents bounds the bytes the refusals of denied consents
// (one a User's denial, carrying the agent's request JWT) may hold of the
// outbox, so that however many denials come, the rest of LimitOutbox's
// bound stays for receipts and the other refusals: past max, or past
// LimitOutbox's bound, DecideDevice and DecideByTicket record the denial
// (the device authorization is denied) without its refusal for the
// ledger, and report it dropped. 0 means no bound but LimitOutbox's.
func (s *Store) LimitDeniedConsents(max int64) { s.shareMax[denialShare].Store(max) }

// DeniedConsentBytes is the size of the refusals of denied consents
// waiting in the outbox or set aside.
func (s *Store) DeniedConsentBytes() int64 { return s.shareBytes[denialShare].Load() }

// ErrLocked: another process (a running ledgerd) holds the file.
var ErrLocked = errors.New("the Provider's store is locked by another process")

// Open opens (creating it if needed) the store at path. It waits 5 s at
// most for another process to let go of the file (ErrLocked).
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open provider store %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open provider store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		unindexed := tx.Bucket(bDeviceDue) == nil || tx.Bucket(bDevicePendingAgent) == nil
		unkept := tx.Bucket(bKeepDue) == nil
		for _, b := range [][]byte{bContexts, bReplies, bDevices, bUserCodes, bGrants, bRefresh, bOrders, bRecords, bActionLog, bOutbox, bSetAside, bSetAsideWhy, bAssertions, bTickets, bBrandSessions, bEndedAttempts, bIdentityRefusals, bDeniedConsents, bDeviceDue, bDevicePending, bDevicePendingAgent, bDevicePendingOpen, bDevicePendingOpenSum, bStepUps, bKeepDue, bRefreshByGrant} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if unindexed {
			// Device authorizations stored before they were indexed
			// (or before the pending ones were indexed by agent) are
			// pruned and counted like the others from now on.
			if err := indexDevices(tx); err != nil {
				return err
			}
		}
		if unkept {
			// So are conversations, the action log, grants and refresh
			// tokens stored before they were.
			return indexKept(tx, time.Now().UTC())
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("create provider store buckets in %s: %w", path, err)
	}
	s := &Store{db: db, queued: make(chan struct{}, 1)}
	err = db.View(func(tx *bolt.Tx) error {
		outbox := tx.Bucket(bOutbox)
		err := outbox.ForEach(func(_, v []byte) error {
			s.outboxBytes.Add(int64(len(v)))
			return nil
		})
		if err != nil {
			return err
		}
		for sh := range shares {
			err := tx.Bucket(sh.bucket()).ForEach(func(k, _ []byte) error {
				s.shareBytes[sh].Add(int64(len(outbox.Get(k))))
				return nil
			})
			if err != nil {
				return err
			}
		}
		// The entries set aside, and those of a share among them.
		aside := tx.Bucket(bSetAside)
		err = aside.ForEach(func(_, v []byte) error {
			s.asideBytes.Add(int64(len(v)))
			s.asideCount.Add(1)
			return nil
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bSetAsideWhy).ForEach(func(k, raw []byte) error {
			if sh := markedIn(raw); sh != noShare {
				s.shareBytes[sh].Add(int64(len(aside.Get(k))))
			}
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("read provider store outbox in %s: %w", path, err)
	}
	return s, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// txn is one write transaction: the bbolt transaction and whether it
// queued entries for the ledger.
type txn struct {
	*bolt.Tx
	queued bool
	s      *Store
	// turnAt is the time of the turn under a grant this transaction
	// records; Store.lastTurn once it commits.
	turnAt time.Time
	// grown is how many bytes this transaction added to the outbox, less
	// those it removed; Store.outboxBytes takes it once it commits.
	// asideGrown and asideAdded are the same for the entries set aside
	// (bytes and number), shareGrown for each share's entries, waiting or
	// set aside.
	grown, asideGrown, asideAdded int64
	shareGrown                    [shares]int64
}

// held is the size of what the Provider holds for the ledger, waiting
// or set aside, as this transaction leaves it: what LimitOutbox bounds.
func (t *txn) held() int64 {
	t.s.heldMu.Lock()
	defer t.s.heldMu.Unlock()
	return t.s.outboxBytes.Load() + t.grown + t.s.asideBytes.Load() + t.asideGrown
}

// revokeAt is the time a revocation this transaction records is dated:
// now, or the latest turn under a grant that committed before it when
// that is later (its clock was read before the turn took its place
// among the transactions). A turn's receipt is then never dated after
// a revocation that took effect after it.
func (t *txn) revokeAt(now time.Time) time.Time {
	if t.s.lastTurn.After(now) {
		return t.s.lastTurn
	}
	return now
}

// update runs fn in a write transaction and signals Queued when it queued
// entries and committed.
func (s *Store) update(fn func(tx *txn) error) error {
	t := &txn{s: s}
	err := s.db.Update(func(tx *bolt.Tx) error {
		t.Tx = tx
		if err := fn(t); err != nil {
			return err
		}
		if t.turnAt.After(s.lastTurn) {
			// Set before the commit, under the write lock: a commit that
			// fails leaves the next revocation dated a little later.
			s.lastTurn = t.turnAt
		}
		return nil
	})
	if err == nil {
		// An entry set aside moves its bytes from the outbox's count to
		// the set-aside count, and back when put back: both change
		// under heldMu, so that a transaction reading them (held) never
		// reads one before the move and the other after it, and takes
		// no room the bound does not have.
		s.heldMu.Lock()
		s.outboxBytes.Add(t.grown)
		s.asideBytes.Add(t.asideGrown)
		s.heldMu.Unlock()
		s.asideCount.Add(t.asideAdded)
		for sh := range shares {
			s.shareBytes[sh].Add(t.shareGrown[sh])
		}
	}
	if err == nil && t.queued {
		select {
		case s.queued <- struct{}{}:
		default:
		}
	}
	return err
}

// view runs fn in a read transaction.
func (s *Store) view(fn func(tx *bolt.Tx) error) error { return s.db.View(fn) }

// get decodes the JSON value at key in bucket b into v; found is false
// when there is none.
func get(tx *bolt.Tx, b, key []byte, v any) (found bool, err error) {
	raw := tx.Bucket(b).Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decode %s/%x: %w", b, key, err)
	}
	return true, nil
}

// put stores v as JSON at key in bucket b.
func put(tx *bolt.Tx, b, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", b, err)
	}
	return tx.Bucket(b).Put(key, raw)
}

// enqueue adds an entry to the outbox in tx: ErrOutboxFull for a receipt
// or refusal past the outbox's bound (Store.LimitOutbox).
func (t *txn) enqueue(it pipeline.Item) error {
	raw, err := json.Marshal(it)
	if err != nil {
		return fmt.Errorf("encode %s: %w", bOutbox, err)
	}
	if max := t.s.maxOutbox.Load(); max > 0 && it.Revocation == nil && t.held()+int64(len(raw)) > max {
		return fmt.Errorf("%w: it holds %d bytes (%d of them set aside), at most %d", ErrOutboxFull, t.held(), t.s.asideBytes.Load()+t.asideGrown, max)
	}
	_, err = t.enqueueRaw(raw)
	return err
}

// enqueueShared adds it to the outbox in tx and marks it as an entry of
// share sh, when sh and the outbox as a whole have room for it
// (Store.LimitIdentityRefusals, Store.LimitDeniedConsents,
// Store.LimitOutbox); it reports whether it did. An entry with an owner
// (not nil) is marked with it, and is not queued when perOwner entries of
// sh marked with the same owner wait already: one owner does not take a
// share all others need.
func (t *txn) enqueueShared(sh share, it pipeline.Item, owner []byte, perOwner int) (bool, error) {
	raw, err := json.Marshal(it)
	if err != nil {
		return false, fmt.Errorf("encode %s: %w", bOutbox, err)
	}
	n := int64(len(raw))
	if max := t.s.maxOutbox.Load(); max > 0 && t.held()+n > max {
		return false, nil
	}
	if max := t.s.shareMax[sh].Load(); max > 0 && t.s.shareBytes[sh].Load()+t.shareGrown[sh]+n > max {
		return false, nil
	}
	if owner != nil && perOwner > 0 {
		// A share's marks are few (its bytes are bounded) and an owned
		// entry is rare (a User's denial): a count by reading them all.
		waiting := 0
		c := t.Bucket(sh.bucket()).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if bytes.Equal(v, owner) {
				if waiting++; waiting >= perOwner {
					return false, nil
				}
			}
		}
	}
	k, err := t.enqueueRaw(raw)
	if err != nil {
		return false, err
	}
	if err := t.mark(sh, k, n, owner); err != nil {
		return false, err
	}
	return true, nil
}

// dequeue removes the outbox entry at key k in tx, if there is one, and
// returns its bytes (nil when there is none) and the share it was marked
// an entry of (noShare for none).
func (t *txn) dequeue(k []byte) (v []byte, in share, err error) {
	b := t.Bucket(bOutbox)
	if v = b.Get(k); v == nil {
		return nil, noShare, nil
	}
	v = slices.Clone(v)
	if err := b.Delete(k); err != nil {
		return nil, noShare, err
	}
	t.grown -= int64(len(v))
	in = noShare
	for sh := range shares {
		marks := t.Bucket(sh.bucket())
		if marks.Get(k) == nil {
			continue
		}
		if err := marks.Delete(k); err != nil {
			return nil, noShare, err
		}
		t.shareGrown[sh] -= int64(len(v))
		in = sh
	}
	return v, in, nil
}

// mark marks the outbox entry at key k, of n bytes, an entry of share
// sh, with its owner (nil: none): it counts against that share of the
// outbox.
func (t *txn) mark(sh share, k []byte, n int64, owner []byte) error {
	if err := t.Bucket(sh.bucket()).Put(k, owner); err != nil {
		return err
	}
	t.shareGrown[sh] += n
	return nil
}

// enqueueRaw adds an entry's bytes to the outbox in tx and returns its
// key. raw may be memory of the transaction's own pages: it is copied.
func (t *txn) enqueueRaw(raw []byte) ([]byte, error) {
	b := t.Bucket(bOutbox)
	n, err := b.NextSequence()
	if err != nil {
		return nil, err
	}
	k := seqKey(n)
	if err := b.Put(k, slices.Clone(raw)); err != nil {
		return nil, err
	}
	t.grown += int64(len(raw))
	t.queued = true
	return k, nil
}

// requeue moves the outbox entry at key k to the outbox's end in tx, with
// its bytes, its share's mark and its owner, and returns its new key. Its
// room moves with it: the outbox's bytes and its share's do not change.
func (t *txn) requeue(k []byte) ([]byte, error) {
	owners := [shares][]byte{}
	for sh := range shares {
		if o := t.Bucket(sh.bucket()).Get(k); o != nil {
			owners[sh] = slices.Clone(o)
		}
	}
	v, in, err := t.dequeue(k)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("outbox entry %x: %w", k, ErrNotFound)
	}
	nk, err := t.enqueueRaw(v)
	if err != nil {
		return nil, err
	}
	if in != noShare {
		if err := t.mark(in, nk, int64(len(v)), owners[in]); err != nil {
			return nil, err
		}
	}
	return nk, nil
}

func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// hash is how secrets (device codes, refresh tokens, tickets, cookies,
// session ids) are keyed: never stored as they are.
func hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// Errors of the store's operations.
var (
	// ErrNotFound: the conversation, grant, session or code is not known.
	ErrNotFound = errors.New("not found")
	// ErrTurnRunning: a turn with this messageId is running (PACT §4.3).
	ErrTurnRunning = errors.New("a turn with this messageId is running")
	// ErrGrantEnded: the grant a turn ran under was revoked or expired
	// before the turn was kept.
	ErrGrantEnded = errors.New("the grant was revoked or has ended")
	// ErrAssertionUsed: a login assertion was presented a second time.
	ErrAssertionUsed = errors.New("the login assertion was already used")
	// ErrTicket: a consent form's ticket is unknown: already used, or
	// pruned after it expired.
	ErrTicket = errors.New("no such consent ticket")
	// ErrTicketExpired: a consent form's ticket has expired.
	ErrTicketExpired = errors.New("the consent ticket has expired")
	// ErrTicketBrowser: a consent form was posted from another browser
	// session than the one it was shown to.
	ErrTicketBrowser = errors.New("the consent ticket belongs to another browser session")
)
