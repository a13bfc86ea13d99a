package verifier

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// p256Keys returns n P-256 keys and their public JWKs under kid (each its
// own kid "k<i>" when kid is empty).
func p256Keys(t *testing.T, n int, kid string) ([]*ecdsa.PrivateKey, []jose.JSONWebKey) {
	t.Helper()
	var privs []*ecdsa.PrivateKey
	var jwks []jose.JSONWebKey
	for i := range n {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		k := kid
		if k == "" {
			k = fmt.Sprintf("k%d", i)
		}
		privs = append(privs, priv)
		jwks = append(jwks, jose.JSONWebKey{Key: &priv.PublicKey, KeyID: k, Algorithm: "ES256", Use: "sig"})
	}
	return privs, jwks
}

func keySetOf(t *testing.T, keys []jose.JSONWebKey) *KeySet {
	t.Helper()
	body, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ParseKeySet(NewSnapshot("https://agent.example/jwks", time.Now(), body))
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func signES256(t *testing.T, priv *ecdsa.PrivateKey, kid string) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Sign([]byte(`{"iss":"https://agent.example","sub":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Anyone can publish a set of hundreds of keys under one kid (an open
// agent's set is whatever its issuer serves): a token naming that kid is
// tried against the first maxKidCandidates of them, not all; a token
// without a kid against the first maxKidlessCandidates keys of its
// algorithm.
func TestATokenIsTriedAgainstAFewKeysOfASet(t *testing.T) {
	privs, underOne := p256Keys(t, 40, "k")
	ks := keySetOf(t, underOne)
	if got := len(ks.candidates("k", jose.ES256)); got != maxKidCandidates {
		t.Errorf("a token under a kid with 40 keys is tried against %d, want %d", got, maxKidCandidates)
	}
	if _, _, _, err := verifyCompact(signES256(t, privs[maxKidCandidates-1], "k"), ks); err != nil {
		t.Errorf("signed by the last key tried under its kid: %v", err)
	}
	if _, _, _, err := verifyCompact(signES256(t, privs[maxKidCandidates], "k"), ks); err == nil {
		t.Error("signed by a key past those tried under its kid: verified")
	}

	_, kidless := p256Keys(t, 40, "")
	ks = keySetOf(t, kidless)
	if got := len(ks.candidates("", jose.ES256)); got != maxKidlessCandidates {
		t.Errorf("a token without a kid, against a set of 40 keys, is tried against %d, want %d", got, maxKidlessCandidates)
	}
}

// A token's algorithm picks the keys it is tried against before they are
// counted: an ES256 token without a kid verifies with the P-256 key that
// follows many RSA keys in its signer's set.
func TestATokenWithoutAKidSkipsKeysOfAnotherType(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var keys []jose.JSONWebKey
	for i := range 3 * maxKidlessCandidates {
		keys = append(keys, jose.JSONWebKey{Key: &rsaKey.PublicKey, KeyID: fmt.Sprintf("rsa-%d", i), Use: "sig"})
	}
	privs, ec := p256Keys(t, 1, "")
	ks := keySetOf(t, append(keys, ec...))
	if _, _, _, err := verifyCompact(signES256(t, privs[0], ""), ks); err != nil {
		t.Fatalf("an ES256 token without a kid, its key after %d RSA keys: %v", len(keys), err)
	}
}

// An RSA key is kept with a modulus of 2048 to 4096 bits and an odd
// public exponent of at most 65537; any other is skipped, as other
// unusable keys are: a huge exponent makes each check of a forged token
// slower.
func TestRSAKeysOfOddSizesOrExponentsAreSkipped(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	modulus := func(bits int) string {
		n := make([]byte, bits/8)
		if _, err := rand.Read(n); err != nil {
			t.Fatal(err)
		}
		n[0] |= 0x80
		n[len(n)-1] |= 1
		return b64(n)
	}
	for _, tc := range []struct {
		name   string
		bits   int
		e      int64
		usable bool
	}{
		{"2048 bits, e 65537", 2048, 65537, true},
		{"4096 bits, e 65537", 4096, 65537, true},
		{"2048 bits, e 3", 2048, 3, true},
		{"1024 bits", 1024, 65537, false},
		{"8192 bits", 8192, 65537, false},
		{"e 2^31-1", 2048, 1<<31 - 1, false},
		{"e 65539", 2048, 65539, false},
		{"e even", 2048, 65536, false},
		{"e 1", 2048, 1, false},
	} {
		key := fmt.Sprintf(`{"kty":"RSA","kid":"r","use":"sig","n":%q,"e":%q}`, modulus(tc.bits), b64(big.NewInt(tc.e).Bytes()))
		ks, err := ParseKeySet(NewSnapshot("https://agent.example/jwks", time.Now(), []byte(`{"keys":[`+key+`]}`)))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(ks.keys) == 1; got != tc.usable {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.usable)
		}
	}
}
