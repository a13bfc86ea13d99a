package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
	"github.com/pactledger/pactledger/pact/records"
)

// Conversation is one context: it belongs to one Brand and one (PA, sub).
type Conversation struct {
	ID      string    `json:"id"`
	Brand   string    `json:"brand"`
	PA      string    `json:"pa"`
	Sub     string    `json:"sub"`
	Created time.Time `json:"created"`
	Closed  bool      `json:"closed,omitempty"`
	// User is the Brand user the context acts for once a delegation token
	// was used in it (PACT §5.5).
	User  string          `json:"user,omitempty"`
	State json.RawMessage `json:"state,omitempty"`
}

// storedReply is the reply to one messageId, or a marker that a turn is
// running.
type storedReply struct {
	Pending bool            `json:"pending,omitempty"`
	Started time.Time       `json:"started"`
	Body    json.RawMessage `json:"body,omitempty"` // the whole response: { "message": … } or { "task": … }
}

func replyKey(ctxID, msgID string) []byte { return []byte(ctxID + "\x00" + msgID) }

// staleTurn is how long a running-turn marker holds before a retry may run
// the turn again (the process that started it is presumed gone).
const staleTurn = 30 * time.Second

func getConv(tx *bolt.Tx, id string) (*Conversation, error) {
	var c Conversation
	found, err := get(tx, bContexts, []byte(id), &c)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("context %s: %w", id, ErrNotFound)
	}
	return &c, nil
}

// Conversation returns the context id.
func (s *Store) Conversation(id string) (*Conversation, error) {
	var c *Conversation
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		c, err = getConv(tx, id)
		return err
	})
	return c, err
}

