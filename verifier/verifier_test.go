package verifier_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

func newVerifier(t *testing.T, sc *pacttest.Scenario) (*verifier.Verifier, *verifier.Registry) {
	t.Helper()
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: sc.Audience})
	if err != nil {
		t.Fatal(err)
	}
	return v, reg
}

func results(res *verifier.Result) map[string]verifier.Outcome {
	m := map[string]verifier.Outcome{}
	for _, c := range res.Checks {
		m[c.Name] = c.Result
	}
	return m
}

func input(r *pacttest.Receipt) verifier.Input {
	return verifier.Input{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions}
}

// b64 helpers for hand-made tokens.
func seg(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hs256(header, claims any, secret []byte) string {
	in := seg(header) + "." + seg(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func publicPEM(t *testing.T, k *pacttest.Key) []byte {
	der, err := x509.MarshalPKIXPublicKey(k.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestVerifyChecks(t *testing.T) {
	for _, algs := range []struct {
		name      string
		brand, pa jose.SignatureAlgorithm
	}{{"ES256", jose.ES256, jose.ES256}, {"RS256", jose.RS256, jose.RS256}, {"mixed", jose.RS256, jose.ES256}} {
		t.Run(algs.name, func(t *testing.T) {
			sc := pacttest.NewScenario(algs.brand, algs.pa)
			defer sc.Close()
			v, _ := newVerifier(t, sc)
			other := pacttest.MustKey("brand-k3", algs.brand) // same kid, wrong key

			tests := []struct {
				name   string
				edit   func(r *pacttest.Receipt)
				failed []string // checks that must FAIL; all others PASS
			}{
				{name: "all pass"},
				{name: "receipt signed by another key", edit: func(r *pacttest.Receipt) { r.ReceiptJWS = other.Sign(r.Claims) }, failed: []string{"receipt_signature"}},
				{name: "receipt truncated", edit: func(r *pacttest.Receipt) { r.ReceiptJWS = r.ReceiptJWS[:len(r.ReceiptJWS)-6] }, failed: []string{"receipt_signature"}},
				{name: "receipt payload re-encoded", edit: func(r *pacttest.Receipt) {
					p := strings.Split(r.ReceiptJWS, ".")
					b, _ := json.MarshalIndent(r.Claims, "", " ")
					r.ReceiptJWS = p[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + p[2]
				}, failed: []string{"receipt_signature"}},
				{name: "receipt alg none", edit: func(r *pacttest.Receipt) {
					r.ReceiptJWS = seg(map[string]string{"alg": "none", "kid": "brand-k3"}) + "." + seg(r.Claims) + "."
				}, failed: []string{"receipt_signature"}},
				{name: "receipt HS256 with the public key as secret", edit: func(r *pacttest.Receipt) {
					r.ReceiptJWS = hs256(map[string]string{"alg": "HS256", "kid": "brand-k3"}, r.Claims, publicPEM(t, sc.Brand.Key))
				}, failed: []string{"receipt_signature"}},
				{name: "receipt unknown kid", edit: func(r *pacttest.Receipt) {
					r.ReceiptJWS = pacttest.MustKey("brand-k9", algs.brand).Sign(r.Claims)
				}, failed: []string{"receipt_signature"}},
				{name: "receipt from an untrusted brand", edit: func(r *pacttest.Receipt) {
					r.Claims["brand"] = "https://evil.example/a2a/acme"
					r.TokenClaims["aud"] = "https://evil.example/a2a/acme"
					sc.Resign(r)
				}, failed: []string{"receipt_signature", "delegation_token"}},
				{name: "request JWT missing", edit: func(r *pacttest.Receipt) { r.RequestJWT = "" }, failed: []string{"request_signature", "bindings"}},
				{name: "request JWT HS256", edit: func(r *pacttest.Receipt) {
					r.RequestJWT = hs256(map[string]string{"alg": "HS256", "kid": "pa-2026-09"}, r.RequestClaims, publicPEM(t, sc.PA.Key))
				}, failed: []string{"request_signature"}},
				{name: "request JWT wrong audience", edit: func(r *pacttest.Receipt) { r.RequestClaims["aud"] = sc.Brand.ID; sc.Resign(r) }, failed: []string{"request_signature"}},
				{name: "request JWT aud as array", edit: func(r *pacttest.Receipt) { r.RequestClaims["aud"] = []string{sc.Audience}; sc.Resign(r) }, failed: []string{"request_signature"}},
				{name: "request JWT no sub", edit: func(r *pacttest.Receipt) { delete(r.RequestClaims, "sub"); sc.Resign(r) }, failed: []string{"request_signature"}},
				{name: "request JWT exp over 300s after iat", edit: func(r *pacttest.Receipt) {
					r.RequestClaims["exp"] = r.RequestClaims["iat"].(int64) + 301
					sc.Resign(r)
				}, failed: []string{"request_signature"}},
				{name: "request JWT expired at ts", edit: func(r *pacttest.Receipt) {
					r.RequestClaims["iat"] = r.RequestClaims["iat"].(int64) - 400
					r.RequestClaims["exp"] = r.RequestClaims["iat"].(int64) + 300
					sc.Resign(r)
				}, failed: []string{"request_signature"}},
				{name: "request JWT iat 31s after ts", edit: func(r *pacttest.Receipt) {
					r.RequestClaims["iat"] = r.RequestClaims["iat"].(int64) + 41
					sc.Resign(r)
				}, failed: []string{"request_signature"}},
				{name: "request JWT iat 29s after ts is within skew", edit: func(r *pacttest.Receipt) {
					r.RequestClaims["iat"] = r.RequestClaims["iat"].(int64) + 39
					sc.Resign(r)
				}},
				{name: "request JWT no exp", edit: func(r *pacttest.Receipt) { delete(r.RequestClaims, "exp"); sc.Resign(r) }, failed: []string{"request_signature"}},
				{name: "request JWT from an unregistered issuer", edit: func(r *pacttest.Receipt) {
					r.RequestClaims["iss"] = "https://other-pa.example"
					sc.Resign(r)
				}, failed: []string{"request_signature", "bindings"}},
				{name: "delegation token signed by the PA", edit: func(r *pacttest.Receipt) { r.DelegationToken = sc.PA.Key.Sign(r.TokenClaims) }, failed: []string{"delegation_token"}},
				{name: "delegation token expired at ts", edit: func(r *pacttest.Receipt) {
					r.TokenClaims["exp"] = r.TokenClaims["iat"].(int64) + 60
					sc.Resign(r)
				}, failed: []string{"delegation_token"}},
				{name: "delegation token wrong iss", edit: func(r *pacttest.Receipt) { r.TokenClaims["iss"] = "https://other-as.example"; sc.Resign(r) }, failed: []string{"delegation_token"}},
				{name: "token client_id is another PA", edit: func(r *pacttest.Receipt) { r.TokenClaims["client_id"] = "https://other-pa.example"; sc.Resign(r) }, failed: []string{"bindings"}},
				{name: "token sub is another user", edit: func(r *pacttest.Receipt) { r.TokenClaims["sub"] = "acct-1"; sc.Resign(r) }, failed: []string{"bindings"}},
				{name: "token grant_id differs", edit: func(r *pacttest.Receipt) { r.TokenClaims["grant_id"] = "a2agrant_other"; sc.Resign(r) }, failed: []string{"bindings"}},
				{name: "token aud is another brand", edit: func(r *pacttest.Receipt) { r.TokenClaims["aud"] = "https://other/a2a/x"; sc.Resign(r) }, failed: []string{"bindings"}},
				{name: "scopes used beyond the grant", edit: func(r *pacttest.Receipt) {
					r.Claims["scopesUsed"] = []string{"orders:cancel", "refunds:issue"}
					sc.Resign(r)
				}, failed: []string{"scopes_within_grant"}},
				{name: "args hash mismatch", edit: func(r *pacttest.Receipt) { r.Actions[0].ArgsJSON = `{"order":"A-9999"}` }, failed: []string{"args_hash"}},
				{name: "logged action missing from receipt", edit: func(r *pacttest.Receipt) {
					r.Actions = append(r.Actions, verifier.Action{Tool: "issue_refund", Target: "A-5531", ArgsJSON: `{}`})
				}, failed: []string{"args_hash"}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					// Keys of its own: an unknown kid is decided by a
					// refetch of its own, not one an earlier case started.
					_, reg := newVerifier(t, sc)
					r := sc.Mint(pacttest.Spec{})
					if tc.edit != nil {
						tc.edit(r)
					}
					res, err := v.Verify(context.Background(), input(r), reg)
					if err != nil {
						t.Fatalf("Verify: %v", err)
					}
					got := results(res)
					for _, name := range []string{"receipt_signature", "request_signature", "delegation_token", "bindings", "scopes_within_grant", "args_hash"} {
						want := verifier.Pass
						for _, f := range tc.failed {
							if f == name {
								want = verifier.Fail
							}
						}
						if got[name] != want {
							t.Errorf("%s = %v, want %v (checks: %+v)", name, got[name], want, res.Checks)
						}
					}
				})
			}
		})
	}
}

// A row keeps each passing check's detail: what verified it, in words
// that stay the same from one version to the next.
func TestPassDetails(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	v, reg := newVerifier(t, sc)
	r := sc.Mint(pacttest.Spec{})
	res, err := v.Verify(context.Background(), input(r), reg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*regexp.Regexp{
		verifier.CheckReceiptSignature: regexp.MustCompile(`^ES256 kid ` + regexp.QuoteMeta(sc.Brand.Key.Kid) + `$`),
		verifier.CheckRequestSignature: regexp.MustCompile(`^ES256 kid ` + regexp.QuoteMeta(sc.PA.Key.Kid) + `, iss ` + regexp.QuoteMeta(r.RequestClaims["iss"].(string)) + `$`),
		verifier.CheckDelegationToken:  regexp.MustCompile(`^ES256 kid \S+, expires \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`),
		verifier.CheckScopesWithin:     regexp.MustCompile(`^used \[[^]]+\] within \[[^]]+\]$`),
		verifier.CheckArgsHash:         regexp.MustCompile(`^\d+ matched the receipt, \d+ computed by the ledger$`),
	}
	for _, c := range res.Checks {
		if re := want[c.Name]; re != nil {
			if c.Result != verifier.Pass || !re.MatchString(c.Detail) {
				t.Errorf("%s: %v %q, want PASS matching %s", c.Name, c.Result, c.Detail, re)
			}
			delete(want, c.Name)
		}
	}
	for name := range want {
		t.Errorf("%s: no such check", name)
	}
}

func TestArgsHashComputedWhenReceiptHasNone(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	v, reg := newVerifier(t, sc)
	r := sc.Mint(pacttest.Spec{})
	r.Claims["actions"] = []map[string]any{{"tool": "cancel_order"}}
	sc.Resign(r)
	res, err := v.Verify(context.Background(), input(r), reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 1 || res.Actions[0].HashSource != verifier.HashComputedByLedger || res.Actions[0].ArgsHash != verifier.ArgsHash(r.Actions[0].ArgsJSON) {
		t.Fatalf("actions = %+v, want one computed by the ledger", res.Actions)
	}
	if got := results(res)["args_hash"]; got != verifier.Pass {
		t.Fatalf("args_hash = %v", got)
	}
}

// Each action with a target records what vouches for it: the signed args
// when they name it; else the action log alone (args filed under another
// order, args the agent did not sign, logged args that are not the signed
// ones, no args, signed args a decoder may read otherwise than the
// ledger). An action without a target records none.
func TestActionsRecordWhereTheirTargetComesFrom(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	v, reg := newVerifier(t, sc)
	cases := []struct {
		name string
		args string // the signed args; {"order":"A-5531"} when empty
		edit func(r *pacttest.Receipt)
		want verifier.TargetSource
	}{
		{"the signed args name it", "", func(*pacttest.Receipt) {}, verifier.TargetFromSignedArgs},
		{"signed args holding the order twice", `{"order":"B-8888","order":"A-5531"}`, func(*pacttest.Receipt) {}, verifier.TargetFromWriter},
		{"signed args with bytes after them", `{"order":"A-5531"} {"order":"B-8888"}`, func(*pacttest.Receipt) {}, verifier.TargetFromWriter},
		{"filed under another order", "", func(r *pacttest.Receipt) { r.Actions[0].Target = "B-8888" }, verifier.TargetFromWriter},
		{"args not signed", "", func(r *pacttest.Receipt) {
			r.Claims["actions"] = []map[string]any{{"tool": "cancel_order"}}
			sc.Resign(r)
		}, verifier.TargetFromWriter},
		{"logged args not the signed ones", "", func(r *pacttest.Receipt) { r.Actions[0].ArgsJSON = `{"order":"A-5531","refund":"all"}` }, verifier.TargetFromWriter},
		{"no args", "", func(r *pacttest.Receipt) {
			r.Claims["actions"] = []map[string]any{{"tool": "cancel_order"}}
			sc.Resign(r)
			r.Actions[0].ArgsJSON = ""
		}, verifier.TargetFromWriter},
		{"no target", "", func(r *pacttest.Receipt) { r.Actions[0].Target = "" }, verifier.TargetNotRecorded},
	}
	for _, c := range cases {
		r := sc.Mint(pacttest.Spec{Target: "A-5531", Tool: "cancel_order", ArgsJSON: c.args})
		c.edit(r)
		res, err := v.Verify(context.Background(), input(r), reg)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Actions) != 1 || res.Actions[0].TargetSource != c.want {
			t.Errorf("%s: actions %+v; want target source %d", c.name, res.Actions, c.want)
		}
	}
}

func TestUnknownKidRefetchesOnce(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	fetches := 0
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: func() time.Time { return now }, OnFetch: func(string) { fetches++ }})
	reg, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	if _, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg); err != nil {
		t.Fatal(err)
	}
	base := fetches // brand + PA

	// The brand rotates: a receipt with the new kid triggers one refetch.
	k4 := pacttest.MustKey("brand-k4", jose.ES256)
	sc.Brand.JWKS.Set(sc.Brand.Key, k4)
	sc.Brand.Key = k4
	res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := results(res)["receipt_signature"]; got != verifier.Pass {
		t.Fatalf("after rotation receipt_signature = %v: %+v", got, res.Checks)
	}
	if fetches != base+1 {
		t.Fatalf("fetches after rotation = %d, want %d", fetches-base, 1)
	}
	// Unknown kids within MinRefetch do not refetch again: they are
	// undecided, since the latest refetch started before they were seen.
	r := sc.Mint(pacttest.Spec{})
	r.ReceiptJWS = pacttest.MustKey("brand-k5", jose.ES256).Sign(r.Claims)
	for range 5 {
		if _, err := v.Verify(context.Background(), input(r), reg); !errors.Is(err, verifier.ErrUndecided) {
			t.Fatalf("an unknown kid within MinRefetch of a refetch = %v, want undecided", err)
		}
	}
	if fetches != base+1 {
		t.Fatalf("unknown kids refetched %d times within the rate limit", fetches-base-1)
	}
	// Past MinRefetch a refetch of its own decides it.
	now = now.Add(10 * time.Second) // the default MinRefetch
	res, err = v.Verify(context.Background(), input(r), reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := results(res)["receipt_signature"]; got != verifier.Fail || fetches != base+2 {
		t.Fatalf("an unknown kid past MinRefetch: receipt_signature = %v after %d refetches, want FAIL after 2", got, fetches-base)
	}
}

func TestParseReceiptRejectsNonJWS(t *testing.T) {
	for _, s := range []string{"", "abc", "a.b", "a.b.c.d", "!!.e30.", "e30.e30.sig", seg(map[string]string{"alg": "ES256"}) + ".bm90IGpzb24." + "c2ln",
		seg(map[string]string{"alg": "ES256"}) + "." + seg(map[string]string{"ts": "yesterday"}) + ".c2ln"} {
		if _, _, err := verifier.ParseReceipt(s); err == nil {
			t.Errorf("ParseReceipt(%q) succeeded", s)
		}
	}
}

// Every byte string has one accepted encoding, and the two ES256
// signatures of the same content are listed together.
func TestCompactTokensAreCanonical(t *testing.T) {
	k := pacttest.MustKey("k1", jose.ES256)
	tok := k.Sign(map[string]any{"sub": "a"})
	if _, err := verifier.ParseCompact(tok); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(string) (string, bool){"unused bits": pacttest.NonCanonicalTail, "padding": pacttest.Padded, "std alphabet": pacttest.StdAlphabet, "CR": pacttest.Insert("\r"), "space": pacttest.Insert(" ")} {
		for seg := range 3 {
			bad, ok := pacttest.ReplaceSegment(tok, seg, f)
			if !ok {
				continue
			}
			if _, err := verifier.ParseCompact(bad); !errors.Is(err, verifier.ErrNotCanonical) || !errors.Is(err, verifier.ErrMalformed) {
				t.Errorf("%s in segment %d: %v", name, seg, err)
			}
		}
	}
	m := pacttest.MalleateES256(tok)
	a, b := verifier.Encodings(tok), verifier.Encodings(m)
	if len(a) != 2 || len(b) != 2 || a[0] != b[1] || a[1] != b[0] {
		t.Fatalf("encodings %v and %v do not list each other", a, b)
	}
	if verifier.Canonical(tok) != verifier.Canonical(m) {
		t.Fatal("the two signatures have different canonical forms")
	}
	rs := pacttest.MustKey("r1", jose.RS256).Sign(map[string]any{"sub": "a"})
	if e := verifier.Encodings(rs); len(e) != 1 || verifier.Canonical(rs) != rs {
		t.Fatalf("RS256 encodings %v", e)
	}
}

func TestNumericDateRange(t *testing.T) {
	for _, raw := range []string{"1e300", "-1e300", "253402300800", "-62135596801", "-1", "1e999", `"1790000000"`, "null", "true", "{}"} {
		var d verifier.NumericDate
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if _, err := d.Check("exp"); err == nil || !strings.Contains(err.Error(), "exp "+raw+" is") {
			t.Errorf("%s: %v", raw, err)
		}
	}
	var d verifier.NumericDate
	if err := json.Unmarshal([]byte("1790000000"), &d); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Check("exp"); err != nil || got.Unix() != 1790000000 {
		t.Errorf("in range: %v %v", got, err)
	}
	if got, err := verifier.NewNumericDate(1790000000.5).Check("iat"); err != nil || got.UnixMilli() != 1790000000500 {
		t.Errorf("NewNumericDate: %v %v", got, err)
	}
	_ = math.Pi
}

// A check's detail is kept with the row: the problems a writer's input
// multiplies (a logged action the receipt does not sign, each naming a
// tool and target of up to 512 bytes) are listed within a bound.
func TestArgsDetailIsBounded(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	v, reg := newVerifier(t, sc)
	r := sc.Mint(pacttest.Spec{})
	in := input(r)
	for i := range 64 {
		in.Actions = append(in.Actions, verifier.Action{Tool: strings.Repeat("t", 512), Target: fmt.Sprintf("%d-%s", i, strings.Repeat("x", 500))})
	}
	res, err := v.Verify(context.Background(), in, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Checks {
		if c.Name == verifier.CheckArgsHash {
			if c.Result != verifier.Fail || len(c.Detail) > 2048 || !strings.HasSuffix(c.Detail, "; and 56 more") {
				t.Fatalf("args_hash = %v, a detail of %d bytes ending %q", c.Result, len(c.Detail), c.Detail[max(0, len(c.Detail)-40):])
			}
			return
		}
	}
	t.Fatal("no args_hash check")
}
