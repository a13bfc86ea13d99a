package oauth

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A grant carries each scope through the grants it came through, nearest
// first; a scope the User allows again starts afresh; Carried lists the
// nearest of every scope before any scope's farther ones, MaxCarriedFrom
// at most, so that no grant a scope was carried from directly is left out
// for another scope's long history.
func TestCarriedListsTheNearestFirst(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	grant := func(id string, scopes ...string) *Grant {
		return &Grant{ID: id, Scopes: scopes, Created: now, Expires: now.Add(GrantTTL)}
	}
	// A long history of carrying "read": g0 allowed it, g1..g19 carried it.
	prev := grant("g0", "read")
	for i := 1; i < 20; i++ {
		g := grant(fmt.Sprintf("g%d", i), "other")
		g.CarryOver(prev, []string{"other"})
		prev = g
	}
	if got := prev.CarriedFrom["read"]; len(got) != MaxCarriedFrom || got[0] != "g18" || got[MaxCarriedFrom-1] != "g3" {
		t.Fatalf("read carried through %v, want g18 back to g3", got)
	}
	if _, ok := prev.CarriedFrom["other"]; ok {
		t.Fatalf("a scope the User allowed under the grant is carried: %v", prev.CarriedFrom)
	}
	// A step-up extends it for "write": carried are "read" through g19
	// and on, and "other" through g19 alone.
	up := grant("up", "write")
	up.Carry(prev)
	want := []string{"g19", "g18", "g17"}
	if got := up.Carried(); len(got) != MaxCarriedFrom || !slices.Equal(got[:3], want) {
		t.Fatalf("the step-up's grant carries from %v, want %v first and %d in all", got, want, MaxCarriedFrom)
	}
	// Two scopes carried from two grants, one of them with a long
	// history: both direct sources come first.
	g := grant("new", "renewed")
	g.CarriedFrom = map[string][]string{"a": append([]string{"p"}, up.Carried()...), "b": {"q"}}
	if got := g.Carried(); len(got) != MaxCarriedFrom || !slices.Equal(got[:2], []string{"p", "q"}) {
		t.Fatalf("carried from %v, want p and q first", got)
	}
	// A grant kept before CarriedFrom was names the grant it extends.
	old := &Grant{ID: "old", Extends: "base"}
	if got := old.Carried(); !slices.Equal(got, []string{"base"}) {
		t.Fatalf("a grant kept before CarriedFrom: %v, want the grant it extends", got)
	}
}
