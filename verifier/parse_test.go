package verifier_test

import (
	"context"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math/big"
	"reflect"
	"slices"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// withPayload returns jws with its payload segment replaced by claims,
// the header and signature kept.
func withPayload(jws string, claims any) string {
	segs := pacttest.Segments(jws)
	segs[1] = seg(claims)
	return pacttest.Join(segs)
}

// A row's tokens are parsed once (Parse) and the parse is read by every
// check: a token whose payload or signature was changed after signing still
// fails its check, and the parsed path gives exactly what Verify gives.
func TestParsedInputStillRejectsTamperedTokens(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	// With the signature cache: a token verified once is presented again
	// tampered.
	v, err := verifier.New(verifier.Config{Audience: sc.Audience, CacheSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(r *pacttest.Receipt)
		failed []string // the checks that must FAIL; all others PASS
	}{
		{name: "untouched"},
		{name: "receipt payload swapped for wider scopes", edit: func(r *pacttest.Receipt) {
			r.Claims["scopesUsed"] = []string{"orders:cancel", "refunds:issue"}
			r.ReceiptJWS = withPayload(r.ReceiptJWS, r.Claims)
			// The posted (unverified) claims go on to fail the scopes too.
		}, failed: []string{verifier.CheckReceiptSignature, verifier.CheckScopesWithin}},
		{name: "receipt signature tampered", edit: func(r *pacttest.Receipt) { r.ReceiptJWS = pacttest.TamperSignature(r.ReceiptJWS) }, failed: []string{verifier.CheckReceiptSignature}},
		{name: "request JWT payload swapped for a later exp", edit: func(r *pacttest.Receipt) {
			r.RequestClaims["exp"] = r.RequestClaims["exp"].(int64) + 60
			r.RequestJWT = withPayload(r.RequestJWT, r.RequestClaims)
		}, failed: []string{verifier.CheckRequestSignature}},
		{name: "request JWT signature tampered", edit: func(r *pacttest.Receipt) { r.RequestJWT = pacttest.TamperSignature(r.RequestJWT) }, failed: []string{verifier.CheckRequestSignature}},
		{name: "delegation token payload swapped for a wider scope", edit: func(r *pacttest.Receipt) {
			r.TokenClaims["scope"] = "orders:cancel refunds:issue"
			r.DelegationToken = withPayload(r.DelegationToken, r.TokenClaims)
		}, failed: []string{verifier.CheckDelegationToken}},
		{name: "delegation token signature tampered", edit: func(r *pacttest.Receipt) { r.DelegationToken = pacttest.TamperSignature(r.DelegationToken) }, failed: []string{verifier.CheckDelegationToken}},
		{name: "delegation token malleated (verifies: the same signed content)", edit: func(r *pacttest.Receipt) { r.DelegationToken = pacttest.MalleateES256(r.DelegationToken) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sc.Mint(pacttest.Spec{})
			// The untouched token first, so that the tampered one meets a
			// cache that holds the original.
			if _, err := v.Verify(context.Background(), input(r), reg); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(r)
			}
			got, err := v.VerifyParsed(context.Background(), verifier.Parse(input(r)), reg)
			if err != nil {
				t.Fatalf("VerifyParsed: %v", err)
			}
			for _, c := range got.Checks {
				want := verifier.Pass
				if slices.Contains(tc.failed, c.Name) {
					want = verifier.Fail
				}
				if c.Result != want {
					t.Errorf("%s = %v, want %v (%s)", c.Name, c.Result, want, c.Detail)
				}
			}
			want, err := v.Verify(context.Background(), input(r), reg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want.Checks, got.Checks) {
				t.Errorf("VerifyParsed gave %+v, Verify %+v", got.Checks, want.Checks)
			}
		})
	}
}

// Only Parse makes a Parsed; anything else is refused rather than read as
// an empty receipt.
func TestVerifyParsedRefusesWhatParseDidNotMake(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	v, reg := newVerifier(t, sc)
	for name, p := range map[string]*verifier.Parsed{"nil": nil, "zero": {}} {
		if _, err := v.VerifyParsed(context.Background(), p, reg); !errors.Is(err, verifier.ErrMalformed) {
			t.Errorf("%s: VerifyParsed = %v, want ErrMalformed", name, err)
		}
	}
	p := verifier.Parse(verifier.Input{ReceiptJWS: "not.a.jws"})
	if _, err := p.Receipt(); !errors.Is(err, verifier.ErrMalformed) {
		t.Errorf("Receipt of a malformed receipt: %v", err)
	}
	if _, err := v.VerifyParsed(context.Background(), p, reg); !errors.Is(err, verifier.ErrMalformed) {
		t.Errorf("VerifyParsed of a malformed receipt: %v, want ErrMalformed", err)
	}
}

// Of is true only for a Parse of the same tokens and actions.
func TestParsedOf(t *testing.T) {
	in := verifier.Input{ReceiptJWS: "r.r.r", RequestJWT: "q.q.q", DelegationToken: "d.d.d",
		Actions: []verifier.Action{{Tool: "cancel_order", Target: "A-1", ArgsJSON: `{"order":"A-1"}`}}}
	if !verifier.Parse(in).Of(in) {
		t.Fatal("a parse is not Of its own input")
	}
	var nilParse *verifier.Parsed
	if nilParse.Of(in) || (&verifier.Parsed{}).Of(in) || (&verifier.Parsed{}).Of(verifier.Input{}) {
		t.Error("a nil or zero Parsed is Of an input")
	}
	for name, change := range map[string]func(*verifier.Input){
		"receipt":         func(x *verifier.Input) { x.ReceiptJWS = "r.r.s" },
		"request":         func(x *verifier.Input) { x.RequestJWT = "" },
		"token":           func(x *verifier.Input) { x.DelegationToken = "d.d.e" },
		"action's tool":   func(x *verifier.Input) { x.Actions[0].Tool = "refund" },
		"action's args":   func(x *verifier.Input) { x.Actions[0].ArgsJSON = `{"order":"A-2"}` },
		"one more":        func(x *verifier.Input) { x.Actions = append(x.Actions, x.Actions[0]) },
		"no actions":      func(x *verifier.Input) { x.Actions = nil },
		"action's target": func(x *verifier.Input) { x.Actions[0].Target = "A-2" },
	} {
		other := in
		other.Actions = slices.Clone(in.Actions)
		change(&other)
		if verifier.Parse(in).Of(other) || verifier.Parse(other).Of(in) {
			t.Errorf("%s changed: a parse of one is Of the other", name)
		}
	}
	// No actions and an empty list are the same input.
	none := in
	none.Actions = nil
	empty := in
	empty.Actions = []verifier.Action{}
	if !verifier.Parse(none).Of(empty) {
		t.Error("a parse with no actions is not Of the input with an empty list")
	}
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// highS returns jws with its ES256 signature in the high-s form.
func highS(jws string) string {
	sig, _ := base64.RawURLEncoding.DecodeString(pacttest.Segments(jws)[2])
	if new(big.Int).SetBytes(sig[32:]).Cmp(new(big.Int).Rsh(elliptic.P256().Params().N, 1)) <= 0 {
		return pacttest.MalleateES256(jws)
	}
	return jws
}

// withSignature returns jws with the signature sig.
func withSignature(jws string, sig []byte) string {
	segs := pacttest.Segments(jws)
	segs[2] = pacttest.Encode(sig)
	return pacttest.Join(segs)
}

// A parsed token lists the encodings and the canonical form of the token
// as posted.
func TestTokenEncodingsAndCanonical(t *testing.T) {
	k := pacttest.MustKey("k1", jose.ES256)
	high := highS(k.Sign(map[string]any{"sub": "a"}))
	low := pacttest.MalleateES256(high)
	kidNumber := pacttest.SignWith(map[string]any{"alg": "ES256", "kid": 5}, map[string]any{"sub": "a"}, k.Signer())
	sig, _ := base64.RawURLEncoding.DecodeString(pacttest.Segments(high)[2])
	zeroR := withSignature(high, append(make([]byte, 32), sig[32:]...))
	rs := pacttest.MustKey("r1", jose.RS256).Sign(map[string]any{"sub": "a"})
	tests := []struct {
		name      string
		tok       string
		parses    bool
		encodings []string
		canonical string
	}{
		{name: "ES256, high s", tok: high, parses: true, encodings: []string{hexSum(high), hexSum(low)}, canonical: low},
		{name: "ES256, low s", tok: low, parses: true, encodings: []string{hexSum(low), hexSum(high)}, canonical: low},
		{name: "RS256", tok: rs, parses: true, encodings: []string{hexSum(rs)}, canonical: rs},
		// A header ParseCompact refuses still names ES256: both encodings
		// are listed, so a re-encoded copy is no new token either.
		{name: "ES256 with a kid that is not a string", tok: kidNumber, encodings: []string{hexSum(kidNumber), hexSum(pacttest.MalleateES256(kidNumber))}, canonical: func() string {
			if kidNumber == highS(kidNumber) {
				return pacttest.MalleateES256(kidNumber)
			}
			return kidNumber
		}()},
		// r = 0 is no signature: no other encoding is listed; its high s
		// still folds to the low form.
		{name: "ES256 with r = 0", tok: zeroR, parses: true, encodings: []string{hexSum(zeroR)}, canonical: pacttest.MalleateES256(zeroR)},
		{name: "not a JWS", tok: "a.b", encodings: []string{hexSum("a.b")}, canonical: "a.b"},
		{name: "empty", tok: "", encodings: []string{hexSum("")}, canonical: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := verifier.ParseToken(tc.tok)
			if tok.Raw() != tc.tok {
				t.Errorf("Raw = %q", tok.Raw())
			}
			c, err := tok.Compact()
			want, wantErr := verifier.ParseCompact(tc.tok)
			if (err == nil) != tc.parses || (err == nil) != (wantErr == nil) || !reflect.DeepEqual(c, want) {
				t.Errorf("Compact = %+v, %v; ParseCompact = %+v, %v", c, err, want, wantErr)
			}
			if got := tok.Encodings(); !slices.Equal(got, tc.encodings) {
				t.Errorf("Encodings = %v, want %v", got, tc.encodings)
			}
			if got := tok.Canonical(); got != tc.canonical {
				t.Errorf("Canonical = %q, want %q", got, tc.canonical)
			}
			if got := tok.CanonicalSHA256(tok.Encodings()); got != hexSum(tc.canonical) {
				t.Errorf("CanonicalSHA256 = %s, want %s", got, hexSum(tc.canonical))
			}
			if got := tok.CanonicalSHA256(nil); got != hexSum(tc.canonical) {
				t.Errorf("CanonicalSHA256(nil) = %s, want %s", got, hexSum(tc.canonical))
			}
			if got := verifier.Encodings(tc.tok); !slices.Equal(got, tc.encodings) {
				t.Errorf("verifier.Encodings = %v, want %v", got, tc.encodings)
			}
			if got := verifier.Canonical(tc.tok); got != tc.canonical {
				t.Errorf("verifier.Canonical = %q, want %q", got, tc.canonical)
			}
		})
	}
}
