package verifier_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

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
