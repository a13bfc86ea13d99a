package verifier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// onGrant is a key source that knows the scenario's agent only on a
// brand's grant (GrantedAgent), as the ledger knows an open agent the
// embedded Provider took; it counts the grants it was asked about.
type onGrant struct {
	verifier.KeySource
	sc    *pacttest.Scenario
	asked []string
}

func (o *onGrant) Agent(_ context.Context, iss string, _ bool) (verifier.Signer, error) {
	return verifier.Signer{}, fmt.Errorf("%w: agent %s is not registered", verifier.ErrUntrusted, iss)
}

func (o *onGrant) GrantedAgent(ctx context.Context, brand, iss string, refresh bool) (verifier.Signer, error) {
	o.asked = append(o.asked, brand+" "+iss)
	return o.KeySource.Agent(ctx, iss, refresh)
}

// A GrantedAgentSource is asked for the agent's keys only when the
// delegation token verified against the brand's keys and names, as its
// client_id, the agent whose request JWT it came with; the brand asked
// about is the one the token's aud names. Otherwise Agent answers.
func TestGrantedAgentIsAskedOnlyOnAVerifiedGrant(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	defer sc.Close()
	v, err := verifier.New(verifier.Config{Audience: sc.Audience})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Minute)
	verify := func(r *pacttest.Receipt) (map[string]verifier.Outcome, []string) {
		t.Helper()
		src := &onGrant{KeySource: sc.Static(time.Now()), sc: sc}
		res, err := v.Verify(context.Background(), input(r), src)
		if err != nil {
			t.Fatal(err)
		}
		return results(res), src.asked
	}

	got, asked := verify(sc.Mint(pacttest.Spec{At: at}))
	if got[verifier.CheckRequestSignature] != verifier.Pass || len(asked) != 1 || asked[0] != sc.Brand.ID+" "+sc.PA.ID {
		t.Fatalf("a receipt under a verified grant: %v, asked %q", got, asked)
	}

	forged := sc.Mint(pacttest.Spec{At: at})
	forged.DelegationToken = pacttest.TamperSignature(forged.DelegationToken)
	if got, asked := verify(forged); got[verifier.CheckDelegationToken] != verifier.Fail || got[verifier.CheckRequestSignature] != verifier.Fail || len(asked) != 0 {
		t.Fatalf("a receipt whose token does not verify: %v, asked %q", got, asked)
	}

	other := sc.Mint(pacttest.Spec{At: at})
	other.TokenClaims["client_id"] = "https://another-agent.example"
	sc.Resign(other)
	if got, asked := verify(other); got[verifier.CheckDelegationToken] != verifier.Pass || got[verifier.CheckRequestSignature] != verifier.Fail || len(asked) != 0 {
		t.Fatalf("a receipt whose token grants another agent: %v, asked %q", got, asked)
	}

	// A refusal: the same rule.
	r := sc.Mint(pacttest.Spec{At: at})
	for _, c := range []struct {
		name  string
		token string
		want  verifier.Outcome
		asks  int
	}{
		{"a verified grant", r.DelegationToken, verifier.Pass, 1},
		{"a token that does not verify", pacttest.TamperSignature(r.DelegationToken), verifier.Fail, 0},
		{"a grant to another agent", other.DelegationToken, verifier.Fail, 0},
	} {
		src := &onGrant{KeySource: sc.Static(time.Now()), sc: sc}
		tok, err := v.VerifyRefusalToken(context.Background(), verifier.ParseToken(c.token), verifier.ParseToken(r.RequestJWT), at, src)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Request.Result != c.want || len(src.asked) != c.asks {
			t.Errorf("a refusal with %s: request_signature %s (%s), asked %q", c.name, tok.Request.Result, tok.Request.Detail, src.asked)
		}
	}
}
