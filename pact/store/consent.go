package store

import (
	"crypto/subtle"
	"errors"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/oauth"
)

// consentTicket ties a consent form to the browser it was shown to (by a
// cookie's hash) and to the signed-in User.
type consentTicket struct {
	Brand      string    `json:"brand"`
	User       string    `json:"user"`
	UserCode   string    `json:"userCode"`
	CookieHash []byte    `json:"cookieHash"`
	Expires    time.Time `json:"expires"`
}

// admits reports whether the ticket may be posted now from the browser
// with cookie.
func (t *consentTicket) admits(cookie string, now time.Time) bool {
	return cookie != "" && subtle.ConstantTimeCompare(hash(cookie), t.CookieHash) == 1 && !now.After(t.Expires)
}

// ConsentStart is a User returned from the Brand's login with a verified
// assertion (PACT §5.3), about to see the consent form.
type ConsentStart struct {
	Brand string
	// User is the assertion's sub: the Brand user who signed in.
	User     string
	UserCode string
	// AssertionID identifies the assertion (its issuer and jti): each is
	// accepted once, remembered until AssertionExpires.
	AssertionID      string
	AssertionExpires time.Time
	// Ticket and Cookie are the consent form's secrets: the ticket in the
	// form, the cookie in the browser. Both are kept hashed until
	// TicketExpires.
	Ticket, Cookie string
	TicketExpires  time.Time
	// Checked are the grants the caller applied the ledger's revocations
	// to (CoveringGrant): consent is skipped only for a grant among them.
	Checked []string
}

// StartConsent accepts a login assertion once and finds the pending device
// authorization of its user code. When an active grant of the same User to
// the same personal agent, asked for under the same sub (PACT §3.2: the
// agent's User is the pair of the agent and its sub; another of the
// agent's users asking does not inherit this User's consent), already
// covers the request and is among in.Checked, it returns that grant
// (consent may be skipped, PACT §5.3) and stores no ticket; else it stores
// the consent form's ticket. A covering grant the caller did not check
// (one made since CoveringGrant) is not skipped for: the User is asked.
// Expired tickets and assertion ids are pruned.
// Errors: ErrAssertionUsed, ErrNotFound (unknown code), an
// *oauth.TransitionError when the request was answered or has expired.
func (s *Store) StartConsent(in ConsentStart, now time.Time) (oauth.DeviceAuthorization, *oauth.Grant, error) {
	var d oauth.DeviceAuthorization
	var cover *oauth.Grant
	err := s.update(func(tx *txn) error {
		if _, err := pruneConsent(tx.Tx, now); err != nil {
			return err
		}
		used := tx.Bucket(bAssertions)
		key := hash(in.AssertionID)
		if used.Get(key) != nil {
			return ErrAssertionUsed
		}
		exp, _ := in.AssertionExpires.MarshalText()
		if err := used.Put(key, exp); err != nil {
			return err
		}
		var err error
		if d, _, err = pendingDevice(tx.Tx, in.Brand, in.UserCode); err != nil {
			return err
		}
		if d.StateAt(now) != oauth.Pending {
			return &oauth.TransitionError{Event: oauth.EventApprove, From: d.StateAt(now)}
		}
		if cover, err = coveringGrant(tx.Tx, in.Brand, in.User, d.Client, d.Sub, d.Scopes, now); err != nil {
			return err
		}
		if cover != nil && slices.Contains(in.Checked, cover.ID) {
			return nil
		}
		cover = nil
		return put(tx.Tx, bTickets, hash(in.Ticket), consentTicket{Brand: in.Brand, User: in.User, UserCode: d.UserCode,
			CookieHash: hash(in.Cookie), Expires: in.TicketExpires})
	})
	return d, cover, err
}

// CoveringGrant returns, without accepting an assertion or storing
// anything, the grant StartConsent would skip consent for when user signs
// in for the pending device authorization of userCode at brand; nil when
// there is none (the code is unknown, not pending, or no grant covers
// it). The caller applies the ledger's revocation to it and names it in
// ConsentStart.Checked, so that consent is never skipped for a grant the
// ledger records revoked.
func (s *Store) CoveringGrant(brand, user, userCode string, now time.Time) (*oauth.Grant, error) {
	var cover *oauth.Grant
	err := s.view(func(tx *bolt.Tx) error {
		d, _, err := pendingDevice(tx, brand, userCode)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil || d.StateAt(now) != oauth.Pending {
			return err
		}
		cover, err = coveringGrant(tx, brand, user, d.Client, d.Sub, d.Scopes, now)
		return err
	})
	return cover, err
}

// coveringGrant finds the newest active grant of user to client, asked
// for under the agent's sub, at brand whose scopes include every one of
// scopes.
func coveringGrant(tx *bolt.Tx, brand, user, client, sub string, scopes []string, now time.Time) (*oauth.Grant, error) {
	gs, err := userGrants(tx, brand, user)
	if err != nil {
		return nil, err
	}
	for i, g := range gs {
		if g.Client == client && g.AgentSub != "" && g.AgentSub == sub && g.Active(now) && g.Covers(scopes) {
			return &gs[i], nil
		}
	}
	return nil, nil
}

// DecideByTicket records the decision posted with a consent form: the
// ticket must be one StartConsent stored at brand for this browser's
// cookie, unexpired. The ticket is spent and the decision recorded in one
// transaction: a refused decision leaves the form usable, a crash loses
// neither. dc.User is taken from the ticket. A denial's refusal is queued
// for the ledger as DecideDevice queues it. Errors: ErrTicket,
// ErrTicketBrowser, ErrTicketExpired, and those of DecideDevice.
func (s *Store) DecideByTicket(brand, ticket, cookie string, dc oauth.Decision, now time.Time) (Decided, error) {
	var out Decided
	err := s.update(func(tx *txn) error {
		out = Decided{}
		key := hash(ticket)
		var t consentTicket
		found, err := get(tx.Tx, bTickets, key, &t)
		switch {
		case err != nil:
			return err
		case !found:
			return ErrTicket
		case cookie == "" || subtle.ConstantTimeCompare(hash(cookie), t.CookieHash) != 1 || t.Brand != brand:
			return ErrTicketBrowser
		case now.After(t.Expires):
			return ErrTicketExpired
		}
		if err := tx.Bucket(bTickets).Delete(key); err != nil {
			return err
		}
		dc.User = t.User
		out, err = decide(tx, brand, t.UserCode, dc, now)
		return err
	})
	if err != nil {
		return Decided{}, err
	}
	return out, nil
}

// pruneConsent drops used assertion ids and consent tickets that have
// expired, and returns how many it dropped.
func pruneConsent(tx *bolt.Tx, now time.Time) (int, error) {
	var n int
	c := tx.Bucket(bAssertions).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var exp time.Time
		if exp.UnmarshalText(v) == nil && now.After(exp) {
			if err := c.Delete(); err != nil {
				return 0, err
			}
			n++
		}
	}
	c = tx.Bucket(bTickets).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		var t consentTicket
		if _, err := get(tx, bTickets, k, &t); err == nil && now.After(t.Expires) {
			if err := c.Delete(); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}
