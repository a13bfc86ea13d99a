package store

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
)

// newUserCode makes the user codes of new device authorizations.
var newUserCode = oauth.NewUserCode

// userCodeTries is how many fresh user codes NewDeviceAuthorization tries
// before it gives up: all taken is ErrUserCodeTaken.
const userCodeTries = 5

// ErrUserCodeTaken: every user code tried for a new device authorization
// belongs to another one still kept.
var ErrUserCodeTaken = errors.New("no free user code was found")

// NewDeviceAuthorization stores d, keyed by deviceCode, under a fresh user
// code, and returns the user code. A step-up that asks what one still
// pending asks (the same brand, agent, sub, extended grant and scopes,
// its code lasting at least half its time) is not stored: that one's user
// code is returned. It refuses, with a *PendingLimitError, a device
// authorization the agent asked for (not a step-up) when it has
// oauth.MaxPending pending for the same sub already, or
// oauth.MaxPendingPerAgent for all its subs, or when their request JWTs
// and d's would pass oauth.MaxPendingBytesPerAgent; and with
// ErrUserCodeTaken when it finds no user code free. It first carries out
// some of what is due for device authorizations at now: the request JWTs
// of expired ones are dropped, and those expired oauth.DeviceCodeKept
// ago are deleted with their user codes (pruneDevices).
func (s *Store) NewDeviceAuthorization(deviceCode string, d oauth.DeviceAuthorization, now time.Time) (string, error) {
	var refused *PendingLimitError // a refusal that still commits the pruning
	var userCode string
	err := s.update(func(tx *txn) error {
		var err error
		userCode, refused, err = newDeviceAuthorization(tx.Tx, deviceCode, d, now)
		return err
	})
	if err == nil && refused != nil {
		err = refused
	}
	if err != nil {
		return "", fmt.Errorf("store device authorization: %w", err)
	}
	return userCode, nil
}

// newDeviceAuthorization is NewDeviceAuthorization in tx; a refusal for
// a bound is returned apart, since the pruning it did commits all the
// same.
func newDeviceAuthorization(tx *bolt.Tx, deviceCode string, d oauth.DeviceAuthorization, now time.Time) (string, *PendingLimitError, error) {
	if _, err := pruneDevices(tx, now); err != nil {
		return "", nil, err
	}
	if d.StepUp {
		if open, err := openStepUp(tx, &d, now); err != nil || open != "" {
			return open, nil, err
		}
	} else if bound, soonest, over := pendingBound(tx, &d, now); over {
		return "", &PendingLimitError{Bound: bound, Until: soonest}, nil
	}
	codes := tx.Bucket(bUserCodes)
	d.UserCode = ""
	for range userCodeTries { // a user code collision is unlikely; retry a few times
		if c := newUserCode(); codes.Get([]byte(c)) == nil {
			d.UserCode = c
			break
		}
	}
	if d.UserCode == "" {
		return "", nil, fmt.Errorf("%w after %d tries", ErrUserCodeTaken, userCodeTries)
	}
	key := hash(deviceCode)
	if err := put(tx, bDevices, key, d); err != nil {
		return "", nil, err
	}
	if err := codes.Put([]byte(d.UserCode), key); err != nil {
		return "", nil, err
	}
	if d.StepUp {
		if err := tx.Bucket(bStepUps).Put(stepUpKey(&d), key); err != nil {
			return "", nil, err
		}
	}
	return d.UserCode, nil, indexDevice(tx, &d, key)
}

