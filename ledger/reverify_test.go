package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// reverifyOf runs row id's checks again as one outside the ledger would,
// from its row, its evidence and its snapshots, with a verifier holding
// request JWTs to audience.
func reverifyOf(t *testing.T, h *harness, id, audience string, edit func(r *ledger.Row)) *ledger.Reverification {
	t.Helper()
	ctx := context.Background()
	r, err := h.l.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := h.l.Evidence(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func(id string) *verifier.Snapshot {
		if id == "" {
			return nil
		}
		s, _, err := h.l.Snapshot(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return &s
	}
	v, err := verifier.New(verifier.Config{Audience: audience, CheckedBy: "outside"})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(r)
	}
	return ledger.Reverify(ctx, v, r, &ev.Evidence, ev.SHA256, snapshot(r.BrandKey.JWKSSnapshot), snapshot(r.Agent.JWKSSnapshot))
}

// A row's checks run again as of the audience its request JWT was held
// to, whatever the audience of the one who runs them: one that passed
// passes under another, and one that failed on its audience fails again
// under the audience it named.
func TestReverifyHoldsARowToTheAudienceOfItsTime(t *testing.T) {
	h := newHarness(t)
	passed, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	if passed.Status != ledger.Authorized {
		t.Fatalf("the honest row: %v", passed.Status)
	}
	r := h.sc.Mint(pacttest.Spec{Target: "A-2"})
	r.RequestClaims["aud"] = "urn:another-provider"
	h.sc.Resign(r)
	failed, _ := h.append(t, in(r))
	if failed.Status != ledger.Unauthorized {
		t.Fatalf("the row for another audience: %v", failed.Status)
	}
	for _, tc := range []struct {
		id, audience string
	}{
		{passed.ID, h.sc.Audience}, {passed.ID, "urn:another-provider"},
		{failed.ID, h.sc.Audience}, {failed.ID, "urn:another-provider"},
	} {
		if rv := reverifyOf(t, h, tc.id, tc.audience, nil); !rv.Same {
			t.Errorf("row %s run again under the audience %s: %v", tc.id, tc.audience, rv.Differences)
		}
	}
}

// Run again with the keys of its snapshots, a row's fields are compared
// with what its signatures give, its key ids too; and a row that says
// its checks passed where its signature does not verify is found.
func TestReverifyFindsWhatTheRowSaysAndTheSignaturesDoNot(t *testing.T) {
	h := newHarness(t)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	rv := reverifyOf(t, h, row.ID, h.sc.Audience, func(r *ledger.Row) { r.BrandKey.Kid = "another-kid" })
	if want := "the row's brand key id is another-kid; its evidence says brand-k3"; rv.Same || len(rv.Edited) != 1 || !strings.Contains(rv.Edited[0], want) {
		t.Errorf("a row whose brand key id was edited: same %v, edited %q; want one edit saying %q", rv.Same, rv.Edited, want)
	}

	r := h.sc.Mint(pacttest.Spec{Target: "A-2"})
	r.ReceiptJWS = r.ReceiptJWS[:strings.LastIndex(r.ReceiptJWS, ".")+1] + strings.Repeat("A", 86) // a signature its brand never made
	refused, _ := h.append(t, in(r))
	rv = reverifyOf(t, h, refused.ID, h.sc.Audience, func(r *ledger.Row) {
		r.Status = ledger.Authorized
		for i := range r.Verifier.Checks {
			r.Verifier.Checks[i].Result = verifier.Pass
		}
	})
	if rv.Same || !strings.Contains(strings.Join(rv.Differences, "\n"), "receipt_signature was PASS at write time, now FAIL") {
		t.Errorf("a row that says its receipt's signature verified: same %v, %q", rv.Same, rv.Differences)
	}
}

// A delegation token whose iss is not its brand's issuer fails on it,
// and its check's detail names the issuer it was held to within what an
// answer carries of a detail, whatever iss the token carries; a detail
// cut before that issuer (as rows written before quoted the iss whole)
// runs again as a failure on the issuer, as at write time, not as a
// pass.
func TestReverifyOfATokenFailedOnALongIssuer(t *testing.T) {
	h := newHarness(t)
	r := h.sc.Mint(pacttest.Spec{Target: "A-3"})
	r.TokenClaims["iss"] = "https://other.example/" + strings.Repeat("a", 3000)
	h.sc.Resign(r)
	row, _ := h.append(t, in(r))
	var detail string
	for _, c := range row.Verifier.Checks {
		if c.Name == verifier.CheckDelegationToken {
			detail = c.Detail
		}
	}
	if iss, ok := verifier.IssuerHeldTo(detail); !ok || len(detail) > 1024 || !strings.Contains(detail, "bytes more)") {
		t.Fatalf("the detail of a token failed on a 3 KB iss: %d bytes, issuer held to %q (%v): %.300q", len(detail), iss, ok, detail)
	}
	if rv := reverifyOf(t, h, row.ID, h.sc.Audience, nil); !rv.Same {
		t.Errorf("the row run again: %v", rv.Differences)
	}
	// The detail as rows written before quoted the iss, cut as answers
	// cut it.
	cut := `iss "https://other.example/` + strings.Repeat("a", 2020) + `… (1040 bytes more)`
	rv := reverifyOf(t, h, row.ID, h.sc.Audience, func(r *ledger.Row) {
		for i, c := range r.Verifier.Checks {
			if c.Name == verifier.CheckDelegationToken {
				r.Verifier.Checks[i].Detail = cut
			}
		}
	})
	if !rv.Same {
		t.Errorf("the row with its detail cut before the issuer it was held to, run again: %v", rv.Differences)
	}

	// A token whose iss is any string the re-run could hold it to fails
	// again all the same.
	r = h.sc.Mint(pacttest.Spec{Target: "A-4"})
	r.TokenClaims["iss"] = "urn:pactledger:reverify:the-issuer-a-cut-detail-named"
	h.sc.Resign(r)
	row, _ = h.append(t, in(r))
	rv = reverifyOf(t, h, row.ID, h.sc.Audience, func(r *ledger.Row) {
		for i, c := range r.Verifier.Checks {
			if c.Name == verifier.CheckDelegationToken {
				r.Verifier.Checks[i].Detail = `iss "urn:pactledger:reverify:the-issuer-a-cut-detail-named" is not the brand's authorization server "https://provider.example.com/` + strings.Repeat("b", 2000) + `… (40 bytes more)`
			}
		}
	})
	if !rv.Same {
		t.Errorf("a token whose iss names the issuer a cut detail is held to, run again: %v", rv.Differences)
	}
}
