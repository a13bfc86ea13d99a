package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/oauth"
)

// How long conversations, their stored replies, the action log, grants
// and refresh tokens are kept (docs/design/040). What comes due is indexed
// in bKeepDue when it is stored, by the time it is due and what is due
// then, and carried out oldest first, at most keepPruneBatch steps a
// transaction: by each write that adds to these buckets (a turn begun, a
// refresh token issued), so that the backlog shrinks faster than an agent
// within its rate limits makes it grow, and by Prune, batch after batch,
// so that what came due goes while no write comes.
const (
	// ConversationTTL is how long a conversation runs from when it
	// started: then it has expired, and a new message in it is answered
	// UNSUPPORTED_OPERATION (PACT §4.2: a Provider MAY close a
	// conversation that expired); the agent starts a new one.
	ConversationTTL = 7 * 24 * time.Hour
	// ReplyKept is how long a conversation's stored replies (and its
	// agent's state) are kept once it has expired: a retry of any of its
	// messageIds within it gets the stored reply (PACT §4.3), as it does
	// while the conversation runs. Then they are deleted, and a repeated
	// messageId is answered UNSUPPORTED_OPERATION: never run again.
	ReplyKept = 24 * time.Hour
	// ConversationKept is how long an expired conversation is kept, closed
	// and without its replies or state, so that a message to it is
	// answered UNSUPPORTED_OPERATION and its agent starts a new one. Then
	// it is deleted, and its contextId is unknown (INVALID_PARAMS).
	ConversationKept = 30 * 24 * time.Hour
	// ActionLogKept is how long a receipt's action log is kept: as long
	// as the conversation's stored reply that carries the receipt may be.
	// The ledger keeps the actions with the receipt under its own
	// retention classes.
	ActionLogKept = ConversationTTL + ReplyKept
	// GrantKept is how long a grant is kept once it ended (expired,
	// revoked or replaced): a delegation token of it verifies for up to
	// oauth.AccessTokenTTL after a revocation, and such a request is
	// refused and put on record saying how the grant ended; the account
	// page shows the User the grant ended, and when. Its refresh tokens,
	// which are all answered invalid_grant once it ended and need no
	// reuse detection any more, go when it ends.
	GrantKept = 30 * 24 * time.Hour
)

var (
	bKeepDue        = []byte("keep_due")         // due time | kind | key: nothing
	bRefreshByGrant = []byte("refresh_by_grant") // grant id | 0 | token hash: nothing
)

// What is due (bKeepDue), and the key it is due for.
const (
	dueReplies      byte = 'r' // conversation id: its replies and state are dropped
	dueConversation byte = 'c' // conversation id: it is deleted
	dueActionLog    byte = 'a' // receipt hash: its action log is deleted
	dueTokens       byte = 't' // grant id: its refresh tokens are deleted
	dueGrant        byte = 'g' // grant id: it is deleted, with any refresh token left
)

// keepPruneBatch is how many steps (a due entry, a reply or a refresh
// token deleted) a transaction carries out at most.
const keepPruneBatch = 256

// Expires is when the conversation expires (ConversationTTL).
func (c *Conversation) Expires() time.Time { return c.Created.Add(ConversationTTL) }

// Ended reports whether the conversation is closed, or has expired, at
// now: a new message in it is answered UNSUPPORTED_OPERATION.
func (c *Conversation) Ended(now time.Time) bool { return c.Closed || now.After(c.Expires()) }

func keepDue(tx *bolt.Tx, at time.Time, kind byte, key []byte) error {
	return tx.Bucket(bKeepDue).Put(dueKey(at, kind, key), nil)
}

// indexConversation indexes what is due for conversation c.
func indexConversation(tx *bolt.Tx, c *Conversation) error {
	if err := keepDue(tx, c.Expires().Add(ReplyKept), dueReplies, []byte(c.ID)); err != nil {
		return err
	}
	return keepDue(tx, c.Expires().Add(ConversationKept), dueConversation, []byte(c.ID))
}

