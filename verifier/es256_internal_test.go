package verifier

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// verdict is what a signature check returns, comparable.
type verdict struct {
	payload, kid string
	alg          jose.SignatureAlgorithm
	err          string
}

func verdictOf(p []byte, kid string, alg jose.SignatureAlgorithm, err error) verdict {
	return verdict{string(p), kid, alg, fmt.Sprint(err)}
}

// goJoseVerdict is verifyCompact's verdict by go-jose alone, without the
// known headers: the oracle the known headers are held to.
func goJoseVerdict(s string, ks *KeySet) verdict {
	p, kid, alg, _, err := verifyGoJose(s, ks)
	return verdictOf(p, kid, alg, err)
}

type es256Fixture struct {
	a, b *ecdsa.PrivateKey
	r    *rsa.PrivateKey
	ks   *KeySet
}

func newES256Fixture(t testing.TB) es256Fixture {
	t.Helper()
	var f es256Fixture
	var err error
	if f.a, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if f.b, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if f.r, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &f.a.PublicKey, KeyID: "a", Use: "sig"},
		{Key: &f.b.PublicKey, KeyID: "b", Use: "sig"},
		{Key: &f.r.PublicKey, KeyID: "r", Use: "sig"},
	}}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if f.ks, err = ParseKeySet(NewSnapshot("https://keys.example/jwks.json", time.Unix(0, 0), body)); err != nil {
		t.Fatal(err)
	}
	return f
}

// sign returns the compact token of header and payload (JSON texts, as
// given) signed with ES256 by key: r and s of 32 bytes each.
func sign(t testing.TB, key *ecdsa.PrivateKey, header, payload string) string {
	t.Helper()
	in := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	sum := sha256.Sum256([]byte(in))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// withSig replaces the signature segment of tok.
func withSig(tok string, sig []byte) string {
	return tok[:strings.LastIndexByte(tok, '.')+1] + base64.RawURLEncoding.EncodeToString(sig)
}

func sigOf(t *testing.T, tok string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(tok[strings.LastIndexByte(tok, '.')+1:])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A token whose header go-jose accepted before gets go-jose's verdict
// without go-jose: the same payload, kid, alg and error, for good and bad
// signatures alike. Headers with anything but alg, kid and typ, tokens
// that are not canonical and other algorithms are always left to go-jose.
func TestKnownHeadersGiveGoJoseVerdicts(t *testing.T) {
	f := newES256Fixture(t)
	const claims = `{"iss":"https://agent.example","jti":"1"}`
	plain := `{"alg":"ES256","kid":"a"}`
	good := sign(t, f.a, plain, claims)
	goodSig := sigOf(t, good)
	n := elliptic.P256().Params().N

	highS := append([]byte(nil), goodSig...)
	new(big.Int).Sub(n, new(big.Int).SetBytes(goodSig[32:])).FillBytes(highS[32:])
	zeroR := append(make([]byte, 32), goodSig[32:]...)
	rsaSigned, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: f.r, KeyID: "r"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rsaJWS, err := rsaSigned.Sign([]byte(claims))
	if err != nil {
		t.Fatal(err)
	}
	rsaTok, err := rsaJWS.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	// The same bytes as good's payload with its last character's unused
	// bits set: go-jose decodes it, the strict decoder does not.
	segs := strings.Split(good, ".")
	loose := segs[1][:len(segs[1])-1] + string(segs[1][len(segs[1])-1]+1)

	cases := []struct {
		name string
		tok  string
		fast bool // checked without go-jose once its header is known
	}{
		{"plain, good", good, true},
		{"plain, good again, another payload", sign(t, f.a, plain, `{"iss":"https://agent.example","jti":"2"}`), true},
		{"no kid, signed by the second key", sign(t, f.b, `{"alg":"ES256"}`, claims), true},
		{"typ", sign(t, f.b, `{"alg":"ES256","kid":"b","typ":"JWT"}`, claims), true},
		{"payload tampered", segs[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://agent.example","jti":"3"}`)) + "." + segs[2], true},
		{"signed by the other key", sign(t, f.b, plain, claims), true},
		{"high s", withSig(good, highS), true},
		{"r zero", withSig(good, zeroR), true},
		{"signature short", withSig(good, goodSig[:63]), true},
		{"signature long", withSig(good, append(append([]byte(nil), goodSig...), 0)), true},
		{"unknown kid", sign(t, f.a, `{"alg":"ES256","kid":"z"}`, claims), true},
		{"kid of the RSA key", sign(t, f.a, `{"alg":"ES256","kid":"r"}`, claims), true},
		{"payload not canonical", segs[0] + "." + loose + "." + segs[2], false},
		{"line feed in the signature", good[:len(good)-4] + "\n" + good[len(good)-4:], false},
		{"four segments", good + ".x", false},
		{"crit", sign(t, f.a, `{"alg":"ES256","kid":"a","crit":["exp"],"exp":1}`, claims), false},
		{"b64 false", sign(t, f.a, `{"alg":"ES256","kid":"a","b64":false,"crit":["b64"]}`, claims), false},
		{"embedded jwk", sign(t, f.a, `{"alg":"ES256","kid":"a","jwk":{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}}`, claims), false},
		{"alg named twice (go-jose refuses a member twice)", sign(t, f.a, `{"alg":"RS256","alg":"ES256","kid":"a"}`, claims), false},
		{"alg in capitals too", sign(t, f.a, `{"ALG":"RS256","alg":"ES256","kid":"a"}`, claims), false},
		{"kid a number", sign(t, f.a, `{"alg":"ES256","kid":7}`, claims), false},
		{"alg none", sign(t, f.a, `{"alg":"none"}`, claims), false},
		{"alg ES384", sign(t, f.a, `{"alg":"ES384","kid":"a"}`, claims), false},
		{"RS256", rsaTok, false},
	}
	clear(knownHeaders.headers)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantP, wantKid, wantAlg, _, wantErr := verifyGoJose(c.tok, f.ks)
			want := verdictOf(wantP, wantKid, wantAlg, wantErr)
			for i, when := range []string{"first", "second"} {
				p, kid, alg, err := verifyCompact(c.tok, f.ks)
				if got := verdictOf(p, kid, alg, err); got != want ||
					errors.Is(err, ErrUnknownKid) != errors.Is(wantErr, ErrUnknownKid) || errors.Is(err, ErrSignature) != errors.Is(wantErr, ErrSignature) {
					t.Fatalf("%s check: %+v; go-jose: %+v", when, got, want)
				}
				if i == 0 {
					_, _, _, handled, _ := verifyKnown(ParseToken(c.tok), f.ks)
					if handled != c.fast {
						t.Fatalf("checked without go-jose after one check: %v, want %v", handled, c.fast)
					}
				}
			}
			sameAsGoJose(t, c.tok, f.ks)
		})
	}
}

// sameAsGoJose checks that tok, parsed once its header may be known,
// reads as ParseCompact reads it and verifies as go-jose verifies it.
func sameAsGoJose(t *testing.T, tok string, ks *KeySet) {
	t.Helper()
	pt := ParseToken(tok)
	c, err := pt.Compact()
	wantC, wantErr := ParseCompact(tok)
	if !reflect.DeepEqual(c, wantC) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("parsed: %+v, %v; ParseCompact: %+v, %v", c, err, wantC, wantErr)
	}
	if got, want := verdictOf(pt.check(tok, ks)), goJoseVerdict(tok, ks); got != want {
		t.Fatalf("parsed token's check: %+v; go-jose: %+v", got, want)
	}
}

