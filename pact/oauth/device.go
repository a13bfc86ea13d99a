// Package oauth is the Delegated profile's authorization server state
// (PACT §5.1, §5.3, §5.4): the device authorization of RFC 8628 as a state
// machine with typed states and explicit transitions, the grants a User
// approves with their rotating refresh tokens, the delegation token's
// claims, and the OAuth errors of RFC 6749 §5.2. It is pure: no storage,
// no HTTP; the store persists its values and the Provider serves them.
package oauth

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Lifetimes of the Delegated profile.
const (
	// DeviceCodeTTL is how long a device authorization can be answered
	// and redeemed (RFC 8628 §3.2 expires_in).
	DeviceCodeTTL = 10 * time.Minute
	// DeviceCodeKept is how long a device authorization is kept once its
	// code has expired, answered or not: a poll within it is answered as
	// RFC 8628 §3.5 has it (expired_token; access_denied or invalid_grant
	// for a code denied or redeemed), and a User opening the link is told
	// it expired. Then the authorization and its user code are deleted,
	// and the code is unknown (invalid_grant).
	DeviceCodeKept = 10 * time.Minute
	// MaxPending is how many device authorizations a personal agent may
	// have pending for one of its users (its sub) at once, at all brands;
	// step-ups, which the Provider asks for itself, are not counted.
	MaxPending = 10
	// MaxPendingPerAgent is how many device authorizations a personal
	// agent may have pending at once for all its users together, at all
	// brands; step-ups are not counted. A sub is whatever the agent
	// signs, so MaxPending alone does not bound one agent. An honest
	// agent fronting many users of a brand has one pending per user who
	// is signing in, each answered within a minute or two (ten at most):
	// 5,000 at once is thousands of sign-ins a minute, well past what
	// such an agent sees, while an agent asking in a loop holds a
	// bounded share of the Provider's file.
	//
	// With provider.openAgents, every issuer that serves discovery is an
	// agent of its own, with bounds of its own: the bounds per agent do
	// not bound what many issuers together hold. MaxPendingOpenPerBrand
	// and MaxPendingOpenBytesPerBrand do.
	MaxPendingPerAgent = 5000
	// MaxPendingBytesPerAgent bounds the request JWTs (up to 16 KiB
	// each) that a personal agent's pending device authorizations keep,
	// for all its users together. A personal agent's JWT is some 1 KiB:
	// MaxPendingPerAgent of them keep about 5 MiB, so an honest agent
	// meets the count first; one padding its JWTs holds 16 MiB at most.
	MaxPendingBytesPerAgent = 16 << 20
	// MaxPendingOpenPerBrand is how many device authorizations the
	// personal agents no one registered (taken under
	// provider.openAgents) may have pending at one brand, together.
	// Anyone who serves discovery from a host name of their own is such
	// an agent, and host names cost nothing, so the bounds per agent do
	// not bound them all; the brands are the Provider's configuration,
	// so a bound per brand does. Registered agents are not counted, and
	// not refused for it: a flood from open agents leaves their sign-ins
	// as they are.
	MaxPendingOpenPerBrand = 20000
	// MaxPendingOpenBytesPerBrand bounds the request JWTs that the open
	// agents' pending device authorizations keep at one brand, together.
	MaxPendingOpenBytesPerBrand = 64 << 20
	// PollInterval is the default least time between token polls
	// (RFC 8628 §3.5).
	PollInterval = 5 * time.Second
	// AccessTokenTTL is a delegation token's lifetime (PACT §5.4: SHOULD
	// be at most 1 h).
	AccessTokenTTL = time.Hour
	// GrantTTL is how long a grant and its refresh tokens live.
	GrantTTL = 90 * 24 * time.Hour
	// DeviceGrantType is the device code grant type (RFC 8628 §3.4).
	DeviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"
)

// State is where a device authorization is in its life.
type State string

// The states of a device authorization. Pending, Approved, Denied and
// Redeemed are stored; Expired is reached by time from Pending or Approved
// (StateAt).
const (
	// Pending: asked, not yet answered by the User (or an approval made
	// without consent withdrawn, Reopen).
	Pending State = "pending"
	// Approved: the User approved some or all of the scopes; the device
	// code can be redeemed once.
	Approved State = "approved"
	// Denied: the User refused. Final.
	Denied State = "denied"
	// Expired: not answered or not redeemed in time. Final.
	Expired State = "expired"
	// Redeemed: the device code was exchanged for tokens. Final.
	Redeemed State = "redeemed"
)

// Event is what happens to a device authorization.
type Event string

// The events that move a device authorization between states.
const (
	// EventApprove: the User approves (Pending to Approved).
	EventApprove Event = "approve"
	// EventDeny: the User refuses (Pending to Denied).
	EventDeny Event = "deny"
	// EventRedeem: the agent exchanges the device code (Approved to
	// Redeemed).
	EventRedeem Event = "redeem"
	// EventReopen: an approval that rested on an existing grant is
	// withdrawn, that grant having ended before the code was redeemed
	// (Approved to Pending).
	EventReopen Event = "reopen"
)

