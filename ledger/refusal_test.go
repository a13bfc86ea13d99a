package ledger_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// A refusal posted with the delegation token its request carried keeps
// the token in its evidence and is tied to the token's grant only when
// the token verifies as of the refusal's observedAt: the Brand's
// signature (its key set kept as a snapshot), the Brand's authorization
// server as iss, issued before the refusal, and naming the request JWT's
// agent when one is posted. An expired token still ties the row (a
// refused request under an ended grant is what the record is for); a
// token no trusted signature vouches for ties it to nothing, whatever
// grant it names.
func TestARefusalUnderADelegationToken(t *testing.T) {
	observed := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	forged := pacttest.MustKey("brand-k3", jose.ES256) // the brand's kid, another key
	cases := []struct {
		name string
		// edit changes the refusal; r is a receipt minted for grant
		// a2agrant_7Q2F of acct-48213 at observed.
		edit      func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput)
		tied      bool
		request   verifier.Outcome // request_signature; Pass when zero
		token     verifier.Outcome
		bindings  verifier.Outcome
		detailHas string // in the delegation_token check's detail
	}{
		{name: "token and request JWT of one agent", tied: true, token: verifier.Pass, bindings: verifier.Pass, detailHas: "expires 2026-10-07T14:07:44Z"},
		{name: "no request JWT", edit: func(_ *harness, _ *pacttest.Receipt, in *ledger.RefusalInput) { in.RequestJWT = "" },
			tied: true, request: verifier.Skipped, token: verifier.Pass, bindings: verifier.Skipped},
		{name: "request JWT the agent did not sign", edit: func(_ *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			in.RequestJWT = pacttest.MustKey("pa-2026-09", jose.ES256).Sign(r.RequestClaims)
		}, tied: true, request: verifier.Fail, token: verifier.Pass, bindings: verifier.Skipped},
		{name: "request JWT expired before the refusal", edit: func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			r.RequestClaims["iat"] = observed.Add(-10 * time.Minute).Unix()
			r.RequestClaims["exp"] = observed.Add(-8 * time.Minute).Unix()
			in.RequestJWT = h.sc.PA.Key.Sign(r.RequestClaims)
		}, tied: true, request: verifier.Fail, token: verifier.Pass, bindings: verifier.Skipped},
		{name: "token expired before the refusal", edit: func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			r.TokenClaims["iat"] = observed.Add(-3 * time.Hour).Unix()
			r.TokenClaims["exp"] = observed.Add(-2 * time.Hour).Unix()
			in.DelegationToken = h.sc.Brand.Key.Sign(r.TokenClaims)
		}, tied: true, token: verifier.Pass, bindings: verifier.Pass, detailHas: "expired at 2026-10-07T11:12:44Z, before the refusal's observedAt"},
		{name: "token issued after the refusal", edit: func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			r.TokenClaims["iat"] = observed.Add(10 * time.Minute).Unix()
			in.DelegationToken = h.sc.Brand.Key.Sign(r.TokenClaims)
		}, token: verifier.Fail, bindings: verifier.Skipped, detailHas: "after the refusal's observedAt"},
		{name: "token signed by another key", edit: func(_ *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			in.DelegationToken = forged.Sign(r.TokenClaims)
		}, token: verifier.Fail, bindings: verifier.Skipped},
		{name: "token of a brand the ledger does not trust", edit: func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			r.TokenClaims["aud"] = "https://elsewhere.example/a2a/acme"
			in.DelegationToken = h.sc.Brand.Key.Sign(r.TokenClaims)
		}, token: verifier.Fail, bindings: verifier.Skipped, detailHas: "not trusted"},
		{name: "token of another issuer", edit: func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			r.TokenClaims["iss"] = "https://elsewhere.example"
			in.DelegationToken = h.sc.Brand.Key.Sign(r.TokenClaims)
		}, token: verifier.Fail, bindings: verifier.Skipped, detailHas: "authorization server"},
		{name: "token without a grant_id", edit: func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			delete(r.TokenClaims, "grant_id")
			in.DelegationToken = h.sc.Brand.Key.Sign(r.TokenClaims)
		}, token: verifier.Fail, bindings: verifier.Skipped, detailHas: "grant_id missing"},
		{name: "token of another agent than the request JWT's", edit: func(h *harness, r *pacttest.Receipt, in *ledger.RefusalInput) {
			r.TokenClaims["client_id"] = "https://other-agent.example"
			in.DelegationToken = h.sc.Brand.Key.Sign(r.TokenClaims)
		}, token: verifier.Pass, bindings: verifier.Fail},
		{name: "not a token", edit: func(_ *harness, _ *pacttest.Receipt, in *ledger.RefusalInput) { in.DelegationToken = "not-a-token" },
			token: verifier.Fail, bindings: verifier.Skipped},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			r := h.sc.Mint(pacttest.Spec{At: observed})
			in := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: h.sc.PA.ID, RequestJWT: r.RequestJWT, Tool: "cancel_order", Target: "A-5531",
				Reason: "request under delegation grant a2agrant_7Q2F, which was revoked", ObservedAt: observed, DelegationToken: r.DelegationToken}
			if c.edit != nil {
				c.edit(h, r, &in)
			}
			row, err := h.l.AppendRefusal(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if c.request == 0 {
				c.request = verifier.Pass
			}
			req, tok, bind := checkOf(row, verifier.CheckRequestSignature), checkOf(row, verifier.CheckDelegationToken), checkOf(row, verifier.CheckBindings)
			if req.Result != c.request || tok.Result != c.token || bind.Result != c.bindings || !strings.Contains(tok.Detail, c.detailHas) {
				t.Fatalf("request_signature %s (%s), delegation_token %s (%s), bindings %s (%s); want %s, %s with %q, %s",
					req.Result, req.Detail, tok.Result, tok.Detail, bind.Result, bind.Detail, c.request, c.token, c.detailHas, c.bindings)
			}
			if row.Kind != ledger.KindRefusal || row.Status != ledger.Unauthorized || checkOf(row, verifier.CheckReceiptSignature).Result != verifier.Fail {
				t.Fatalf("row %+v, want an UNAUTHORIZED refusal", row)
			}
			ev, err := h.l.Evidence(ctx, row.ID)
			// Kept in its one encoding (an ES256 signature's low-s form),
			// as a refusal's request JWT is: posted again in the other, it
			// is the same refusal.
			if want := verifier.ParseToken(in.DelegationToken).Canonical(); err != nil || ev.Evidence.Refusal == nil || ev.Evidence.Refusal.DelegationToken != want {
				t.Fatalf("evidence %+v, %v: want the token kept", ev.Evidence.Refusal, err)
			}
			listed, _, err := h.l.List(ctx, ledger.Query{GrantID: "a2agrant_7Q2F"})
			if err != nil {
				t.Fatal(err)
			}
			if !c.tied {
				if row.GrantID != "" || row.Brand != "" || row.Principal != "acct-48213" || len(listed) != 0 {
					t.Fatalf("a token that did not verify tied the row to grant %q (brand %q, %d rows listed under the grant)", row.GrantID, row.Brand, len(listed))
				}
				return
			}
			if row.GrantID != "a2agrant_7Q2F" || row.Principal != "acct-48213" || row.Brand != h.sc.Brand.ID || row.BrandKey.Kid != "brand-k3" ||
				row.BrandKey.JWKSSnapshot == "" || !slices.Equal(row.ScopeGranted, []string{"orders:read", "orders:cancel"}) {
				t.Fatalf("refusal under a verified token: %+v", row)
			}
			if len(listed) != 1 || listed[0].ID != row.ID {
				t.Fatalf("rows under the grant: %d, want the refusal", len(listed))
			}
			// The agent is the grant's when its own signature is on the
			// refused request, bound to the token.
			var agents []string
			if c.request == verifier.Pass && c.bindings == verifier.Pass {
				agents = []string{h.sc.PA.ID}
			}
			g, err := h.l.Grant(ctx, "a2agrant_7Q2F")
			if err != nil || g.RowCount != 1 || !slices.Equal(g.Principals, []string{"acct-48213"}) || !slices.Equal(g.ScopesGranted, []string{"orders:read", "orders:cancel"}) ||
				!slices.Equal(g.Agents, agents) {
				t.Fatalf("grant view %+v, %v; want agents %v", g, err, agents)
			}
			if _, _, err := h.l.Snapshot(ctx, row.BrandKey.JWKSSnapshot); err != nil {
				t.Fatalf("the brand's key set the token was checked against: %v", err)
			}
			rv, err := h.l.VerifyRow(ctx, row.ID)
			if err != nil || !rv.Same {
				t.Fatalf("verify the refusal again: %+v, %v", rv, err)
			}
			again, err := h.l.AppendRefusal(ctx, in)
			if err != nil || again.ID != row.ID {
				t.Fatalf("the refusal posted again: %v, %+v", err, again)
			}
		})
	}
}