// grantEnd is when g ended, or will unless it is revoked before: when it
// was revoked, or expires.
func grantEnd(g *oauth.Grant) time.Time {
	if !g.Revoked.IsZero() && g.Revoked.Before(g.Expires) {
		return g.Revoked
	}
	return g.Expires
}

// putGrant stores g and indexes what is due for it. A grant's end only
// comes sooner (a revocation), so entries it was indexed under before are
// due later than these, and find nothing left, or nothing due yet, when
// they come.
func putGrant(tx *bolt.Tx, g *oauth.Grant) error {
	if err := put(tx, bGrants, []byte(g.ID), g); err != nil {
		return err
	}
	end := grantEnd(g)
	if err := keepDue(tx, end, dueTokens, []byte(g.ID)); err != nil {
		return err
	}
	return keepDue(tx, end.Add(GrantKept), dueGrant, []byte(g.ID))
}

func refreshByGrantKey(grant string, token []byte) []byte {
	return slices.Concat([]byte(grant), []byte{0}, token)
}

// indexKept indexes what was stored before bKeepDue was: once, when the
// store is opened. now stands in for a time never recorded.
func indexKept(tx *bolt.Tx, now time.Time) error {
	err := tx.Bucket(bContexts).ForEach(func(k, _ []byte) error {
		var c Conversation
		if _, err := get(tx, bContexts, k, &c); err != nil {
			return keepDue(tx, now.Add(ReplyKept), dueConversation, slices.Clone(k))
		}
		if c.Created.IsZero() {
			c.Created = now
		}
		c.ID = string(k)
		return indexConversation(tx, &c)
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bGrants).ForEach(func(k, _ []byte) error {
		var g oauth.Grant
		if _, err := get(tx, bGrants, k, &g); err != nil {
			return keepDue(tx, now.Add(GrantKept), dueGrant, slices.Clone(k))
		}
		end := grantEnd(&g)
		if err := keepDue(tx, end, dueTokens, slices.Clone(k)); err != nil {
			return err
		}
		return keepDue(tx, end.Add(GrantKept), dueGrant, slices.Clone(k))
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bRefresh).ForEach(func(k, _ []byte) error {
		var t oauth.RefreshToken
		if _, err := get(tx, bRefresh, k, &t); err != nil {
			return nil // deleted below
		}
		if err := tx.Bucket(bRefreshByGrant).Put(refreshByGrantKey(t.Grant, k), nil); err != nil {
			return err
		}
		if tx.Bucket(bGrants).Get([]byte(t.Grant)) == nil {
			return keepDue(tx, now, dueTokens, []byte(t.Grant))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := deleteUnreadable(tx, bRefresh); err != nil {
		return err
	}
	return tx.Bucket(bActionLog).ForEach(func(k, _ []byte) error {
		var log []ActionLogEntry
		at := now
		if _, err := get(tx, bActionLog, k, &log); err == nil && len(log) > 0 && !log[0].At.IsZero() {
			at = log[0].At
		}
		return keepDue(tx, at.Add(ActionLogKept), dueActionLog, slices.Clone(k))
	})
}

// deleteUnreadable deletes the values of bucket b that are not JSON.
func deleteUnreadable(tx *bolt.Tx, b []byte) error {
	var bad [][]byte
	err := tx.Bucket(b).ForEach(func(k, v []byte) error {
		if !json.Valid(v) {
			bad = append(bad, slices.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range bad {
		if err := tx.Bucket(b).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// pruneKept carries out, oldest first, what bKeepDue holds due before
// now, at most keepPruneBatch steps, and returns how many steps it
// carried out: keepPruneBatch when more may be due.
func pruneKept(tx *bolt.Tx, now time.Time) (int, error) {
	due := tx.Bucket(bKeepDue)
	end := timeKey(now)
	budget := keepPruneBatch
	for budget > 0 {
		k, _ := due.Cursor().First()
		switch {
		case k == nil:
			return keepPruneBatch - budget, nil
		case len(k) < 9: // no entry this store writes
			budget--
			if err := due.Delete(slices.Clone(k)); err != nil {
				return 0, err
			}
			continue
		case bytes.Compare(k[:8], end) >= 0:
			return keepPruneBatch - budget, nil
		}
		k = slices.Clone(k)
		budget--
		done, err := carryOut(tx, k[8], k[9:], now, &budget)
		if err != nil {
			return 0, err
		}
		if !done {
			return keepPruneBatch - budget, nil
		}
		if err := due.Delete(k); err != nil {
			return 0, err
		}
	}
	return keepPruneBatch, nil
}

// carryOut does what is due of kind for key at now, spending from budget
// one step for each reply or refresh token it deletes; done is false when
// the budget ran out first (the entry stays, for the next batch).
func carryOut(tx *bolt.Tx, kind byte, key []byte, now time.Time, budget *int) (done bool, err error) {
	switch kind {
	case dueReplies, dueConversation:
		var c Conversation
		found, gerr := get(tx, bContexts, key, &c)
		if gerr == nil && found && !now.After(c.Expires().Add(ReplyKept)) {
			return true, nil // not due yet
		}
		if done, err := deletePrefix(tx, bReplies, slices.Concat(key, []byte{0}), budget); err != nil || !done {
			return done, err
		}
		switch {
		case !found:
			return true, nil
		case gerr != nil || kind == dueConversation && now.After(c.Expires().Add(ConversationKept)):
			return true, tx.Bucket(bContexts).Delete(key)
		case c.State != nil || !c.Closed:
			c.State, c.Closed = nil, true
			return true, put(tx, bContexts, key, c)
		}
		return true, nil
	case dueActionLog:
		return true, tx.Bucket(bActionLog).Delete(key)
	case dueTokens, dueGrant:
		var g oauth.Grant
		found, gerr := get(tx, bGrants, key, &g)
		if gerr == nil && found && (g.Active(now) || kind == dueGrant && !now.After(grantEnd(&g).Add(GrantKept))) {
			return true, nil // not due yet: indexed before a revocation brought its end sooner
		}
		if done, err := deleteTokens(tx, string(key), budget); err != nil || !done {
			return done, err
		}
		if kind == dueGrant || gerr != nil {
			return true, tx.Bucket(bGrants).Delete(key)
		}
		return true, nil
	}
	return true, nil // a kind this version does not know
}

// deletePrefix deletes the keys of bucket b that start with prefix, at
// most *budget of them; done is false when some are left.
func deletePrefix(tx *bolt.Tx, b, prefix []byte, budget *int) (bool, error) {
	bk := tx.Bucket(b)
	keys, done := prefixed(bk, prefix, *budget)
	for _, k := range keys {
		if err := bk.Delete(k); err != nil {
			return false, err
		}
	}
	*budget -= len(keys)
	return done, nil
}

// deleteTokens deletes the refresh tokens of grant, at most *budget of
// them; done is false when some are left.
func deleteTokens(tx *bolt.Tx, grant string, budget *int) (bool, error) {
	prefix := refreshByGrantKey(grant, nil)
	byGrant := tx.Bucket(bRefreshByGrant)
	keys, done := prefixed(byGrant, prefix, *budget)
	for _, k := range keys {
		if err := tx.Bucket(bRefresh).Delete(k[len(prefix):]); err != nil {
			return false, err
		}
		if err := byGrant.Delete(k); err != nil {
			return false, err
		}
	}
	*budget -= len(keys)
	return done, nil
}

// prefixed returns up to n keys of bk that start with prefix; all is false
// when more follow.
func prefixed(bk *bolt.Bucket, prefix []byte, n int) (keys [][]byte, all bool) {
	c := bk.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(keys) == n {
			return keys, false
		}
		keys = append(keys, slices.Clone(k))
	}
	return keys, true
}
