package verifier_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// An unknown kid is decided only by a refetch that started after it was
// seen. The Provider checks a PA JWT from anyone against the same
// fetcher as the ledger, so a made-up kid starts a refetch of a
// registered agent's keys; an agent that publishes a key and signs with
// it within MinRefetch of that refetch must not get its request JWT
// recorded as signed by an unknown key. It is undecided until a refetch
// of its own, which finds the key.
func TestAnUnknownKidIsNotDecidedByAnEarlierRefetch(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: func() time.Time { return now }})
	ledgerKeys, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	providerKeys, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
	ctx := context.Background()
	if _, err := v.Verify(ctx, input(sc.Mint(pacttest.Spec{At: now})), ledgerKeys); err != nil {
		t.Fatal(err)
	}

	// Anyone: a PA JWT naming the registered agent under a made-up kid.
	claims := map[string]any{"iss": sc.PA.ID, "sub": "x", "aud": sc.Audience, "iat": now.Unix(), "exp": now.Unix() + 60}
	if _, err := v.VerifyPAJWT(ctx, pacttest.MustKey("made-up", jose.ES256).Sign(claims), now, providerKeys); !errors.Is(err, verifier.ErrPAJWT) {
		t.Fatalf("a PA JWT under a made-up kid: %v", err)
	}

	// A second later the agent publishes a new key and signs with it.
	now = now.Add(time.Second)
	k := pacttest.MustKey("pa-2026-12", jose.ES256)
	sc.PA.JWKS.Set(sc.PA.Key, k)
	sc.PA.Key = k
	r := sc.Mint(pacttest.Spec{At: now})
	if res, err := v.Verify(ctx, input(r), ledgerKeys); !errors.Is(err, verifier.ErrUndecided) {
		t.Fatalf("a kid published after the latest refetch started = %v, %v; want undecided", results(res), err)
	}
	// Past MinRefetch the writer's retry starts a refetch, which has it.
	now = now.Add(10 * time.Second)
	res, err := v.Verify(ctx, input(r), ledgerKeys)
	if err != nil {
		t.Fatal(err)
	}
	if got := results(res)[verifier.CheckRequestSignature]; got != verifier.Pass {
		t.Fatalf("request_signature after a refetch of its own = %v: %+v", got, res.Checks)
	}
}