// BeginTurn starts a turn of messageId msgID in conv (stored first when
// isNew, started at now unless conv says when). It returns the stored
// reply when msgID already has one, or ErrTurnRunning while another turn
// with msgID runs; else it records the running marker and returns the
// conversation as stored. It first carries out some of what is due at
// now for conversations, the action log, grants and refresh tokens
// (pruneKept): a conversation, with its stored replies, is kept as long
// as ConversationTTL, ReplyKept and ConversationKept say.
func (s *Store) BeginTurn(conv Conversation, isNew bool, msgID string, now time.Time) (*Conversation, json.RawMessage, error) {
	var stored json.RawMessage
	if isNew && conv.Created.IsZero() {
		conv.Created = now
	}
	out := &conv
	err := s.update(func(tx *txn) error {
		if _, err := pruneKept(tx.Tx, now); err != nil {
			return err
		}
		if !isNew {
			c, err := getConv(tx.Tx, conv.ID)
			if err != nil {
				return err
			}
			out = c
		}
		k := replyKey(out.ID, msgID)
		var r storedReply
		found, err := get(tx.Tx, bReplies, k, &r)
		switch {
		case err != nil:
			return err
		case found && r.Body != nil:
			stored = r.Body
			return nil
		case found && now.Sub(r.Started) < staleTurn:
			return ErrTurnRunning
		}
		if isNew {
			if err := put(tx.Tx, bContexts, []byte(out.ID), out); err != nil {
				return err
			}
			if err := indexConversation(tx.Tx, out); err != nil {
				return err
			}
		}
		return put(tx.Tx, bReplies, k, storedReply{Pending: true, Started: now})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("begin turn %s in %s: %w", msgID, conv.ID, err)
	}
	return out, stored, nil
}

// ActionLogEntry is the application action log: the exact args, kept with
// the receipt's hash under the log's own retention.
type ActionLogEntry struct {
	ReceiptSHA256 string    `json:"receiptSha256"`
	Tool          string    `json:"tool"`
	Target        string    `json:"target"`
	ArgsJSON      string    `json:"argsJson"`
	At            time.Time `json:"at"`
}

// TurnRecord is everything a turn keeps: its reply and the agent's new
// state, the record changes it made, the action log of its receipt, and
// what it queues for the ledger (the receipt, or a refusal).
type TurnRecord struct {
	ContextID, MessageID string
	Reply                json.RawMessage
	State                json.RawMessage
	Close                bool
	// User is the Brand user a delegation token made the turn act for.
	User string
	// Grant is the grant of that delegation token: the turn is kept only
	// while it is still active (neither revoked nor expired) when it
	// commits, else nothing is (ErrGrantEnded).
	Grant   string
	Changes map[records.Key]records.Change
	// ReceiptSHA256 keys ActionLog: the hex SHA-256 of the receipt's JWS.
	ReceiptSHA256 string
	ActionLog     []ActionLogEntry
	Outbox        []pipeline.Item
	// IdentityRefusal is the refusal of an account action asked under
	// PACT §3 alone, with no delegation grant: it records no action and
	// no grant, and a personal agent can cause as many as it sends
	// requests. It is queued only while the identity refusals have room
	// in the outbox (LimitIdentityRefusals); past it, or past the outbox's
	// bound, the turn is kept without it.
	IdentityRefusal *pipeline.Item
}

// RecordTurn keeps a turn whole or not at all, in one transaction at now:
// a receipt is never queued for a reply that was not kept, nor a reply
// kept without its receipt. A record change refused because another turn
// changed the record since (records.ErrChanged) keeps nothing, and so does
// a turn whose grant was revoked or ended while it ran (ErrGrantEnded): a
// revocation committed before the turn leaves no action and no receipt
// after it. Only r.IdentityRefusal may be left out, for want of room;
// dropped reports that it was.
func (s *Store) RecordTurn(r TurnRecord, now time.Time) (dropped bool, err error) {
	err = s.update(func(tx *txn) error {
		dropped = false
		if r.Grant != "" {
			var g oauth.Grant
			found, err := get(tx.Tx, bGrants, []byte(r.Grant), &g)
			if err != nil {
				return err
			}
			if !found || !g.Active(now) {
				return fmt.Errorf("grant %s: %w", r.Grant, ErrGrantEnded)
			}
			tx.turnAt = now
		}
		for k, c := range r.Changes {
			cur, err := fields(tx.Tx, k)
			if err != nil {
				return err
			}
			next, err := c.Apply(cur)
			if err != nil {
				return fmt.Errorf("record %s: %w", k, err)
			}
			if err := put(tx.Tx, bRecords, []byte(k.String()), next); err != nil {
				return err
			}
		}
		if len(r.ActionLog) > 0 {
			if err := put(tx.Tx, bActionLog, []byte(r.ReceiptSHA256), r.ActionLog); err != nil {
				return err
			}
			if err := keepDue(tx.Tx, now.Add(ActionLogKept), dueActionLog, []byte(r.ReceiptSHA256)); err != nil {
				return err
			}
		}
		for _, it := range r.Outbox {
			if err := tx.enqueue(it); err != nil {
				return err
			}
		}
		if r.IdentityRefusal != nil {
			queued, err := tx.enqueueShared(identityShare, *r.IdentityRefusal, nil, 0)
			if err != nil {
				return err
			}
			dropped = !queued
		}
		c, err := getConv(tx.Tx, r.ContextID)
		if err != nil {
			return err
		}
		c.State, c.Closed = r.State, c.Closed || r.Close
		if r.User != "" {
			c.User = r.User
		}
		if err := put(tx.Tx, bContexts, []byte(c.ID), c); err != nil {
			return err
		}
		return put(tx.Tx, bReplies, replyKey(c.ID, r.MessageID), storedReply{Started: now, Body: r.Reply})
	})
	if err != nil {
		return false, fmt.Errorf("record turn %s in %s: %w", r.MessageID, r.ContextID, err)
	}
	return dropped, nil
}

// StoredReply returns the reply kept for messageId msgID in context
// ctxID, or nil when there is none (yet).
func (s *Store) StoredReply(ctxID, msgID string) (json.RawMessage, error) {
	var body json.RawMessage
	err := s.view(func(tx *bolt.Tx) error {
		var r storedReply
		_, err := get(tx, bReplies, replyKey(ctxID, msgID), &r)
		body = r.Body
		return err
	})
	return body, err
}

// AbandonTurn removes the running marker of a turn that did not finish, so
// that a retry runs it.
func (s *Store) AbandonTurn(ctxID, msgID string) error {
	return s.update(func(tx *txn) error { return tx.Bucket(bReplies).Delete(replyKey(ctxID, msgID)) })
}

// ActionLog returns the action log entries of a receipt (by the hex
// SHA-256 of its JWS).
func (s *Store) ActionLog(receiptSHA string) ([]ActionLogEntry, error) {
	var out []ActionLogEntry
	err := s.view(func(tx *bolt.Tx) error {
		_, err := get(tx, bActionLog, []byte(receiptSHA), &out)
		return err
	})
	return out, err
}

// fields returns the fields stored over a record, or nil. A status kept
// before brands defined their record types (by brand/id) counts as its
// status field.
func fields(tx *bolt.Tx, k records.Key) (map[string]string, error) {
	var m map[string]string
	if found, err := get(tx, bRecords, []byte(k.String()), &m); found || err != nil {
		return m, err
	}
	if v := tx.Bucket(bOrders).Get([]byte(k.Legacy())); v != nil {
		return map[string]string{"status": string(v)}, nil
	}
	return nil, nil
}

// Fields implements records.Stored.
func (s *Store) Fields(k records.Key) (map[string]string, error) {
	var m map[string]string
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		m, err = fields(tx, k)
		return err
	})
	return m, err
}