// The memo of headers stays bounded however many headers writers send,
// and keeps a header that is not plain only as seen.
func TestKnownHeadersBounded(t *testing.T) {
	clear(knownHeaders.headers)
	for i := range maxKnownHeaders + 10 {
		seg := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"alg":"ES256","kid":"k%d"}`, i))
		knownHeaders.remember(seg, jose.Header{Algorithm: "ES256", KeyID: fmt.Sprintf("k%d", i)})
		if n := len(knownHeaders.headers); n > maxKnownHeaders {
			t.Fatalf("%d headers kept, bound %d", n, maxKnownHeaders)
		}
	}
	if _, ok := knownHeaders.get(base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"alg":"ES256","kid":"k%d"}`, maxKnownHeaders+9)))); !ok {
		t.Fatal("the newest header was not kept after the memo started again")
	}
	crit := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"a","crit":["exp"],"exp":1}`))
	knownHeaders.remember(crit, jose.Header{Algorithm: "ES256", KeyID: "a"})
	if _, seen := knownHeaders.lookup(crit); !seen {
		t.Fatal("a header that is not plain was not kept as seen")
	}
	if _, ok := knownHeaders.get(crit); ok {
		t.Fatal("a header that is not plain was kept as a plain one")
	}
	long := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + strings.Repeat("x", maxKnownHeaderBytes) + `"}`))
	knownHeaders.remember(long, jose.Header{Algorithm: "ES256"})
	if _, ok := knownHeaders.get(long); ok {
		t.Fatal("a header over the size bound was kept")
	}
}

// Whatever the bytes, a check through the known headers answers as go-jose
// does, on the first check of a token and on the next.
func FuzzKnownHeadersGiveGoJoseVerdicts(f *testing.F) {
	fx := newES256Fixture(f)
	const claims = `{"iss":"https://agent.example"}`
	good := sign(f, fx.a, `{"alg":"ES256","kid":"a"}`, claims)
	f.Add(good)
	f.Add(sign(f, fx.b, `{"alg":"ES256","kid":"a"}`, claims))
	f.Add(sign(f, fx.b, `{"alg":"ES256","typ":"JWT"}`, claims))
	f.Add(sign(f, fx.a, `{"alg":"ES256","kid":"a","crit":["b64"],"b64":false}`, claims))
	f.Add(good[:len(good)-1])
	f.Add(good + "A")
	f.Fuzz(func(t *testing.T, tok string) {
		want := goJoseVerdict(tok, fx.ks)
		for _, when := range []string{"first", "second"} {
			if got := verdictOf(verifyCompact(tok, fx.ks)); got != want {
				t.Fatalf("%s check: %+v; go-jose: %+v", when, got, want)
			}
		}
		sameAsGoJose(t, tok, fx.ks)
	})
}