// Receipts posted at once with a kid just published share one refetch:
// the one that started it decides, and the others, which joined it, take
// its set since it holds their kid.
func TestReceiptsJoiningARefetchTakeTheKeyItBrought(t *testing.T) {
	sc, v, reg := primed(t)
	ctx := context.Background()
	k4 := pacttest.MustKey("brand-k4", jose.ES256)
	sc.Brand.JWKS.Set(sc.Brand.Key, k4)
	sc.Brand.Key = k4
	const n = 8
	errs := make(chan error, n)
	for range n {
		r := sc.Mint(pacttest.Spec{})
		go func() {
			res, err := v.Verify(ctx, input(r), reg)
			if err == nil && results(res)[verifier.CheckReceiptSignature] != verifier.Pass {
				err = errors.New("receipt_signature did not pass")
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("a receipt under the brand's new key: %v", err)
		}
	}
}

// A delegation token under a key the brand published since its keys were
// cached brings a newer set, and the receipt is checked again against
// it: that set is the one kept with the row. When it no longer holds the
// receipt's key (withdrawn in between), the verdict waits: undecided.
func TestReceiptAndTokenAreCheckedAgainstOneBrandKeySet(t *testing.T) {
	sc, v, reg := primed(t)
	ctx := context.Background()
	k3, k4 := sc.Brand.Key, pacttest.MustKey("brand-k4", jose.ES256)
	sc.Brand.JWKS.Set(k3, k4)
	r := sc.Mint(pacttest.Spec{})
	r.DelegationToken = k4.Sign(r.TokenClaims)
	res, err := v.Verify(ctx, input(r), reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := results(res); got[verifier.CheckReceiptSignature] != verifier.Pass || got[verifier.CheckDelegationToken] != verifier.Pass {
		t.Fatalf("checks = %v", got)
	}
	if !strings.Contains(string(res.BrandSnapshot.Body), `"brand-k4"`) {
		t.Fatalf("the brand keys kept with the row lack the token's key: %s", res.BrandSnapshot.Body)
	}

	// The receipt's key is withdrawn as the token's next key is published.
	_, reg = newVerifier(t, sc)
	sc.Brand.JWKS.Set(k3)
	if _, err := v.Verify(ctx, input(sc.Mint(pacttest.Spec{})), reg); err != nil {
		t.Fatal(err)
	}
	k5 := pacttest.MustKey("brand-k5", jose.ES256)
	sc.Brand.JWKS.Set(k5)
	r = sc.Mint(pacttest.Spec{})
	r.DelegationToken = k5.Sign(r.TokenClaims)
	if res, err := v.Verify(ctx, input(r), reg); !errors.Is(err, verifier.ErrUndecided) {
		t.Fatalf("a receipt whose key went as its token's came = %v, %v; want undecided", results(res), err)
	}
}

// Within MinRefetch of a refetch, a kid the set holds under another
// algorithm is decided, not undecided: a kid names one key, and a token
// of another algorithm under it is not signed by that key.
func TestAKidOfAnotherAlgorithmIsDecidedWithinMinRefetch(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	v, reg := newVerifier(t, sc)
	ctx := context.Background()
	madeUp := sc.Mint(pacttest.Spec{})
	madeUp.ReceiptJWS = pacttest.MustKey("brand-made-up", jose.ES256).Sign(madeUp.Claims)
	if res, err := v.Verify(ctx, input(madeUp), reg); err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Fail {
		t.Fatalf("a made-up kid, deciding by its own refetch = %v, %v; want FAIL", results(res), err)
	}
	r := sc.Mint(pacttest.Spec{})
	r.ReceiptJWS = pacttest.MustKey(sc.Brand.Key.Kid, jose.RS256).Sign(r.Claims)
	res, err := v.Verify(ctx, input(r), reg)
	if err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Fail {
		t.Fatalf("RS256 under the brand's EC kid within MinRefetch = %v, %v; want FAIL", results(res), err)
	}
}

// primed returns a scenario and a verifier whose keys have been fetched
// for one receipt.
func primed(t *testing.T) (*pacttest.Scenario, *verifier.Verifier, *verifier.Registry) {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	v, reg := newVerifier(t, sc)
	if _, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg); err != nil {
		t.Fatal(err)
	}
	return sc, v, reg
}

// PACT: kid SHOULD match a key, so a brand may sign without kids. A brand
// moving from RS256 to ES256 publishes its EC key; a writer's made-up
// kid-less ES256 receipt moments before started the latest refetch. A
// valid receipt under the new key, within MinRefetch of that refetch,
// must be undecided (retried), never a permanent FAIL.
func TestAKidlessReceiptUnderANewKeyIsNotDecidedByAnEarlierRefetch(t *testing.T) {
	sc, old, v, reg := kidlessBrand(t, jose.RS256)
	ctx := context.Background()
	madeUp := sc.Mint(pacttest.Spec{})
	madeUp.ReceiptJWS = pacttest.MustKey("", jose.ES256).Sign(madeUp.Claims)
	if res, err := v.Verify(ctx, input(madeUp), reg); err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Fail {
		t.Fatalf("made-up kid-less ES256 = %v, %v; want FAIL by its own refetch", results(res), err)
	}
	k := pacttest.MustKey("", jose.ES256)
	sc.Brand.JWKS.Set(old, k)
	sc.Brand.Key = k
	r := sc.Mint(pacttest.Spec{})
	res, err := v.Verify(ctx, input(r), reg)
	if !errors.Is(err, verifier.ErrUndecided) {
		var got any
		if res != nil {
			got = res.Checks[0]
		}
		t.Fatalf("valid receipt under a key published after the latest refetch = %+v, %v; want undecided", got, err)
	}
}

// Without kids, a receipt no cached key of its algorithm verifies may be
// signed by a key the brand published since: it is refetched for, as an
// unknown kid is, and passes under the new key.
func TestAKidlessReceiptUnderANewKeyOfTheSameAlgorithmIsRefetchedFor(t *testing.T) {
	sc, old, v, reg := kidlessBrand(t, jose.ES256)
	ctx := context.Background()
	k := pacttest.MustKey("", jose.ES256)
	sc.Brand.JWKS.Set(old, k)
	sc.Brand.Key = k
	res, err := v.Verify(ctx, input(sc.Mint(pacttest.Spec{})), reg)
	if err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Pass {
		t.Fatalf("valid receipt under the brand's published new kid-less key = %+v, %v; want PASS (after a refetch)", res.Checks[0], err)
	}
}

// kidlessBrand returns a scenario whose brand signs with a key of alg
// without a kid, that key, and a verifier that has checked one receipt
// under it.
func kidlessBrand(t *testing.T, alg jose.SignatureAlgorithm) (*pacttest.Scenario, *pacttest.Key, *verifier.Verifier, *verifier.Registry) {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	old := pacttest.MustKey("", alg)
	sc.Brand.JWKS.Set(old)
	sc.Brand.Key = old
	v, reg := newVerifier(t, sc)
	res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{})), reg)
	if err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Pass {
		t.Fatalf("a receipt under the kidless key: %v %v", results(res), err)
	}
	return sc, old, v, reg
}

