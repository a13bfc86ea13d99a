package pact

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bContexts = []byte("contexts")
	bReplies  = []byte("replies")
)

// conversation is one context: it belongs to one Brand and one (PA, sub).
type conversation struct {
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

// store keeps conversations and replies in the Provider's own bbolt file,
// so they survive restarts.
type store struct{ db *bolt.DB }

func openStore(path string) (*store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open provider store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bContexts, bReplies, bDevices, bUserCode, bGrants, bRefresh, bOrders, bRecords, bActionLog, bPipeline, bDead, bAssertions, bTickets, bBrandSessions} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

func replyKey(ctxID, msgID string) []byte { return []byte(ctxID + "\x00" + msgID) }

var errNoContext = errors.New("no such context")

func getConv(tx *bolt.Tx, id string) (*conversation, error) {
	v := tx.Bucket(bContexts).Get([]byte(id))
	if v == nil {
		return nil, errNoContext
	}
	var c conversation
	if err := json.Unmarshal(v, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func putConv(tx *bolt.Tx, c *conversation) error {
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return tx.Bucket(bContexts).Put([]byte(c.ID), v)
}

// staleTurn is how long a running-turn marker holds before a retry may run
// the turn again (the process that started it is presumed gone).
const staleTurn = 30 * time.Second

// begin starts a turn: it returns the stored reply when messageId already
// has one, an error when another turn with that messageId is running, or
// records the running marker and returns the conversation.
func (s *store) begin(conv *conversation, isNew bool, msgID string, now time.Time) (*conversation, json.RawMessage, error) {
	var stored json.RawMessage
	err := s.db.Update(func(tx *bolt.Tx) error {
		c := conv
		if !isNew {
			var err error
			if c, err = getConv(tx, conv.ID); err != nil {
				return err
			}
		}
		k := replyKey(c.ID, msgID)
		if v := tx.Bucket(bReplies).Get(k); v != nil {
			var r storedReply
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.Body != nil {
				stored = r.Body
				return nil
			}
			if now.Sub(r.Started) < staleTurn {
				return newErr(ReasonInvalidParams, "messageId is being processed; retry later")
			}
		}
		if isNew {
			if err := putConv(tx, c); err != nil {
				return err
			}
		}
		v, err := json.Marshal(storedReply{Pending: true, Started: now})
		if err != nil {
			return err
		}
		conv = c
		return tx.Bucket(bReplies).Put(k, v)
	})
	return conv, stored, err
}

// finish stores the response and the agent's new state, and writes the
// turn's effects (order changes, action log, outbox) in the same
// transaction.
func (s *store) finish(conv *conversation, msgID string, body json.RawMessage, state json.RawMessage, closeIt bool, user string, now time.Time, fx *turnEffects) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := fx.write(tx); err != nil {
			return err
		}
		c, err := getConv(tx, conv.ID)
		if err != nil {
			return err
		}
		c.State, c.Closed = state, c.Closed || closeIt
		if user != "" {
			c.User = user
		}
		if err := putConv(tx, c); err != nil {
			return err
		}
		v, err := json.Marshal(storedReply{Started: now, Body: body})
		if err != nil {
			return err
		}
		return tx.Bucket(bReplies).Put(replyKey(c.ID, msgID), v)
	})
}

// abandon removes a running marker after the agent failed.
func (s *store) abandon(conv *conversation, msgID string) {
	_ = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bReplies).Delete(replyKey(conv.ID, msgID)) })
}

func (s *store) conv(id string) (*conversation, error) {
	var c *conversation
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		c, err = getConv(tx, id)
		return err
	})
	return c, err
}
