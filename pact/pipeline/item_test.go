package pipeline

import (
	"encoding/base64"
	"slices"
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

// signed is a compact JWS whose header names kid, with no real signature.
func signed(kid string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"`+kid+`"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{}`)) + ".c2ln"
}

func TestItemSignerKids(t *testing.T) {
	for _, tc := range []struct {
		name string
		it   Item
		want []string
	}{
		{"receipt and its token", Item{Receipt: &Receipt{ReceiptJWS: signed("k2"), DelegationToken: signed("k1"), RequestJWT: signed("agent")}}, []string{"k2", "k1"}},
		{"receipt and token under one key", Item{Receipt: &Receipt{ReceiptJWS: signed("k1"), DelegationToken: signed("k1")}}, []string{"k1"}},
		{"receipt without a token", Item{Receipt: &Receipt{ReceiptJWS: signed("k1")}}, []string{"k1"}},
		{"refusal under a token", Item{Refusal: &Refusal{DelegationToken: signed("k1"), RequestJWT: signed("agent")}}, []string{"k1"}},
		{"refusal without a token", Item{Refusal: &Refusal{RequestJWT: signed("agent")}}, nil},
		{"revocation", Revoked("a2agrant_1", time.Time{}, "revoked"), nil},
		{"receipt whose header names no kid", Item{Receipt: &Receipt{ReceiptJWS: jws(`{}`)}}, nil},
		{"receipt that is not a JWS", Item{Receipt: &Receipt{ReceiptJWS: "not-a-jws"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.it.SignerKids(); !slices.Equal(got, tc.want) {
				t.Errorf("SignerKids() = %q, want %q", got, tc.want)
			}
		})
	}
}
