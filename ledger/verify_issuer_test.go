package ledger_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// A delegation token is held to the brand's authorization server as iss.
// VerifyRow holds a stored token that failed on its iss to the issuer its
// write-time check names: an untouched row re-verifies as written, and a
// row whose record was edited to name the token's own iss does not.
func TestVerifyRowHoldsTheTokenToItsWriteTimeIssuer(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	const elsewhere = "https://elsewhere.example"

	honest, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	other := h.sc.Mint(pacttest.Spec{Target: "A-2"})
	other.TokenClaims["iss"] = elsewhere
	other.DelegationToken = h.sc.Brand.Key.Sign(other.TokenClaims)
	wrongIss, _ := h.append(t, in(other))
	refused := h.sc.Mint(pacttest.Spec{Target: "A-3"})
	refused.TokenClaims["iss"] = elsewhere
	refusal, err := h.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: h.sc.PA.ID, Tool: "cancel_order", Target: "A-3",
		Reason: "grant revoked", ObservedAt: h.clock(), RequestJWT: refused.RequestJWT, DelegationToken: h.sc.Brand.Key.Sign(refused.TokenClaims)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		row  *ledger.Row
		tok  verifier.Outcome
	}{
		{"a token held to the brand's issuer", honest, verifier.Pass},
		{"a receipt's token of another issuer", wrongIss, verifier.Fail},
		{"a refusal's token of another issuer", refusal, verifier.Fail},
	} {
		if got := checkOf(c.row, verifier.CheckDelegationToken); got.Result != c.tok {
			t.Fatalf("%s: delegation_token %s (%s), want %s", c.name, got.Result, got.Detail, c.tok)
		}
		sameOnVerify(t, h, c.name, c.row.ID, true)
	}

	// The write-time record edited to name the token's iss as the
	// brand's authorization server.
	for _, r := range []*ledger.Row{wrongIss, refusal} {
		h.tamper(t, tamper.EditRow(r.ID, func(r *ledger.Row) {
			for i, c := range r.Verifier.Checks {
				if c.Name == verifier.CheckDelegationToken {
					r.Verifier.Checks[i].Detail = strings.Replace(c.Detail, strconv.Quote(h.sc.AuthServer), strconv.Quote(elsewhere), 1)
				}
			}
		}))
	}
	sameOnVerify(t, h, "a receipt whose record names the token's iss", wrongIss.ID, false)
	sameOnVerify(t, h, "a refusal whose record names the token's iss", refusal.ID, false)
}

func sameOnVerify(t *testing.T, h *harness, name, id string, want bool) {
	t.Helper()
	rv, err := h.l.VerifyRow(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rv.Same != want {
		t.Errorf("%s: VerifyRow same = %v, want %v; differences:\n%s", name, rv.Same, want, strings.Join(rv.Differences, "\n"))
	}
}