// A receipt and its delegation token are signed by one brand key. When
// the brand withdrew it, the receipt's unknown kid starts a refetch,
// which decides it; the token, under the same kid, is decided by that
// refetch too, not left undecided as one within MinRefetch of it: a post
// left undecided is retried for ever, and holds back an in-order
// pipeline's every later receipt.
func TestAReceiptAndTokenUnderAWithdrawnKeyAreDecided(t *testing.T) {
	sc, v, reg, now := primedKeys(t)
	ctx := context.Background()
	queued := sc.Mint(pacttest.Spec{At: *now}) // signed before the rotation
	k := pacttest.MustKey("brand-next", jose.ES256)
	sc.Brand.JWKS.Set(k) // the old key withdrawn
	sc.Brand.Key = k
	*now = now.Add(2 * time.Hour) // past the cached set's last use
	res, err := v.Verify(ctx, input(queued), reg)
	if err != nil {
		t.Fatalf("a receipt and token under a withdrawn key: %v; want decided", err)
	}
	got := results(res)
	if got[verifier.CheckReceiptSignature] != verifier.Fail || got[verifier.CheckDelegationToken] != verifier.Fail {
		t.Errorf("under a withdrawn key: receipt_signature %v, delegation_token %v; want both FAIL", got[verifier.CheckReceiptSignature], got[verifier.CheckDelegationToken])
	}
}

// A signer that replaces its key under the same kid: the cached set still
// holds the old key, which does not verify a receipt signed with the new
// one. That is a reason to refetch, as an unknown kid is, not a FAIL
// decided by a set older than the key (a permanent UNAUTHORIZED row for a
// genuine receipt). A signature no key under its kid verifies in keys
// fetched less than MinRefetch ago, a forgery under a real kid, is decided
// FAIL, with no refetch.
func TestAKeyReplacedUnderItsKidIsRefetched(t *testing.T) {
	sc, v, reg, now := primedKeys(t)
	ctx := context.Background()
	old := sc.Brand.Key
	*now = now.Add(time.Minute) // within the cached set's TTL, past MinRefetch
	k := pacttest.MustKey(old.Kid, jose.ES256)
	sc.Brand.JWKS.Set(k)
	sc.Brand.Key = k
	res, err := v.Verify(ctx, input(sc.Mint(pacttest.Spec{At: *now})), reg)
	if err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Pass || results(res)[verifier.CheckDelegationToken] != verifier.Pass {
		t.Fatalf("a genuine receipt under a key replaced under its kid: %v, %v; want PASS", results(res), err)
	}
	*now = now.Add(time.Second)
	sc.Brand.Key = old // a receipt signed with the key no longer published under the kid
	res, err = v.Verify(ctx, input(sc.Mint(pacttest.Spec{At: *now})), reg)
	if err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Fail {
		t.Errorf("a receipt signed with a key the kid no longer names: %v, %v; want a decided FAIL", results(res), err)
	}
}

// A forgery under a real kid, in keys fetched a while ago, while the
// brand's key endpoint does not answer: the refetch fails, and the keys as
// cached decide it FAIL, as they did before they were asked again; it is
// not left undecided (never recorded) for as long as the endpoint is down.
func TestAForgeryUnderAKnownKidIsDecidedWhileTheKeysCannotBeFetched(t *testing.T) {
	sc, v, reg, now := primedKeys(t)
	*now = now.Add(30 * time.Second)
	sc.Brand.JWKS.Close()
	r := sc.Mint(pacttest.Spec{At: *now})
	r.ReceiptJWS = pacttest.MustKey(sc.Brand.Key.Kid, jose.ES256).Sign(r.Claims)
	res, err := v.Verify(context.Background(), input(r), reg)
	if err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Fail {
		t.Fatalf("a forgery under a known kid, the endpoint down: %v, %v; want a decided FAIL", results(res), err)
	}
}

// primedKeys is a scenario whose keys a verification fetched at *now, a
// time the test moves.
func primedKeys(t *testing.T) (*pacttest.Scenario, *verifier.Verifier, *verifier.Registry, *time.Time) {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true, Now: func() time.Time { return now }})
	reg, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: sc.Audience})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := v.Verify(context.Background(), input(sc.Mint(pacttest.Spec{At: now})), reg); err != nil || results(res)[verifier.CheckReceiptSignature] != verifier.Pass {
		t.Fatalf("priming: %v %v", results(res), err)
	}
	return sc, v, reg, &now
}