// A refusal whose token ties it to a grant the ledger holds a revocation
// of, from before the refusal, says so in its grant_not_revoked check:
// the playbook's signal of an agent acting after the revocation. One
// observed before the revocation passes.
func TestARefusalAfterItsGrantsRevocation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	revoked := time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC)
	if _, err := h.l.RevokeGrant(ctx, "a2agrant_7Q2F", revoked, "revoked by the user", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Time
		want verifier.Outcome
	}{{revoked.Add(time.Minute), verifier.Fail}, {revoked.Add(-time.Minute), verifier.Pass}} {
		r := h.sc.Mint(pacttest.Spec{At: c.at})
		row, err := h.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-48213", ClaimedAgent: h.sc.PA.ID, RequestJWT: r.RequestJWT,
			Tool: "message:send", Reason: "request under a revoked grant", ObservedAt: c.at, DelegationToken: r.DelegationToken})
		if err != nil {
			t.Fatal(err)
		}
		if got := checkOf(row, verifier.CheckGrantNotRevoked); got.Result != c.want || row.GrantID != "a2agrant_7Q2F" {
			t.Fatalf("refusal observed at %s: grant_not_revoked %s (%s), grant %q; want %s", c.at, got.Result, got.Detail, row.GrantID, c.want)
		}
	}
}

