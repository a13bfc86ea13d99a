package pipeline

import (
	"encoding/base64"
	"testing"
	"time"
)

// jws is a compact JWS with payload claims and no real signature: Brand
// reads claims, it does not verify them.
func jws(claims string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".c2ln"
}

func TestItemBrand(t *testing.T) {
	const shop = "https://p.example/a2a/shop"
	for _, tc := range []struct {
		name string
		it   Item
		want string
	}{
		{"receipt", Item{Receipt: &Receipt{ReceiptJWS: jws(`{"brand":"` + shop + `"}`)}}, shop},
		{"refusal under a token", Item{Refusal: &Refusal{DelegationToken: jws(`{"aud":"` + shop + `"}`)}}, shop},
		{"refusal under a token with an audience list", Item{Refusal: &Refusal{DelegationToken: jws(`{"aud":["` + shop + `"]}`)}}, shop},
		{"refusal without a token", Item{Refusal: &Refusal{ClaimedPrincipal: "acct-1"}}, ""},
		{"revocation", Revoked("a2agrant_1", time.Time{}, "revoked"), ""},
		{"receipt that is not a JWS", Item{Receipt: &Receipt{ReceiptJWS: "not.a-jws"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.it.Brand(); got != tc.want {
				t.Errorf("Brand() = %q, want %q", got, tc.want)
			}
		})
	}
}