// RedeemDeviceCode is a token request with a device code by client at
// brand under its User sub (RFC 8628 §3.4–3.5): a code asked by another
// client, or under another sub, answers invalid_grant. An approved code is redeemed once, for the
// grant it makes (or the User's existing grant that covered it). Other
// states answer an *oauth.Error (authorization_pending, slow_down,
// access_denied, expired_token, invalid_grant); the poll's bookkeeping is
// kept all the same.
//
// The User keeps one active grant for each personal agent and agent sub
// (oauth.Grant.SameAgent): the grant redeemed replaces the User's other
// active grants of that agent, now that the agent holds its token. A new
// grant carries the scopes of those the agent did not ask for again
// (oauth.Grant.CarryOver); an existing grant replaces only those whose
// scopes it covers. Each grant replaced is revoked, its revocation queued
// for the ledger naming the grant that replaced it. The caller first
// applies the ledger's revocations to the grants the redemption rests on
// (DeviceCodeGrants) and names them in checked: one the ledger records
// revoked is then revoked here, and neither carried nor replaced. A
// redemption that would rest on an active grant not in checked (the User
// answered between DeviceCodeGrants and this call) answers
// authorization_pending and writes nothing: the agent's next poll reads
// the grants again. A code approved without consent for a grant that has
// ended since (revoked, by the ledger's record too, or expired) is
// pending again (reopen) and answers authorization_pending: the User who
// opens its link again is asked, rather than the code left approved
// under a grant that no longer holds.
//
// The refresh token issue makes for the grant is stored in the same
// transaction: the code is redeemed and the older grants replaced only
// with the agent's tokens made, and an error of issue leaves the code
// approved and the older grants as they were, for the agent's retry.
func (s *Store) RedeemDeviceCode(deviceCode, brand, client, sub string, checked []string, now time.Time, issue Issue) (oauth.Grant, error) {
	var g oauth.Grant
	var answer *oauth.Error // an answer that still commits the poll's bookkeeping
	err := s.update(func(tx *txn) error {
		key := hash(deviceCode)
		var d oauth.DeviceAuthorization
		found, err := get(tx.Tx, bDevices, key, &d)
		switch {
		case err != nil:
			return err
		case !found:
			return oauth.NewError(oauth.InvalidGrant, "unknown device_code")
		case !d.IssuedTo(brand, client, sub):
			return oauth.NewError(oauth.InvalidGrant, "the device_code was issued to another client, brand or user of the personal agent")
		}
		if answer = d.Poll(now); answer != nil {
			return put(tx.Tx, bDevices, key, d)
		}
		switch ok, err := restsOn(tx.Tx, &d, checked, now); {
		case err != nil:
			return err
		case !ok:
			answer = oauth.NewError(oauth.AuthorizationPending, "the User's answer was just recorded; poll again")
			return nil
		}
		if d.GrantID != "" {
			found, err := get(tx.Tx, bGrants, []byte(d.GrantID), &g)
			if err != nil {
				return err
			}
			if !found || !g.Active(now) {
				g = oauth.Grant{}
				if answer, err = reopen(tx.Tx, &d, key, now); err != nil {
					return err
				}
				if answer == nil {
					return oauth.NewError(oauth.InvalidGrant, "the grant was revoked or has expired; start again")
				}
				return nil
			}
		}
		if err := d.Redeem(now); err != nil {
			return err
		}
		d.RequestJWT = "" // kept for a denial, should the approval be reopened
		if err := put(tx.Tx, bDevices, key, d); err != nil {
			return err
		}
		if d.GrantID == "" {
			g = oauth.NewGrant(&d, now)
			older, err := agentGrants(tx.Tx, &g, now, nil)
			if err != nil {
				return err
			}
			for i := range older {
				g.CarryOver(&older[i], d.Scopes)
			}
			if err := putGrant(tx.Tx, &g); err != nil {
				return err
			}
			if err := replaced(tx, g, older, now); err != nil {
				return err
			}
			return issued(tx.Tx, g, issue, now)
		}
		// Consent was skipped, or a step-up's link made the grant: the
		// User's existing grant, g, covers it.
		covered, err := agentGrants(tx.Tx, &g, now, func(o *oauth.Grant) bool { return g.Covers(o.Scopes) })
		if err != nil {
			return err
		}
		if err := replaced(tx, g, covered, now); err != nil {
			return err
		}
		return issued(tx.Tx, g, issue, now)
	})
	if err == nil && answer != nil {
		err = answer
	}
	return g, err
}