// transitions is the whole state machine: each event, the one state it may
// leave and the state it enters. Anything else is illegal.
var transitions = map[Event]struct{ from, to State }{
	EventApprove: {Pending, Approved},
	EventDeny:    {Pending, Denied},
	EventRedeem:  {Approved, Redeemed},
	EventReopen:  {Approved, Pending},
}

// Errors of the transitions.
var (
	// ErrTransition: the event is not allowed in the authorization's
	// state (a TransitionError says which).
	ErrTransition = errors.New("illegal device authorization transition")
	// ErrNotRequested: an approval names a scope the agent did not ask for.
	ErrNotRequested = errors.New("was not requested")
	// ErrNothingApproved: an approval keeps none of the scopes.
	ErrNothingApproved = errors.New("approve at least one scope, or deny")
)

// TransitionError is an event refused in the state the authorization was
// in.
type TransitionError struct {
	Event Event
	From  State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s: cannot %s a %s device authorization", ErrTransition, e.Event, e.From)
}

// Unwrap returns ErrTransition.
func (e *TransitionError) Unwrap() error { return ErrTransition }

// DeviceAuthorization is one device authorization request (RFC 8628 §3.1)
// of a personal agent at a Brand, and the User's answer to it.
type DeviceAuthorization struct {
	Brand  string `json:"brand"`
	Client string `json:"client"` // the personal agent's issuer
	Sub    string `json:"sub"`    // the personal agent's sub of the requester
	// Scopes are the scope ids asked for, checked against the card.
	Scopes   []string `json:"scopes"`
	UserCode string   `json:"userCode"`
	// Requested is when the personal agent asked for it; zero for one
	// stored before it was kept (RequestedAt).
	Requested time.Time `json:"requested,omitzero"`
	Expires   time.Time `json:"expires"`
	// Interval is the least number of seconds between polls; slow_down
	// adds 5 (RFC 8628 §3.5).
	Interval int       `json:"interval"`
	LastPoll time.Time `json:"lastPoll,omitzero"`
	// Status is the stored state: Pending, Approved, Denied or Redeemed.
	Status    State     `json:"status"`
	User      string    `json:"user,omitempty"`
	Granted   []string  `json:"granted,omitempty"`
	DecidedAt time.Time `json:"decidedAt,omitzero"`
	// GrantID is the User's existing grant that already covers the
	// request, when consent was skipped for it (PACT §5.3), or the grant
	// a step-up's approval made.
	GrantID string `json:"grantId,omitempty"`
	// StepUp marks an authorization the Provider asked for itself, for
	// the scopes a turn lacked (PACT §5.5): its link is in the step-up
	// task and its device code with no agent. Its approval makes the
	// grant at once, so that the agent, repeating §5.3 for those scopes,
	// finds them allowed.
	StepUp bool `json:"stepUp,omitempty"`
	// Extends is the grant of the delegation token the step-up's turn ran
	// under, if any. Approved by that grant's User, the step-up's grant
	// holds its scopes too, so that an agent asking again for all it
	// needs, held and missing, is covered.
	Extends string `json:"extends,omitempty"`
	// RequestJWT is the personal agent's JWT of the request, kept as
	// evidence for a refusal should the User deny: only while the
	// authorization is pending, dropped once the User decides or the code
	// expires.
	RequestJWT string `json:"requestJwt,omitempty"`
	// Open marks an authorization asked by a personal agent no one
	// registered, taken under provider.openAgents: while pending it is
	// counted among its brand's open agents' (MaxPendingOpenPerBrand).
	Open bool `json:"open,omitempty"`
}

// NewDeviceAuthorization is a pending authorization of client's sub at
// brand for scopes, asked at now, to be polled at most every interval.
func NewDeviceAuthorization(brand, client, sub, requestJWT string, scopes []string, interval time.Duration, now time.Time) DeviceAuthorization {
	return DeviceAuthorization{Brand: brand, Client: client, Sub: sub, RequestJWT: requestJWT, Scopes: scopes,
		Requested: now, Expires: now.Add(DeviceCodeTTL), Interval: int(interval / time.Second), Status: Pending}
}

// RequestedAt is when the personal agent asked for the authorization, the
// time its request JWT was checked at: Requested, or, for one stored
// before that was kept, its code's expiry less DeviceCodeTTL.
func (d *DeviceAuthorization) RequestedAt() time.Time {
	if !d.Requested.IsZero() {
		return d.Requested
	}
	return d.Expires.Add(-DeviceCodeTTL)
}

