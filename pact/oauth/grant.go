package oauth

import (
	"maps"
	"slices"
	"time"
)

// Grant is what a User approved for a personal agent at a Brand: the
// scopes its delegation tokens carry, until it expires or is revoked.
type Grant struct {
	ID     string `json:"id"`
	Brand  string `json:"brand"`
	Client string `json:"client"`
	// AgentSub is the sub the personal agent called the User by when it
	// asked (PACT §3.2: the User is the pair of the agent and its sub).
	// Grants kept before it was recorded have none.
	AgentSub string    `json:"agentSub,omitempty"`
	User     string    `json:"user"`
	Scopes   []string  `json:"scopes"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Revoked  time.Time `json:"revoked,omitzero"`
	// Extends is the grant whose scopes this one carries with those a
	// step-up added (PACT §5.5): it ends no later than that grant, and
	// is revoked with it.
	Extends string `json:"extends,omitempty"`
	// ReplacedBy is the grant that replaced this one (Replace): a newer
	// grant of the same Brand user to the same personal agent for the
	// same agent sub.
	ReplacedBy string `json:"replacedBy,omitempty"`
	// CarriedFrom says, for each scope this grant carries, not renewed
	// (Carry, CarryOver), the grants it came through: the one it was
	// carried from, then the one that one had it from, back to the grant
	// the User allowed it under, MaxCarriedFrom at most. An admin's
	// revocation the ledger records of one of them ends this grant too
	// (brandlogin.LedgerRevoked). A scope the User allowed under this
	// grant, asked again or for the first time, has none. Grants kept
	// before it was recorded have none: the grant they extend is read.
	CarriedFrom map[string][]string `json:"carriedFrom,omitempty"`
}

// MaxCarriedFrom is the most grants Grant.CarriedFrom names for a scope,
// and the most Grant.Carried lists: the nearest.
const MaxCarriedFrom = 16

// carry records in g that it carries scope s of prev: through prev and
// the grants prev had it through.
func (g *Grant) carry(prev *Grant, s string) {
	through := []string{prev.ID}
	if from, ok := prev.CarriedFrom[s]; ok {
		through = append(through, from...)
	} else if prev.CarriedFrom == nil && prev.Extends != "" {
		through = append(through, prev.Extends) // kept before CarriedFrom was
	}
	if g.CarriedFrom == nil {
		g.CarriedFrom = map[string][]string{}
	}
	g.CarriedFrom[s] = slices.Clip(through[:min(len(through), MaxCarriedFrom)])
}

// Carried lists the grants whose scopes g carries (CarriedFrom), nearest
// first: the grant each scope was carried from, then the one that had it
// from another, and so on, MaxCarriedFrom at most; and, for a grant kept
// before CarriedFrom was, the grant it extends.
func (g *Grant) Carried() []string {
	var out []string
	if g.CarriedFrom == nil && g.Extends != "" {
		out = append(out, g.Extends)
	}
	scopes := slices.Sorted(maps.Keys(g.CarriedFrom))
	for depth, more := 0, true; more && len(out) < MaxCarriedFrom; depth++ {
		more = false
		for _, s := range scopes {
			if ids := g.CarriedFrom[s]; depth < len(ids) {
				more = true
				if !slices.Contains(out, ids[depth]) && len(out) < MaxCarriedFrom {
					out = append(out, ids[depth])
				}
			}
		}
	}
	return out
}

// NewGrant is the grant an approved device authorization makes at now.
func NewGrant(d *DeviceAuthorization, now time.Time) Grant {
	return Grant{ID: "a2agrant_" + NewSecret("")[:26], Brand: d.Brand, Client: d.Client, AgentSub: d.Sub, User: d.User, Scopes: d.Granted,
		Created: now, Expires: now.Add(GrantTTL)}
}

// Carry makes g, a step-up's grant (PACT §5.5), hold prev's scopes too:
// carried, not renewed, so g ends no later than prev and names it, to be
// revoked with it.
func (g *Grant) Carry(prev *Grant) {
	for _, sc := range prev.Scopes {
		if !slices.Contains(g.Scopes, sc) {
			g.carry(prev, sc)
		}
	}
	g.Scopes = dedupe(append(slices.Clone(prev.Scopes), g.Scopes...))
	g.Extends = prev.ID
	if prev.Expires.Before(g.Expires) {
		g.Expires = prev.Expires
	}
}

// SameAgent reports whether g and o are grants of one Brand user at one
// Brand to one personal agent for one of the agent's users: PACT §3.2
// makes the agent's User the pair of the agent and its sub, and §5.3
// speaks of "an unexpired grant for (User, personal agent)". A grant that
// recorded no sub (kept before the sub was) is the same agent's as no
// other.
func (g *Grant) SameAgent(o *Grant) bool {
	return g.Brand == o.Brand && g.User == o.User && g.Client == o.Client && g.AgentSub != "" && g.AgentSub == o.AgentSub
}

// CarryOver makes g, a new grant of prev's agent approved for asked, hold
// the scopes of prev the agent did not ask for again: the User allowed
// them before and was not shown them now, so they are carried, not
// renewed, and g ends no later than prev. A scope asked again holds only
// if the User approved it this time.
func (g *Grant) CarryOver(prev *Grant, asked []string) {
	var kept []string
	for _, s := range prev.Scopes {
		if !slices.Contains(asked, s) && !slices.Contains(g.Scopes, s) && !slices.Contains(kept, s) {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		return
	}
	for _, sc := range kept {
		g.carry(prev, sc)
	}
	g.Scopes = append(kept, g.Scopes...)
	if prev.Expires.Before(g.Expires) {
		g.Expires = prev.Expires
	}
}

// Replace revokes g at now as replaced by grant by; it reports whether g
// was active before.
func (g *Grant) Replace(by string, now time.Time) bool {
	if !g.Active(now) || !g.Revoke(now) {
		return false
	}
	g.ReplacedBy = by
	return true
}

// Active reports whether the grant is neither revoked nor expired at now.
func (g *Grant) Active(now time.Time) bool { return g.Revoked.IsZero() && !now.After(g.Expires) }

// Covers reports whether the grant includes every one of scopes.
func (g *Grant) Covers(scopes []string) bool {
	for _, s := range scopes {
		if !slices.Contains(g.Scopes, s) {
			return false
		}
	}
	return true
}

// Revoke revokes the grant at now; it reports whether it was active
// before (a second revocation changes nothing).
func (g *Grant) Revoke(now time.Time) bool {
	if !g.Revoked.IsZero() {
		return false
	}
	g.Revoked = now
	return true
}

// RefreshToken is one refresh token of a grant's rotation chain.
type RefreshToken struct {
	Grant string `json:"grant"`
	Used  bool   `json:"used,omitempty"`
	// Spent is when the token was spent for a successor; zero for one
	// spent before it was recorded, or retired unspent (Retire).
	Spent time.Time `json:"spent,omitzero"`
	// Next is the store's key of the successor the token was spent for
	// (hex), while a retry within RefreshGrace may replace it.
	Next    string    `json:"next,omitempty"`
	Expires time.Time `json:"expires"`
}

// HeldBy reports whether the grant's tokens are client's at brand for its
// User sub: the personal agent's, asked for under sub (PACT §3.2: the
// agent's User is the pair of the agent and its sub). A grant kept before
// the sub was recorded is held by the agent for any sub.
func (g *Grant) HeldBy(brand, client, sub string) bool {
	return g.Brand == brand && g.Client == client && (g.AgentSub == "" || g.AgentSub == sub)
}

// RefreshGrace is how long after a refresh token was spent its holder may
// present it again and be answered with new tokens, rather than have the
// grant revoked for a leak: the answer to the first request was lost on
// its way (RFC 9700 §4.14.2 lets a server tell such a retry from a
// replay). The successor that answer carried is retired then, so that at
// most one of a chain's tokens is ever live. It covers a retry at once or
// after a short wait (docs/design/048).
const RefreshGrace = 30 * time.Second

// Rotation is what presenting a refresh token does (Grant.Refresh).
type Rotation int

// The outcomes of presenting a refresh token.
const (
	// Refused: nothing changes; the error says why.
	Refused Rotation = iota
	// Rotated: the token is spent now, for a new successor.
	Rotated
	// Retried: the token, spent within RefreshGrace by the same holder
	// and its successor still unspent, is answered again: the successor
	// is retired (Retire) and a new one takes its place.
	Retried
	// Leaked: a spent token presented again; the grant is revoked and
	// the caller keeps that and tells the ledger.
	Leaked
)

// Refresh spends t, a refresh token of g, for client at brand under its
// User sub at now. next is the successor t was spent for, as stored (nil
// when t is unspent, or its successor is gone). A token already spent
// means it leaked: the grant is revoked and the answer is invalid_grant
// (Leaked), unless its holder presents it within RefreshGrace of its
// spending while next is unspent (Retried). A token presented by another
// client, or under another sub than the grant was asked for, is refused
// as it is, neither spent nor taken for a leak.
func (g *Grant) Refresh(t, next *RefreshToken, brand, client, sub string, now time.Time) (Rotation, *Error) {
	switch {
	case !g.HeldBy(brand, client, sub):
		return Refused, NewError(InvalidGrant, "the refresh_token was issued to another client, brand or user of the personal agent")
	case t.Used && g.Active(now) && next != nil && !next.Used && !t.Spent.IsZero() && !now.After(t.Spent.Add(RefreshGrace)) && !now.Before(t.Spent):
		return Retried, nil
	case t.Used:
		if g.Revoke(now) {
			return Leaked, NewError(InvalidGrant, "the refresh_token was already used; the grant's refresh tokens are revoked")
		}
		return Refused, NewError(InvalidGrant, "the refresh_token was already used; the grant's refresh tokens are revoked")
	case !g.Revoked.IsZero():
		return Refused, NewError(InvalidGrant, "the grant is revoked")
	case now.After(t.Expires) || now.After(g.Expires):
		return Refused, NewError(InvalidGrant, "the refresh_token has expired")
	}
	t.Used, t.Spent = true, now
	return Rotated, nil
}

// Retire marks t, a successor replaced by a retry within RefreshGrace,
// spent without a successor: presented later it is taken for a leak.
func (t *RefreshToken) Retire() { t.Used, t.Next = true, "" }