// reopen withdraws the approval of d, stored at key, made without
// consent for a grant that has since ended (oauth.DeviceAuthorization.
// Reopen): d is pending again, counted among the agent's pending ones,
// and the answer to the poll is authorization_pending, so that the User
// who opens the link again is asked. The code's life is unchanged. A
// step-up's approval is not reopened: the answer is nil and nothing is
// written.
func reopen(tx *bolt.Tx, d *oauth.DeviceAuthorization, key []byte, now time.Time) (*oauth.Error, error) {
	if err := d.Reopen(now); err != nil {
		return nil, nil
	}
	d.LastPoll = now
	if err := put(tx, bDevices, key, *d); err != nil {
		return nil, err
	}
	if err := indexPending(tx, d, key); err != nil {
		return nil, err
	}
	return oauth.NewError(oauth.AuthorizationPending, "the grant that allowed this request has ended; the user is asked again"), nil
}

// restsOn reports whether every active grant the redemption of d rests
// on (the grant it was approved with, the User's other grants of the same
// personal agent and agent sub, which it carries or replaces) is among
// checked, the grants the caller applied the ledger's revocations to.
func restsOn(tx *bolt.Tx, d *oauth.DeviceAuthorization, checked []string, now time.Time) (bool, error) {
	gs, err := agentGrants(tx, &oauth.Grant{Brand: d.Brand, Client: d.Client, AgentSub: d.Sub, User: d.User}, now, nil)
	if err != nil {
		return false, err
	}
	for _, g := range gs {
		if !slices.Contains(checked, g.ID) {
			return false, nil
		}
	}
	return true, nil
}

// DeviceCodeGrants returns, without spending the device code of client at
// brand asked under its User sub, the grants its redemption rests on: the existing grant it
// redeems (consent was skipped, or a step-up's approval made the grant),
// and the User's other active grants of the same personal agent for the
// same agent sub (oauth.Grant.SameAgent), whose scopes a new grant
// carries and which the redemption replaces. The caller applies the
// ledger's revocations to each before RedeemDeviceCode, so that a grant
// the ledger records revoked is neither carried nor replaced. None when
// the code is unknown, another's, or not approved.
func (s *Store) DeviceCodeGrants(deviceCode, brand, client, sub string, now time.Time) ([]oauth.Grant, error) {
	var out []oauth.Grant
	err := s.view(func(tx *bolt.Tx) error {
		var d oauth.DeviceAuthorization
		ok, err := get(tx, bDevices, hash(deviceCode), &d)
		if err != nil || !ok || !d.IssuedTo(brand, client, sub) {
			return err
		}
		var g oauth.Grant
		switch {
		case d.GrantID != "":
			found, err := get(tx, bGrants, []byte(d.GrantID), &g)
			if err != nil || !found {
				return err
			}
			out = append(out, g)
		case d.StateAt(now) == oauth.Approved:
			g = oauth.Grant{Brand: d.Brand, Client: d.Client, AgentSub: d.Sub, User: d.User}
		default:
			return nil
		}
		older, err := agentGrants(tx, &g, now, nil)
		out = append(out, older...)
		return err
	})
	return out, err
}

// pendingDevice finds the device authorization of a user code at brand,
// and its key.
func pendingDevice(tx *bolt.Tx, brand, userCode string) (oauth.DeviceAuthorization, []byte, error) {
	var d oauth.DeviceAuthorization
	key := tx.Bucket(bUserCodes).Get([]byte(oauth.NormalUserCode(userCode)))
	if key == nil {
		return d, nil, fmt.Errorf("user code: %w", ErrNotFound)
	}
	key = slices.Clone(key)
	found, err := get(tx, bDevices, key, &d)
	if err != nil {
		return d, nil, err
	}
	if !found || (brand != "" && d.Brand != brand) {
		return d, nil, fmt.Errorf("user code: %w", ErrNotFound)
	}
	return d, key, nil
}

