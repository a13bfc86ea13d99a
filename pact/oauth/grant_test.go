package oauth

import (
	"slices"
	"testing"
	"time"
)

// A new grant of an agent carries the scopes of its older grant that the
// agent did not ask for again, ending no later than that grant; a scope
// asked again holds only as the User approved it now.
func TestCarryOver(t *testing.T) {
	older := Grant{ID: "g1", Scopes: []string{"orders:read", "orders:cancel"}, Expires: t0.Add(24 * time.Hour)}
	for _, c := range []struct {
		name            string
		asked, approved []string
		want            []string
		expires         time.Time
	}{
		{"asked again for all it held", []string{"orders:read", "orders:cancel", "refunds:issue"}, []string{"orders:read", "orders:cancel", "refunds:issue"},
			[]string{"orders:read", "orders:cancel", "refunds:issue"}, t0.Add(GrantTTL)},
		{"asked for the missing scope alone", []string{"refunds:issue"}, []string{"refunds:issue"},
			[]string{"orders:read", "orders:cancel", "refunds:issue"}, older.Expires},
		{"a held scope unchecked when asked again", []string{"orders:cancel", "refunds:issue"}, []string{"refunds:issue"},
			[]string{"orders:read", "refunds:issue"}, older.Expires},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := Grant{ID: "g2", Scopes: c.approved, Expires: t0.Add(GrantTTL)}
			g.CarryOver(&older, c.asked)
			if !slices.Equal(g.Scopes, c.want) || !g.Expires.Equal(c.expires) {
				t.Fatalf("got %v until %s, want %v until %s", g.Scopes, g.Expires, c.want, c.expires)
			}
		})
	}
}

// Grants are the same agent's when they are of one Brand user at one
// Brand to one personal agent for one agent sub; one that recorded no sub
// is no other's.
func TestSameAgent(t *testing.T) {
	g := Grant{Brand: "acme", User: "acct-1", Client: "https://pa.example", AgentSub: "u1"}
	for _, c := range []struct {
		name string
		edit func(*Grant)
		want bool
	}{
		{"the same", func(*Grant) {}, true},
		{"another sub", func(o *Grant) { o.AgentSub = "u2" }, false},
		{"no sub", func(o *Grant) { o.AgentSub = "" }, false},
		{"another agent", func(o *Grant) { o.Client = "https://other.example" }, false},
		{"another user", func(o *Grant) { o.User = "acct-2" }, false},
		{"another brand", func(o *Grant) { o.Brand = "skyways" }, false},
	} {
		o := g
		c.edit(&o)
		if got := g.SameAgent(&o); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Replace revokes an active grant naming the one that replaced it, and
// leaves an ended one as it was.
func TestReplace(t *testing.T) {
	g := Grant{ID: "g1", Expires: t0.Add(time.Hour)}
	if !g.Replace("g2", t0) || g.ReplacedBy != "g2" || !g.Revoked.Equal(t0) {
		t.Fatalf("replace an active grant: %+v", g)
	}
	if g.Replace("g3", t0.Add(time.Minute)) || g.ReplacedBy != "g2" || !g.Revoked.Equal(t0) {
		t.Fatalf("replace a revoked grant again: %+v", g)
	}
	expired := Grant{ID: "g4", Expires: t0.Add(-time.Hour)}
	if expired.Replace("g2", t0) || !expired.Revoked.IsZero() {
		t.Fatalf("replace an expired grant: %+v", expired)
	}
}

// A grant's tokens are its agent's at its Brand for the sub it was asked
// under; one kept before the sub was recorded is the agent's for any sub.
func TestHeldBy(t *testing.T) {
	g := Grant{Brand: "acme", Client: "https://pa.example", AgentSub: "u1"}
	for _, c := range []struct {
		name                 string
		brand, client, sub   string
		want, wantUnrecorded bool
	}{
		{"the agent for the sub", "acme", "https://pa.example", "u1", true, true},
		{"the agent for another sub", "acme", "https://pa.example", "u2", false, true},
		{"another agent", "acme", "https://other.example", "u1", false, false},
		{"another brand", "skyways", "https://pa.example", "u1", false, false},
	} {
		if got := g.HeldBy(c.brand, c.client, c.sub); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		old := g
		old.AgentSub = ""
		if got := old.HeldBy(c.brand, c.client, c.sub); got != c.wantUnrecorded {
			t.Errorf("%s, of a grant that recorded no sub: %v, want %v", c.name, got, c.wantUnrecorded)
		}
	}
}