// StateAt is the authorization's state at now: its stored state, or
// Expired once a pending or approved authorization has outlived its code.
func (d *DeviceAuthorization) StateAt(now time.Time) State {
	if (d.Status == Pending || d.Status == Approved) && now.After(d.Expires) {
		return Expired
	}
	return d.Status
}

// IssuedTo reports whether the authorization was asked by client at brand
// for its User sub: PACT §3.2 makes the agent's User the pair of the agent
// and its sub, so the code is redeemed under the sub it was asked for.
func (d *DeviceAuthorization) IssuedTo(brand, client, sub string) bool {
	return d.Brand == brand && d.Client == client && d.Sub == sub
}

// can checks that ev may fire at now.
func (d *DeviceAuthorization) can(ev Event, now time.Time) error {
	if from := d.StateAt(now); from != transitions[ev].from {
		return &TransitionError{Event: ev, From: from}
	}
	return nil
}

// fire moves the authorization along ev; can has allowed it.
func (d *DeviceAuthorization) fire(ev Event) { d.Status = transitions[ev].to }

// Decision is the User's answer on a device authorization.
type Decision struct {
	// User is the Brand user, authenticated by the Brand's login.
	User    string
	Approve bool
	// Scopes are those the User kept of the ones requested, when
	// approving.
	Scopes []string
	// GrantID is an existing grant that covers the request (consent
	// skipped).
	GrantID string
}

// Decide applies the User's decision: Approve or Deny.
func (d *DeviceAuthorization) Decide(dc Decision, now time.Time) error {
	if dc.Approve {
		return d.Approve(dc.User, dc.Scopes, dc.GrantID, now)
	}
	return d.Deny(dc.User, now)
}

// Approve records that user approved scopes, a non-empty subset of those
// requested; grantID names an existing grant that covers the request when
// consent was skipped. Pending to Approved.
func (d *DeviceAuthorization) Approve(user string, scopes []string, grantID string, now time.Time) error {
	if err := d.can(EventApprove, now); err != nil {
		return err
	}
	for _, s := range scopes {
		if !slices.Contains(d.Scopes, s) {
			return fmt.Errorf("scope %s %w", s, ErrNotRequested)
		}
	}
	if len(scopes) == 0 {
		return ErrNothingApproved
	}
	d.fire(EventApprove)
	d.User, d.Granted, d.GrantID, d.DecidedAt = user, dedupe(scopes), grantID, now
	return nil
}

// Deny records that user refused. Pending to Denied.
func (d *DeviceAuthorization) Deny(user string, now time.Time) error {
	if err := d.can(EventDeny, now); err != nil {
		return err
	}
	d.fire(EventDeny)
	d.User, d.DecidedAt = user, now
	return nil
}

// Poll answers a token request for the device code (RFC 8628 §3.5): nil
// when the authorization is approved and can be redeemed, else the error
// to answer. A poll of a pending authorization is noted, and one sooner
// than the interval allows makes the interval 5 seconds longer
// (slow_down); the caller keeps that bookkeeping even though it answers an
// error.
func (d *DeviceAuthorization) Poll(now time.Time) *Error {
	switch d.StateAt(now) {
	case Approved:
		return nil
	case Expired:
		return NewError(ExpiredToken, "the device_code has expired; start again")
	case Denied:
		return NewError(AccessDenied, "the user denied the request")
	case Redeemed:
		return NewError(InvalidGrant, "the device_code was already redeemed")
	}
	tooSoon := !d.LastPoll.IsZero() && now.Sub(d.LastPoll) < time.Duration(d.Interval)*time.Second
	d.LastPoll = now
	if tooSoon {
		d.Interval += 5
		return NewError(SlowDown, fmt.Sprintf("poll at most every %d seconds", d.Interval))
	}
	return NewError(AuthorizationPending, "the user has not approved yet")
}

// Redeem exchanges the approved device code, once. Approved to Redeemed.
func (d *DeviceAuthorization) Redeem(now time.Time) error {
	if err := d.can(EventRedeem, now); err != nil {
		return err
	}
	d.fire(EventRedeem)
	return nil
}

// Reopen withdraws an approval made without consent for an existing
// grant that covered the request (GrantID; PACT §5.3), when that grant
// has ended (revoked or expired) before the device code was redeemed:
// the authorization is pending again, so that the User is asked rather
// than the code left approved under a grant that no longer holds.
// Approved to Pending, within the code's life. A step-up's approval,
// whose grant it made itself, is not reopened (a TransitionError).
func (d *DeviceAuthorization) Reopen(now time.Time) error {
	if err := d.can(EventReopen, now); err != nil {
		return err
	}
	if d.GrantID == "" || d.StepUp {
		return &TransitionError{Event: EventReopen, From: d.Status}
	}
	d.fire(EventReopen)
	d.User, d.Granted, d.GrantID, d.DecidedAt = "", nil, "", time.Time{}
	return nil
}

// dedupe returns s without repeats, in order.
func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
