package oauth

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)

// at is a device authorization in state s (Expired: pending, past its
// code's life), asked at t0 for two scopes.
func at(s State) *DeviceAuthorization {
	d := NewDeviceAuthorization("acme", "https://pa.example", "u1", "p.a.j", []string{"orders:read", "orders:cancel"}, PollInterval, t0)
	switch s {
	case Expired:
		d.Expires = t0.Add(-time.Second)
	default:
		d.Status = s
	}
	return &d
}

// Every event in every state: the legal transitions move the
// authorization, the illegal ones leave it as it was with a
// TransitionError naming the event and the state.
func TestDeviceAuthorizationTransitions(t *testing.T) {
	events := map[Event]func(d *DeviceAuthorization) error{
		EventApprove: func(d *DeviceAuthorization) error { return d.Approve("acct-1", []string{"orders:read"}, "", t0) },
		EventDeny:    func(d *DeviceAuthorization) error { return d.Deny("acct-1", t0) },
		EventRedeem:  func(d *DeviceAuthorization) error { return d.Redeem(t0) },
		EventReopen:  func(d *DeviceAuthorization) error { d.GrantID = "g1"; return d.Reopen(t0) },
	}
	want := map[State]map[Event]State{ // the state entered; absent: illegal
		Pending:  {EventApprove: Approved, EventDeny: Denied},
		Approved: {EventRedeem: Redeemed, EventReopen: Pending},
		Denied:   {},
		Expired:  {},
		Redeemed: {},
	}
	for from, legal := range want {
		for ev, fire := range events {
			t.Run(string(from)+"/"+string(ev), func(t *testing.T) {
				d := at(from)
				before := *d
				err := fire(d)
				to, ok := legal[ev]
				if ok {
					if err != nil || d.StateAt(t0) != to {
						t.Fatalf("%s from %s: %v, now %s; want %s", ev, from, err, d.StateAt(t0), to)
					}
					return
				}
				var te *TransitionError
				if !errors.As(err, &te) || !errors.Is(err, ErrTransition) || te.Event != ev || te.From != from {
					t.Fatalf("%s from %s: %v, want a TransitionError", ev, from, err)
				}
				if d.Status != before.Status || d.User != before.User || len(d.Granted) != 0 {
					t.Fatalf("an illegal %s changed the authorization: %+v", ev, d)
				}
			})
		}
	}
}

// An approval keeps a non-empty subset of the requested scopes, without
// repeats; anything else is refused and changes nothing.
func TestApproveChecksTheScopes(t *testing.T) {
	tests := []struct {
		name   string
		scopes []string
		want   error
		kept   []string
	}{
		{"subset", []string{"orders:cancel"}, nil, []string{"orders:cancel"}},
		{"repeated", []string{"orders:read", "orders:read"}, nil, []string{"orders:read"}},
		{"none", nil, ErrNothingApproved, nil},
		{"not requested", []string{"orders:read", "refunds:issue"}, ErrNotRequested, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := at(Pending)
			err := d.Approve("acct-1", tc.scopes, "", t0)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				if d.Status != Pending {
					t.Fatalf("a refused approval moved to %s", d.Status)
				}
				return
			}
			if d.Status != Approved || d.User != "acct-1" || len(d.Granted) != len(tc.kept) || d.Granted[0] != tc.kept[0] || !d.DecidedAt.Equal(t0) {
				t.Fatalf("approved %+v", d)
			}
		})
	}
}

// Polling answers by state (RFC 8628 §3.5); a pending authorization
// counts its polls and slows a client that polls too often.
func TestPoll(t *testing.T) {
	for s, want := range map[State]string{Approved: "", Denied: AccessDenied, Expired: ExpiredToken, Redeemed: InvalidGrant} {
		got := ""
		if err := at(s).Poll(t0); err != nil {
			got = err.Code
		}
		if got != want {
			t.Errorf("poll when %s: %q, want %q", s, got, want)
		}
	}
	d := at(Pending)
	polls := []struct {
		after    time.Duration
		want     string
		interval int
	}{
		{0, AuthorizationPending, 5},
		{time.Second, SlowDown, 10},
		{11 * time.Second, AuthorizationPending, 10},
		{15 * time.Second, SlowDown, 15},
		{31 * time.Second, AuthorizationPending, 15},
	}
	for _, p := range polls {
		err := d.Poll(t0.Add(p.after))
		if err == nil || err.Code != p.want || d.Interval != p.interval {
			t.Fatalf("poll at +%s: %v, interval %d; want %s, %d", p.after, err, d.Interval, p.want, p.interval)
		}
	}
	if d.Poll(t0.Add(DeviceCodeTTL+time.Second)).Code != ExpiredToken {
		t.Fatal("a pending authorization past its code's life is not expired")
	}
}

// An approved authorization expires too if it is not redeemed in time.
func TestApprovedExpires(t *testing.T) {
	d := at(Pending)
	if err := d.Approve("acct-1", []string{"orders:read"}, "", t0); err != nil {
		t.Fatal(err)
	}
	late := t0.Add(DeviceCodeTTL + time.Second)
	if d.StateAt(late) != Expired {
		t.Fatalf("state %s", d.StateAt(late))
	}
	if err := d.Redeem(late); !errors.Is(err, ErrTransition) {
		t.Fatalf("redeem after expiry: %v", err)
	}
}

