package verifier_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// A key a signer publishes with its private part (anyone can sign with
// it) vouches for nothing, nor does one whose key_ops leave out "verify";
// a public key with no key_ops, or with "verify" among them, does.
func TestKeysThatCannotVouchAreSkipped(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk := func(k any, ops string) string {
		t.Helper()
		b, err := json.Marshal(jose.JSONWebKey{Key: k, KeyID: "k1", Algorithm: "ES256", Use: "sig"})
		if err != nil {
			t.Fatal(err)
		}
		if ops != "" {
			return strings.Replace(string(b), "{", `{"key_ops":`+ops+`,`, 1)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name   string
		key    string
		usable bool
	}{
		{"the private key published", jwk(priv, ""), false},
		{"key_ops without verify", jwk(&priv.PublicKey, `["encrypt"]`), false},
		{"key_ops empty", jwk(&priv.PublicKey, `[]`), false},
		{"key_ops with verify", jwk(&priv.PublicKey, `["sign","verify"]`), true},
		{"a public key", jwk(&priv.PublicKey, ""), true},
	} {
		ks, err := verifier.ParseKeySet(verifier.NewSnapshot("https://brand.example/jwks", time.Now(), []byte(`{"keys":[`+tc.key+`]}`)))
		if err != nil {
			t.Fatal(err)
		}
		if got := ks.Skipped == 0; got != tc.usable {
			t.Errorf("%s: usable %v, want %v", tc.name, got, tc.usable)
		}
	}
}

// A set of more than 64 keys (one key set for many brands, a long tail of
// retired keys) keeps them all: a receipt signed by the 65th and named by
// its kid verifies, where its kid was once dropped from the set and the
// receipt decided signed by an unknown key.
func TestAKeyPastTheSixtyFourthVerifies(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	var keys []*pacttest.Key
	for i := range 64 {
		keys = append(keys, pacttest.MustKey(fmt.Sprintf("old-%02d", i), jose.ES256))
	}
	current := pacttest.MustKey("brand-current", jose.ES256)
	sc.Brand.JWKS.Set(append(keys, current)...)
	sc.Brand.Key = current
	v, reg := newVerifier(t, sc)
	res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
	if err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Pass {
		t.Fatalf("a receipt signed by the 65th key of the brand's set: %v, %v", results(res), err)
	}
}
