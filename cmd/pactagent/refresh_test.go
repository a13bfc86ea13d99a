package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// A refresh spends the refresh token kept (PACT Providers rotate them).
// When the new token cannot be used (not a JWT, or for more than the one
// interface), the grant is dropped at once, saying to authorize again:
// keeping it would keep a spent refresh token, and the next send would
// get invalid_grant.
func TestARefreshedTokenThatCannotBeUsedDropsTheGrant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token func(b *delegatingBrand) string
		want  string
	}{
		{name: "opaque", token: func(*delegatingBrand) string { return "opaque-token" }, want: "does not say which server issued it"},
		{name: "aud of two", token: func(b *delegatingBrand) string { return b.token(t, []string{b.iface, b.srv.URL + "/a2a/other"}) }, want: "does not say which server issued it"},
		{name: "another interface", token: func(b *delegatingBrand) string { return b.token(t, b.srv.URL+"/a2a/other") }, want: "not for the interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newDelegatingBrand(t)
			dir := b.agentFor(t, "jane", time.Now()) // the next send refreshes
			b.refreshAnswer = map[string]any{"access_token": tc.token(b), "refresh_token": "rt-2", "expires_in": 3600, "scope": "orders:read"}
			var out bytes.Buffer
			err := run([]string{"send", "--dir", dir, "--card", b.card(), "--user", "jane", "status of A-1"}, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "run pactagent authorize again") {
				t.Fatalf("send: %v, want an error saying %q and to authorize again\n%s", err, tc.want, &out)
			}
			if g := (&agent{dir: dir}).grants(); len(g) != 0 {
				for _, g := range g {
					t.Errorf("the grant is kept, with refresh token %q (the Brand got %q)", g.Token.RefreshToken, b.refreshed)
				}
			}
			if !slices.Equal(b.refreshed, []string{"rt-1"}) || len(b.sent) != 0 {
				t.Errorf("the Brand got refresh tokens %q and %d messages, want rt-1 and none", b.refreshed, len(b.sent))
			}
		})
	}
}