// A refresh token is spent once; a second use revokes the grant, but for
// its holder's within RefreshGrace of its spending while its successor is
// unspent, a retry after a lost answer. Another client's, or the agent's
// under another sub than the grant's, is refused and neither spends it
// nor revokes the grant.
func TestRefresh(t *testing.T) {
	g := Grant{ID: "g", Brand: "acme", Client: "pa", AgentSub: "u1", Created: t0, Expires: t0.Add(GrantTTL)}
	rt := RefreshToken{Grant: "g", Expires: g.Expires}
	if rot, err := g.Refresh(&rt, nil, "acme", "other", "u1", t0); rot != Refused || err == nil || err.Code != InvalidGrant || rt.Used {
		t.Fatalf("another client: %v %v", rot, err)
	}
	if rot, err := g.Refresh(&rt, nil, "acme", "pa", "u2", t0); rot != Refused || err == nil || err.Code != InvalidGrant || rt.Used {
		t.Fatalf("another sub: %v %v", rot, err)
	}
	if rot, err := g.Refresh(&rt, nil, "acme", "pa", "u1", t0); rot != Rotated || err != nil || !rt.Used || !rt.Spent.Equal(t0) {
		t.Fatalf("first use: %v %v", rot, err)
	}
	next := RefreshToken{Grant: "g", Expires: g.Expires}
	if rot, err := g.Refresh(&rt, &next, "acme", "pa", "u2", t0); rot != Refused || err == nil || !g.Revoked.IsZero() {
		t.Fatalf("another sub within the grace: %v %v", rot, err)
	}
	if rot, err := g.Refresh(&rt, &next, "acme", "pa", "u1", t0.Add(RefreshGrace)); rot != Retried || err != nil || !g.Revoked.IsZero() {
		t.Fatalf("its holder within the grace: %v %v", rot, err)
	}
	next.Retire()
	if rot, err := g.Refresh(&rt, &next, "acme", "pa", "u1", t0.Add(RefreshGrace)); rot != Leaked || err == nil || g.Revoked.IsZero() {
		t.Fatalf("reuse once its successor is spent: %v %v", rot, err)
	}
	if g.Active(t0) {
		t.Fatal("a revoked grant is active")
	}
	fresh := RefreshToken{Grant: "g", Expires: g.Expires}
	if rot, err := g.Refresh(&fresh, nil, "acme", "pa", "u1", t0); rot != Refused || err == nil {
		t.Fatalf("a token of a revoked grant: %v %v", rot, err)
	}

	g = Grant{ID: "g", Brand: "acme", Client: "pa", AgentSub: "u1", Created: t0, Expires: t0.Add(GrantTTL)}
	rt = RefreshToken{Grant: "g", Expires: g.Expires}
	next = RefreshToken{Grant: "g", Expires: g.Expires}
	g.Refresh(&rt, nil, "acme", "pa", "u1", t0)
	if rot, err := g.Refresh(&rt, &next, "acme", "pa", "u1", t0.Add(RefreshGrace+time.Second)); rot != Leaked || err == nil || g.Revoked.IsZero() {
		t.Fatalf("reuse past the grace: %v %v", rot, err)
	}
}

// A device authorization says when it was asked for; one stored before it
// kept that says so by its code's life.
func TestRequestedAt(t *testing.T) {
	d := NewDeviceAuthorization("acme", "https://pa.example", "u1", "p.a.j", []string{"orders:read"}, PollInterval, t0)
	if got := d.RequestedAt(); !got.Equal(t0) {
		t.Fatalf("requested at %s, want %s", got, t0)
	}
	d.Requested = time.Time{}
	if got := d.RequestedAt(); !got.Equal(t0) {
		t.Fatalf("stored without its time: requested at %s, want %s from its expiry", got, t0)
	}
}

// Only an approval made without consent, for an existing grant that
// covered the request, is reopened, and reopened it holds nothing of the
// approval: a step-up's approval made its grant, and one the User gave
// on the consent form is theirs.
func TestReopen(t *testing.T) {
	tests := []struct {
		name    string
		grantID string
		stepUp  bool
		want    State
	}{
		{name: "consent skipped", grantID: "g1", want: Pending},
		{name: "consent given", want: Approved},
		{name: "step-up", grantID: "g1", stepUp: true, want: Approved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := at(Pending)
			d.StepUp = tt.stepUp
			if err := d.Approve("acct-1", []string{"orders:read"}, tt.grantID, t0); err != nil {
				t.Fatal(err)
			}
			err := d.Reopen(t0.Add(time.Second))
			if got := d.StateAt(t0); got != tt.want {
				t.Fatalf("reopened: %s (%v), want %s", got, err, tt.want)
			}
			if tt.want == Approved {
				if !errors.Is(err, ErrTransition) {
					t.Fatalf("reopen: %v, want a TransitionError", err)
				}
				return
			}
			if err != nil || d.User != "" || d.Granted != nil || d.GrantID != "" || !d.DecidedAt.IsZero() {
				t.Fatalf("reopened: %v %+v, want nothing of the approval kept", err, d)
			}
		})
	}
}