// What AppendRefusal refuses of a delegation token, storing nothing: one
// over the token size cap, one not in the canonical encoding. While the
// brand's keys cannot be fetched it stores nothing either, and the writer
// is told to post again.
func TestARefusalsDelegationTokenIsBounded(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	observed := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	r := h.sc.Mint(pacttest.Spec{At: observed})
	base := ledger.RefusalInput{ClaimedPrincipal: "acct-48213", Tool: "message:send", Reason: "refused", ObservedAt: observed}
	for name, tok := range map[string]string{
		"too long":      strings.Repeat("a", verifier.MaxTokenBytes+1),
		"not canonical": r.DelegationToken[:len(r.DelegationToken)-1] + "=",
		"NUL byte":      "a\x00b",
	} {
		in := base
		in.DelegationToken = tok
		if _, err := h.l.AppendRefusal(ctx, in); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	h.sc.Brand.JWKS.Close() // no key set cached: the signature cannot be decided
	in := base
	in.DelegationToken = r.DelegationToken
	if _, err := h.l.AppendRefusal(ctx, in); !errors.Is(err, ledger.ErrKeysUnavailable) {
		t.Fatalf("a refusal whose token's brand keys cannot be fetched: %v, want keys unavailable", err)
	}
	if rows, _, err := h.l.List(ctx, ledger.Query{Principal: "acct-48213"}); err != nil || len(rows) != 0 {
		t.Fatalf("rows after refused posts: %d, %v; want none", len(rows), err)
	}
}
