package provider

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/pact/brand"
	"github.com/pactledger/pactledger/pact/oauth"
)

// A delegation token is honoured at the brand its grant is of only. All
// brands' tokens are signed with the Provider's one key, so a token for
// one brand (its iss and aud) naming a grant of another is refused as an
// invalid token, even though its signature, client and sub hold.
func TestADelegationTokenNamingAnotherBrandsGrantIsRefused(t *testing.T) {
	dir := t.TempDir()
	builtin := builtinBrand(t, "acme.yaml")
	for _, id := range []string{"shop", "outlet"} { // both delegate
		if err := os.WriteFile(filepath.Join(dir, id+".yaml"), []byte(strings.Replace(builtin, "id: acme", "id: "+id, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	brands, err := brand.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := newOAuthEnvWith(t, brands)
	da := e.deviceAuth(ordersReadCancel...)
	if err := e.approve(da["user_code"].(string), "acct-48213", ordersReadCancel); err != nil {
		t.Fatal(err)
	}
	code, tok := e.pollAs("u1", da)
	if code != http.StatusOK {
		t.Fatalf("token: %d %v", code, tok)
	}
	g, err := e.st.Grant(claimsOf(t, tok["access_token"].(string)).GrantID)
	if err != nil || g.Brand != "shop" {
		t.Fatalf("grant %+v, %v; want shop's", g, err)
	}

	outlet := brands["outlet"]
	claims := oauth.NewDelegationClaims(&g, e.p.issuer(outlet), e.p.InterfaceURL(outlet.ID), strings.Join(g.Scopes, " "), "x1", e.clock())
	forged, err := e.p.key.sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	e.base = e.srv.URL + "/a2a/outlet"
	if code, auth := e.sendAs("u1", forged, "m1"); code != http.StatusUnauthorized || auth != invalidToken {
		t.Fatalf("outlet's token naming shop's grant: %d %q, want 401 %s", code, auth, invalidToken)
	}
	e.base = e.srv.URL + "/a2a/shop"
	if code, _ := e.sendAs("u1", tok["access_token"].(string), "m2"); code != http.StatusOK {
		t.Fatalf("shop's own token: %d", code)
	}
}
