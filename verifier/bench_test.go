package verifier_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// BenchmarkVerify measures Verify on one row (receipt, request JWT,
// delegation token; ES256) with a token per row and with one token per
// session of 20 turns through the signature cache. The per-row sub-benchmark
// is the baseline the session one is read against.
func BenchmarkVerify(b *testing.B) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	const pool, turns = 400, 20
	rows := make([]verifier.Input, pool)
	var token string
	for i := range rows {
		r := sc.Mint(pacttest.Spec{At: at.Add(time.Duration(i) * time.Second)})
		rows[i] = input(r)
		if i%turns == 0 {
			token = r.DelegationToken
		}
		rows[i].DelegationToken = token
	}
	perRow := make([]verifier.Input, pool)
	for i := range perRow {
		perRow[i] = input(sc.Mint(pacttest.Spec{At: at.Add(time.Duration(i) * time.Second)}))
	}
	keys, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), sc.Brands(), sc.Agents())
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, size int, corpus []verifier.Input) {
		v, err := verifier.New(verifier.Config{Audience: sc.Audience, CacheSize: size})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := v.Verify(context.Background(), corpus[i%len(corpus)], keys); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("token per row", func(b *testing.B) { run(b, 10000, perRow) })
	b.Run("sessions of 20 turns", func(b *testing.B) { run(b, 10000, rows) })
}

// BenchmarkForgedScopes measures Verify of a forged receipt and token
// (a key under the brand's kid that the brand does not publish) whose
// claims list thousands of one-letter scopes, within the token size
// limit, against the same with a few: scopes_within_grant compares them
// before anything says the signatures verify, so its cost must stay
// linear in the claims.
func BenchmarkForgedScopes(b *testing.B) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	keys, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), sc.Brands(), sc.Agents())
	if err != nil {
		b.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: sc.Audience})
	if err != nil {
		b.Fatal(err)
	}
	forger := pacttest.MustKey(sc.Brand.Key.Kid, jose.ES256)
	for _, n := range []int{3, 2900} {
		r := sc.Mint(pacttest.Spec{})
		used := make([]string, n)
		for i := range used {
			used[i] = "a"
		}
		r.Claims["scopesUsed"] = used
		r.ReceiptJWS = forger.Sign(r.Claims)
		r.TokenClaims["scope"] = strings.Repeat("b ", 2*n)
		r.DelegationToken = forger.Sign(r.TokenClaims)
		in := input(r)
		b.Run(fmt.Sprintf("scopes=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Verify(context.Background(), in, keys); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