// StepUpExtends returns, without deciding it, the grant whose scopes an
// approval of the step-up device authorization of userCode at brand (""
// for any) would carry (oauth.DeviceAuthorization.Extends); found is
// false when there is none: the code is unknown, not a pending step-up,
// or extends no active grant. The caller applies the ledger's revocation
// to it before the approval, so that a grant the ledger records revoked
// is not carried.
func (s *Store) StepUpExtends(brand, userCode string, now time.Time) (g oauth.Grant, found bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		g, found, err = stepUpExtends(tx, brand, userCode, now)
		return err
	})
	return g, found, err
}

// TicketStepUpExtends is StepUpExtends for the device authorization of the
// consent form ticket at brand, posted with the browser's cookie; found
// is false too for a ticket that DecideByTicket would refuse.
func (s *Store) TicketStepUpExtends(brand, ticket, cookie string, now time.Time) (g oauth.Grant, found bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		var t consentTicket
		ok, err := get(tx, bTickets, hash(ticket), &t)
		if err != nil || !ok || t.Brand != brand || !t.admits(cookie, now) {
			return err
		}
		g, found, err = stepUpExtends(tx, brand, t.UserCode, now)
		return err
	})
	return g, found, err
}

// stepUpExtends is StepUpExtends in tx.
func stepUpExtends(tx *bolt.Tx, brand, userCode string, now time.Time) (oauth.Grant, bool, error) {
	var g oauth.Grant
	d, _, err := pendingDevice(tx, brand, userCode)
	if errors.Is(err, ErrNotFound) {
		return g, false, nil
	}
	if err != nil || !d.StepUp || d.GrantID != "" || d.Extends == "" || d.StateAt(now) != oauth.Pending {
		return g, false, err
	}
	found, err := get(tx, bGrants, []byte(d.Extends), &g)
	if err != nil || !found || !g.Active(now) {
		return g, false, err
	}
	return g, true, nil
}

// Decided is what DecideDevice and DecideByTicket recorded.
type Decided struct {
	// Brand is the brand of the device authorization decided.
	Brand string
	// Dropped: a denial was recorded (the device authorization is denied)
	// but its refusal was not queued for the ledger, for want of room in
	// the denied consents' share of the outbox (LimitDeniedConsents) or in
	// the outbox (LimitOutbox).
	Dropped bool
}

// decide applies dc to the device authorization of userCode in tx; a
// denial is queued for the ledger as a refusal, within the denied
// consents' share of the outbox: past it the denial is recorded all the
// same, and reported dropped.
func decide(tx *txn, brand, userCode string, dc oauth.Decision, now time.Time) (Decided, error) {
	d, key, err := pendingDevice(tx.Tx, brand, userCode)
	if err != nil {
		return Decided{}, err
	}
	if err := d.Decide(dc, now); err != nil {
		return Decided{}, err
	}
	jwt := d.RequestJWT // evidence for the refusal of a denial; not kept
	if err := settled(tx.Tx, &d, key); err != nil {
		return Decided{}, err
	}
	if dc.Approve && d.GrantID != "" && !d.StepUp {
		// Consent was skipped for an existing grant: should it end before
		// the agent redeems the code, the User is asked again
		// (RedeemDeviceCode), and may deny. Kept until the code is
		// redeemed or expires.
		d.RequestJWT = jwt
	}
	if dc.Approve && d.StepUp && d.GrantID == "" {
		// No agent polls a step-up's device code: its approval is the
		// grant, found by the agent's own request for these scopes. The
		// caller has applied the ledger's revocation to the grant it
		// extends (StepUpExtends): a grant the ledger records revoked is
		// no longer active here, and is not carried.
		g := oauth.NewGrant(&d, now)
		var prev oauth.Grant
		if d.Extends != "" {
			found, err := get(tx.Tx, bGrants, []byte(d.Extends), &prev)
			if err != nil {
				return Decided{}, err
			}
			if found && prev.Active(now) && prev.Brand == d.Brand && prev.Client == d.Client && prev.AgentSub == d.Sub && prev.User == d.User {
				g.Carry(&prev) // revoked with it (RevokeGrant)
			}
		}
		if err := putGrant(tx.Tx, &g); err != nil {
			return Decided{}, err
		}
		d.GrantID = g.ID
	}
	if err := put(tx.Tx, bDevices, key, d); err != nil {
		return Decided{}, err
	}
	if dc.Approve {
		return Decided{Brand: d.Brand}, nil
	}
	owner := []byte(d.Brand + "\x00" + dc.User)
	queued, err := tx.enqueueShared(denialShare, pipeline.DeniedConsent(dc.User, d.Client, jwt, d.Brand, d.Scopes, d.RequestedAt(), now), owner, DeniedConsentsPerUser)
	return Decided{Brand: d.Brand, Dropped: !queued}, err
}

