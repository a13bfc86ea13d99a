package verifier_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

func FuzzParseCompact(f *testing.F) {
	k := pacttest.MustKey("k", jose.ES256)
	f.Add(k.Sign(map[string]any{"iss": "x"}))
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := verifier.ParseCompact(s)
		if err == nil && c.Alg == "" {
			t.Fatal("parsed a header without alg")
		}
	})
}

// A token parsed once answers as ParseCompact does; its own hash comes
// first among its encodings; its canonical form signs the same header and
// payload, is its own canonical form, and is listed among the encodings
// when there are two.
func FuzzParseToken(f *testing.F) {
	k := pacttest.MustKey("k", jose.ES256)
	tok := k.Sign(map[string]any{"iss": "x"})
	f.Add(tok)
	f.Add(pacttest.MalleateES256(tok))
	f.Add(pacttest.MustKey("r", jose.RS256).Sign(map[string]any{"iss": "x"}))
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p := verifier.ParseToken(s)
		c, err := p.Compact()
		want, wantErr := verifier.ParseCompact(s)
		if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(c, want) {
			t.Fatalf("Compact = %+v, %v; ParseCompact = %+v, %v", c, err, want, wantErr)
		}
		encs := p.Encodings()
		if len(encs) == 0 || len(encs) > 2 || encs[0] != hexSum(s) {
			t.Fatalf("Encodings = %v", encs)
		}
		canon := p.Canonical()
		if got := p.CanonicalSHA256(encs); got != hexSum(canon) {
			t.Fatalf("CanonicalSHA256 = %s, want the hash of %q", got, canon)
		}
		if got := p.CanonicalSHA256(nil); got != hexSum(canon) {
			t.Fatalf("CanonicalSHA256(nil) = %s, want the hash of %q", got, canon)
		}
		if canon == s {
			return
		}
		if i, j := strings.LastIndexByte(s, '.'), strings.LastIndexByte(canon, '.'); i < 0 || j < 0 || s[:i] != canon[:j] {
			t.Fatalf("Canonical = %q signs something else than %q", canon, s)
		}
		if again := verifier.ParseToken(canon).Canonical(); again != canon {
			t.Fatalf("Canonical of %q is %q, not itself", canon, again)
		}
		if len(encs) == 2 && hexSum(canon) != encs[1] {
			t.Fatalf("Canonical = %q is not among the encodings %v", canon, encs)
		}
	})
}

func FuzzParseReceipt(f *testing.F) {
	k := pacttest.MustKey("k", jose.ES256)
	f.Add(k.Sign(map[string]any{"grantId": "g", "user": "u", "pa": "p", "brand": "b", "scopesUsed": []string{"s"}, "actions": []map[string]string{{"tool": "t", "argsHash": "h"}}, "ts": "2026-10-07T13:12:44Z"}))
	f.Add(k.Sign(map[string]any{"ts": 5}))
	f.Fuzz(func(t *testing.T, s string) {
		r, _, err := verifier.ParseReceipt(s)
		if err == nil && r.Time.IsZero() {
			t.Fatal("receipt without a time")
		}
	})
}

func FuzzParseKeySet(f *testing.F) {
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","d":"AA"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = verifier.ParseKeySet(verifier.NewSnapshot("u", time.Time{}, b))
	})
}

// FuzzVerify feeds arbitrary tokens to the whole verifier: it must never
// panic and never pass a signature it did not verify.
func FuzzVerify(f *testing.F) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	f.Cleanup(sc.Close)
	fetcher := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(fetcher, sc.Brands(), sc.Agents())
	if err != nil {
		f.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	r := sc.Mint(pacttest.Spec{})
	f.Add(r.ReceiptJWS, r.RequestJWT, r.DelegationToken)
	f.Fuzz(func(t *testing.T, receipt, request, token string) {
		res, err := v.Verify(context.Background(), verifier.Input{ReceiptJWS: receipt, RequestJWT: request, DelegationToken: token}, reg)
		if err != nil {
			return
		}
		for _, c := range res.Checks {
			if c.Name == verifier.CheckReceiptSignature && c.Result == verifier.Pass && receipt != r.ReceiptJWS {
				// A different string can only pass if it is a valid signature:
				// the fuzzer cannot forge ES256, so this is a bug.
				t.Fatalf("receipt_signature passed for a modified receipt %q", receipt)
			}
		}
	})
}