// DeniedConsentsPerUser bounds the refusals of denied consents one Brand
// user may have waiting in the outbox: one customer signed in once, who
// denies one consent after another while the ledger is away, does not
// fill the denied consents' share for every other customer. Past it a
// denial is recorded all the same (the device authorization is denied)
// and reported dropped. Ten is far above what a person denies while the
// ledger is down for minutes.
const DeniedConsentsPerUser = 10

// DecideDevice records the User's decision on the device authorization of
// userCode (at any brand): approve with the scopes they kept, or deny,
// which is also queued for the ledger as a refusal while the denied
// consents' share of the outbox has room (Decided.Dropped when not).
// Errors: ErrNotFound for an unknown code, an *oauth.TransitionError when
// it was already answered or has expired, oauth.ErrNotRequested or
// oauth.ErrNothingApproved.
func (s *Store) DecideDevice(userCode string, dc oauth.Decision, now time.Time) (Decided, error) {
	var out Decided
	err := s.update(func(tx *txn) error {
		var err error
		out, err = decide(tx, "", userCode, dc, now)
		return err
	})
	if err != nil {
		return Decided{}, err
	}
	return out, nil
}

// Grant returns the grant id.
func (s *Store) Grant(id string) (oauth.Grant, error) {
	var g oauth.Grant
	err := s.view(func(tx *bolt.Tx) error {
		found, err := get(tx, bGrants, []byte(id), &g)
		if err == nil && !found {
			err = fmt.Errorf("grant: %w", ErrNotFound)
		}
		return err
	})
	return g, err
}

// Issue makes the tokens that answer a token request for grant g, once
// the store has checked the request and before it commits what the
// request spends: it signs the delegation token and returns the secret of
// a new refresh token of g, which the store keeps in the same
// transaction. An error leaves the store as it was, so that the agent's
// retry is answered as this request would have been. It runs inside the
// store's write transaction and must not call the store.
type Issue func(g oauth.Grant) (refreshToken string, err error)

// IssueRefreshToken stores a new refresh token of g at now, kept until g
// ends (GrantKept). It first carries out some of what is due at now for
// conversations, the action log, grants and refresh tokens (pruneKept).
func (s *Store) IssueRefreshToken(token string, g oauth.Grant, now time.Time) error {
	return s.update(func(tx *txn) error {
		_, err := storeRefreshToken(tx.Tx, token, g, now)
		return err
	})
}

// issued stores in tx the refresh token issue makes for g at now.
func issued(tx *bolt.Tx, g oauth.Grant, issue Issue, now time.Time) error {
	rt, err := issue(g)
	if err != nil {
		return err
	}
	_, err = storeRefreshToken(tx, rt, g, now)
	return err
}

// storeRefreshToken is IssueRefreshToken in tx; it returns the token's
// key.
func storeRefreshToken(tx *bolt.Tx, token string, g oauth.Grant, now time.Time) ([]byte, error) {
	if _, err := pruneKept(tx, now); err != nil {
		return nil, err
	}
	key := hash(token)
	if err := put(tx, bRefresh, key, oauth.RefreshToken{Grant: g.ID, Expires: g.Expires}); err != nil {
		return nil, err
	}
	if err := tx.Bucket(bRefreshByGrant).Put(refreshByGrantKey(g.ID, key), nil); err != nil {
		return nil, err
	}
	var cur oauth.Grant
	if found, err := get(tx, bGrants, []byte(g.ID), &cur); err != nil || !found || !cur.Active(now) {
		// The grant ended since the token was asked for (or is
		// gone): its tokens are due now.
		return key, keepDue(tx, now, dueTokens, []byte(g.ID))
	}
	return key, nil
}

// RefreshTokenGrant returns the grant of a refresh token of client at
// brand for its User sub, without spending the token; found is false when
// the token is unknown or another's (oauth.Grant.HeldBy).
func (s *Store) RefreshTokenGrant(token, brand, client, sub string) (g oauth.Grant, found bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		var t oauth.RefreshToken
		ok, err := get(tx, bRefresh, hash(token), &t)
		if err != nil || !ok {
			return err
		}
		if ok, err = get(tx, bGrants, []byte(t.Grant), &g); err != nil || !ok {
			return err
		}
		found = g.HeldBy(brand, client, sub)
		return nil
	})
	return g, found, err
}

// RotateRefreshToken spends a refresh token of client at brand under its
// User sub and returns its grant, with the refresh token issue made for it
// stored in the same transaction: the token is spent only with its
// successor kept, and an error of issue leaves it unspent. A token
// presented again revokes the grant (kept, and queued for the ledger) and
// answers invalid_grant, but for its holder's retry within
// oauth.RefreshGrace of its spending while its successor is unspent: that
// successor is retired and issue's takes its place. Unknown, revoked and
// expired tokens answer invalid_grant too (*oauth.Error).
func (s *Store) RotateRefreshToken(token, brand, client, sub string, now time.Time, issue Issue) (oauth.Grant, error) {
	var g oauth.Grant
	var answer *oauth.Error // an answer whose revocation must commit
	err := s.update(func(tx *txn) error {
		now := tx.revokeAt(now)
		key := hash(token)
		var t oauth.RefreshToken
		if found, err := get(tx.Tx, bRefresh, key, &t); err != nil || !found {
			return cmp.Or(err, error(oauth.NewError(oauth.InvalidGrant, "unknown refresh_token")))
		}
		if found, err := get(tx.Tx, bGrants, []byte(t.Grant), &g); err != nil || !found {
			return cmp.Or(err, error(oauth.NewError(oauth.InvalidGrant, "unknown grant")))
		}
		var next *oauth.RefreshToken
		nextKey, err := hex.DecodeString(t.Next)
		if err != nil {
			return fmt.Errorf("refresh token of grant %s: successor key: %w", g.ID, err)
		}
		if len(nextKey) > 0 {
			next = new(oauth.RefreshToken)
			if found, err := get(tx.Tx, bRefresh, nextKey, next); err != nil {
				return err
			} else if !found {
				next = nil
			}
		}
		rot, rerr := g.Refresh(&t, next, brand, client, sub, now)
		switch rot {
		case oauth.Leaked:
			answer = rerr
			const why = "a used refresh token was presented again; the Provider revoked the grant"
			if err := revoked(tx, g, why, now); err != nil {
				return err
			}
			return revokeExtensions(tx, g, why, now)
		case oauth.Refused:
			return rerr
		case oauth.Retried:
			next.Retire()
			if err := put(tx.Tx, bRefresh, nextKey, *next); err != nil {
				return err
			}
		}
		rt, err := issue(g)
		if err != nil {
			return err
		}
		succ, err := storeRefreshToken(tx.Tx, rt, g, now)
		if err != nil {
			return err
		}
		t.Next = hex.EncodeToString(succ)
		return put(tx.Tx, bRefresh, key, t)
	})
	if err == nil && answer != nil {
		err = answer
	}
	return g, err
}

// agentGrants lists, newest first, the active grants at now other than g
// of g's Brand user to g's personal agent for g's agent sub
// (oauth.Grant.SameAgent) for which keep, when given, holds.
func agentGrants(tx *bolt.Tx, g *oauth.Grant, now time.Time, keep func(*oauth.Grant) bool) ([]oauth.Grant, error) {
	gs, err := userGrants(tx, g.Brand, g.User)
	if err != nil {
		return nil, err
	}
	var out []oauth.Grant
	for i := range gs {
		o := &gs[i]
		if o.ID != g.ID && g.SameAgent(o) && o.Active(now) && (keep == nil || keep(o)) {
			out = append(out, *o)
		}
	}
	return out, nil
}

// replaced revokes each of older, replaced by g (oauth.Grant.Replace),
// and queues each revocation for the ledger naming g.
func replaced(tx *txn, g oauth.Grant, older []oauth.Grant, now time.Time) error {
	now = tx.revokeAt(now)
	for _, o := range older {
		if !o.Replace(g.ID, now) {
			continue
		}
		if err := revoked(tx, o, "replaced by grant "+g.ID+", a newer grant of the same personal agent for the same user", now); err != nil {
			return err
		}
	}
	return nil
}

// userGrants lists a Brand user's grants in tx, newest first.
func userGrants(tx *bolt.Tx, brand, user string) ([]oauth.Grant, error) {
	var out []oauth.Grant
	err := tx.Bucket(bGrants).ForEach(func(k, v []byte) error {
		var g oauth.Grant
		if _, err := get(tx, bGrants, k, &g); err != nil {
			return err
		}
		if g.Brand == brand && g.User == user {
			out = append(out, g)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b oauth.Grant) int { return b.Created.Compare(a.Created) })
	return out, err
}

// UserGrants lists a Brand user's grants, newest first.
func (s *Store) UserGrants(brand, user string) ([]oauth.Grant, error) {
	var out []oauth.Grant
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		out, err = userGrants(tx, brand, user)
		return err
	})
	return out, err
}

// RevokeGrant revokes user's grant id at brand (its delegation and refresh
// tokens stop working) and queues the revocation for the ledger with note;
// so it does each grant that carries its scopes (Grant.Extends) and every
// other active grant of the user to the same personal agent for the same
// agent sub, or for a sub either grant did not record: revoking a grant
// stops its agent, whichever of the agent's grants the User revokes.
// ErrNotFound: no such grant of that user.
func (s *Store) RevokeGrant(brand, user, id, note string, now time.Time) error {
	return s.update(func(tx *txn) error {
		now := tx.revokeAt(now)
		var g oauth.Grant
		found, err := get(tx.Tx, bGrants, []byte(id), &g)
		if err != nil {
			return err
		}
		if !found || g.Brand != brand || g.User != user {
			return fmt.Errorf("grant of %s: %w", user, ErrNotFound)
		}
		if g.Revoke(now) {
			if err := revoked(tx, g, note, now); err != nil {
				return err
			}
		}
		return revokeAgent(tx, g, note, now)
	})
}

// RevokeRecorded applies a revocation of grant id that the ledger records
// as of at (no later than now) to the Provider's own state: the grant is
// marked revoked at at, so its delegation and refresh tokens stop working,
// without queuing its revocation (the ledger holds it), and with it, as
// RevokeGrant does, each grant that carries its scopes and every other
// active grant of the same personal agent for the same user, each revoked
// now and its revocation queued for the ledger with note. A grant already
// ended is left as it is. It returns the grant as it now stands.
// ErrNotFound: no such grant.
func (s *Store) RevokeRecorded(id string, at time.Time, note string, now time.Time) (oauth.Grant, error) {
	return s.revokeActive(id, now, func(tx *txn, g *oauth.Grant, now time.Time) error {
		if !g.Revoke(at) {
			return nil
		}
		if err := putGrant(tx.Tx, g); err != nil {
			return err
		}
		return revokeAgent(tx, *g, note, now)
	})
}

// RevokeCarried applies to grant id a revocation the ledger records of
// a grant whose scopes it carries (oauth.Grant.Carried),
// as a User's revocation of that grant does (RevokeGrant): id is revoked
// now and its revocation queued for the ledger with note, and with it
// the grants that carry its scopes and every other active grant of the
// same personal agent for the same user. A grant already ended is left
// as it is. It returns the grant as it now stands. ErrNotFound: no such
// grant.
func (s *Store) RevokeCarried(id, note string, now time.Time) (oauth.Grant, error) {
	return s.revokeActive(id, now, func(tx *txn, g *oauth.Grant, now time.Time) error {
		if !g.Revoke(now) {
			return nil
		}
		if err := revoked(tx, *g, note, now); err != nil {
			return err
		}
		return revokeAgent(tx, *g, note, now)
	})
}

// revokeActive runs revoke on grant id, when it is active at now (the
// time the Provider's revocations are dated, txn.revokeAt), in one write
// transaction, and returns the grant as it then stands. ErrNotFound: no
// such grant.
func (s *Store) revokeActive(id string, now time.Time, revoke func(tx *txn, g *oauth.Grant, now time.Time) error) (oauth.Grant, error) {
	var g oauth.Grant
	err := s.update(func(tx *txn) error {
		now := tx.revokeAt(now)
		found, err := get(tx.Tx, bGrants, []byte(id), &g)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("grant: %w", ErrNotFound)
		}
		if !g.Active(now) {
			return nil
		}
		return revoke(tx, &g, now)
	})
	return g, err
}

// revokeAgent revokes, with g, the grants that carry its scopes and every
// other active grant of the same user to the same personal agent for the
// same agent sub, or for a sub either grant did not record, each
// revocation queued for the ledger with note.
func revokeAgent(tx *txn, g oauth.Grant, note string, now time.Time) error {
	if err := revokeExtensions(tx, g, note, now); err != nil {
		return err
	}
	gs, err := userGrants(tx.Tx, g.Brand, g.User)
	if err != nil {
		return err
	}
	for _, o := range gs {
		if o.ID == g.ID || o.Client != g.Client || (o.AgentSub != g.AgentSub && o.AgentSub != "" && g.AgentSub != "") || !o.Active(now) {
			continue
		}
		o.Revoke(now)
		if err := revoked(tx, o, note+"; with grant "+g.ID+", of the same personal agent for the same user", now); err != nil {
			return err
		}
	}
	return nil
}

// revokeExtensions revokes, with g, the grants that carry its scopes
// (oauth.Grant.Extends) and theirs, each revocation queued for the ledger
// with note.
func revokeExtensions(tx *txn, g oauth.Grant, note string, now time.Time) error {
	gs, err := userGrants(tx.Tx, g.Brand, g.User)
	if err != nil {
		return err
	}
	for todo := []string{g.ID}; len(todo) > 0; todo = todo[1:] {
		for _, e := range gs {
			if e.Extends != todo[0] {
				continue
			}
			todo = append(todo, e.ID)
			if !e.Revoke(now) {
				continue
			}
			if err := revoked(tx, e, note+"; with grant "+g.ID+", whose scopes it carried", now); err != nil {
				return err
			}
		}
	}
	return nil
}

// revoked stores grant g, just revoked, and queues its revocation for the
// ledger with note.
func revoked(tx *txn, g oauth.Grant, note string, now time.Time) error {
	if err := putGrant(tx.Tx, &g); err != nil {
		return err
	}
	return tx.enqueue(pipeline.Revoked(g.ID, now, note))
}
