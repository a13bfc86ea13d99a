package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// A re-encoded token is refused and a malleated ES256 signature is the same
// receipt: neither is ever a second AUTHORIZED row.
func TestDedupeOnWhatWasSigned(t *testing.T) {
	h := newHarness(t)
	r := h.sc.Mint(pacttest.Spec{Target: "A-100"})
	first, _ := h.append(t, in(r))
	if first.Status != ledger.Authorized {
		t.Fatalf("first: %v", first.Status)
	}

	t.Run("malleated receipt", func(t *testing.T) {
		m := in(r)
		m.ReceiptJWS = pacttest.MalleateES256(r.ReceiptJWS)
		row, o := h.append(t, m)
		if o != ledger.DuplicateRecorded || row.Status != ledger.Duplicate || row.Verifier.DuplicateOf != first.ID {
			t.Fatalf("got %v %v of %q, want a duplicate of %s", o, row.Status, row.Verifier.DuplicateOf, first.ID)
		}
		// Malleating it back is the first receipt's bytes again.
		back := in(r)
		back.ReceiptJWS = pacttest.MalleateES256(m.ReceiptJWS)
		if row, o := h.append(t, back); o != ledger.AlreadyRecorded || row.ID != first.ID {
			t.Fatalf("malleated twice: %v %s", o, row.ID)
		}
	})
	t.Run("malleated request JWT with another receipt", func(t *testing.T) {
		other := h.sc.Mint(pacttest.Spec{Target: "A-101", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
		other.RequestJWT = pacttest.MalleateES256(r.RequestJWT)
		row, o := h.append(t, in(other))
		if o != ledger.DuplicateRecorded || row.Verifier.DuplicateOf != first.ID {
			t.Fatalf("got %v of %q, want a duplicate of %s", o, row.Verifier.DuplicateOf, first.ID)
		}
	})
	t.Run("malleated delegation token", func(t *testing.T) {
		m := in(r)
		m.DelegationToken = pacttest.MalleateES256(r.DelegationToken)
		row, o := h.append(t, m)
		if o != ledger.DuplicateRecorded || row.Verifier.DuplicateOf != first.ID {
			t.Fatalf("got %v of %q", o, row.Verifier.DuplicateOf)
		}
	})
	for i, name := range []string{"receiptJws", "requestJwt", "delegationToken"} {
		for _, enc := range []struct {
			name string
			f    func(string) (string, bool)
		}{{"non-zero unused bits", pacttest.NonCanonicalTail}, {"padding", pacttest.Padded}, {"line break", pacttest.Insert("\n")}} {
			t.Run(name+" "+enc.name, func(t *testing.T) {
				m := in(r)
				field := []*string{&m.ReceiptJWS, &m.RequestJWT, &m.DelegationToken}[i]
				changed := false
				for seg := 0; seg < 3 && !changed; seg++ {
					*field, changed = pacttest.ReplaceSegment(*field, seg, enc.f)
				}
				if !changed {
					t.Skip("no segment of this token can carry that encoding")
				}
				_, _, err := h.l.AppendReceipt(context.Background(), m)
				if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), name) {
					t.Fatalf("got %v, want ErrInvalid naming %s", err, name)
				}
			})
		}
	}
}

// A forged receipt or a refusal backdated by years is kept its full class
// from the time the ledger recorded it.
func TestUnverifiedTimesNeverShortenRetention(t *testing.T) {
	h := newHarness(t)
	now := h.clock()
	forged := h.sc.Mint(pacttest.Spec{Target: "F-1", At: now.AddDate(-3, 0, 0)})
	forged.ReceiptJWS = pacttest.MustKey("brand-k3", jose.ES256).Sign(forged.Claims)
	row, _ := h.append(t, in(forged))
	if row.Status != ledger.Unauthorized || row.Class != retention.Refused || !row.RetainUntil.Equal(now.AddDate(0, 12, 0)) {
		t.Fatalf("forged: %v %v until %v, want refused until %v", row.Status, row.Class, row.RetainUntil, now.AddDate(0, 12, 0))
	}
	ref, err := h.l.AppendRefusal(context.Background(), ledger.RefusalInput{Tool: "change_address", Target: "acct-1", Reason: "chat yes", ObservedAt: now.AddDate(-5, 0, 0)})
	if err != nil || !ref.RetainUntil.Equal(now.AddDate(0, 12, 0)) {
		t.Fatalf("refusal: %v until %v", err, ref.RetainUntil)
	}
	// Neither is swept a day later, nor eleven months later.
	for _, at := range []time.Time{now.AddDate(0, 0, 1), now.AddDate(0, 11, 0)} {
		h.set(at)
		res, err := h.l.Sweep(context.Background(), true)
		if err != nil || len(res.Swept) != 0 {
			t.Fatalf("sweep at %v: %v %+v", at, err, res.Swept)
		}
	}
	// A valid receipt posted late counts from when it was recorded too.
	h.set(now)
	late, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "L-1", At: now.AddDate(0, 0, -30)})))
	if late.Status != ledger.Authorized || !late.RetainUntil.Equal(now.AddDate(0, 18, 0)) {
		t.Fatalf("late: %v until %v", late.Status, late.RetainUntil)
	}
}

func TestTimesAtTheEdges(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, ts := range []string{"0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z", "1e300"} {
		r := h.sc.Mint(pacttest.Spec{Target: "T-" + ts})
		r.Claims["ts"] = ts
		h.sc.Resign(r)
		if _, _, err := h.l.AppendReceipt(ctx, in(r)); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("ts %s: %v, want ErrInvalid", ts, err)
		}
	}
	for _, at := range []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), h.clock().Add(25 * time.Hour)} {
		if _, err := h.l.AppendRefusal(ctx, ledger.RefusalInput{Tool: "x", Reason: "r", ObservedAt: at}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("observedAt %v: %v, want ErrInvalid", at, err)
		}
	}
	// JWT times a buggy signer wrote: a FAIL check quoting the value.
	for i, v := range []any{1e300, -1e300, 253402300800, -62135596801} {
		for _, claim := range []string{"iat", "exp", "nbf"} {
			for _, tokName := range []string{"request", "token"} {
				r := h.sc.Mint(pacttest.Spec{Target: "J-" + claim + tokName, Jti: claim + tokName + string(rune('a'+i))})
				claims, check := r.RequestClaims, verifier.CheckRequestSignature
				if tokName == "token" {
					claims, check = r.TokenClaims, verifier.CheckDelegationToken
				}
				claims[claim] = v
				h.sc.Resign(r)
				row, o, err := h.l.AppendReceipt(ctx, in(r))
				if err != nil {
					t.Fatalf("%s %s=%v: %v", tokName, claim, v, err)
				}
				c := checkOf(row, check)
				if o == ledger.AlreadyRecorded || row.Status != ledger.Unauthorized || c.Result != verifier.Fail || !strings.Contains(c.Detail, claim) {
					t.Errorf("%s %s=%v: %v %v, check %+v", tokName, claim, v, o, row.Status, c)
				}
				if _, err := h.l.Get(ctx, row.ID); err != nil {
					t.Errorf("read back: %v", err)
				}
				if !row.Limits.GrantExpires.IsZero() && !verifier.InRange(row.Limits.GrantExpires) {
					t.Errorf("grant expiry %v out of range", row.Limits.GrantExpires)
				}
			}
		}
	}
}

func checkOf(r *ledger.Row, name string) verifier.Check { return check(r, name) }

func TestLimitsAreFiniteDecimals(t *testing.T) {
	h := newHarness(t)
	for i, tc := range []struct {
		max  string
		want verifier.Outcome
	}{
		{"NaN", verifier.Skipped}, {"nan", verifier.Skipped}, {"Inf", verifier.Skipped}, {"+Inf", verifier.Skipped},
		{"-Inf", verifier.Skipped}, {"Infinity", verifier.Skipped}, {"1e999", verifier.Skipped}, {"0x10", verifier.Skipped},
		{"1_000", verifier.Skipped}, {"100", verifier.Pass}, {"10", verifier.Fail}, {"1.5e2", verifier.Pass},
	} {
		target := "L-" + string(rune('a'+i))
		r := h.sc.Mint(pacttest.Spec{Target: target, GrantID: "a2agrant_L" + target, ArgsJSON: `{"order":"` + target + `","amount":50}`})
		ri := in(r)
		ri.Limits = &ledger.Limits{AmountMax: tc.max}
		row, _ := h.append(t, ri)
		if c := check(row, verifier.CheckWithinLimits); c.Result != tc.want {
			t.Errorf("amountMax %q: %+v, want %v", tc.max, c, tc.want)
		}
	}
}

func TestClassFromScopesUsed(t *testing.T) {
	h := newHarness(t)
	r := h.sc.Mint(pacttest.Spec{Target: "S-1"})
	r.Claims["actions"] = []any{}
	h.sc.Resign(r)
	ri := in(r)
	ri.Actions = nil
	row, _ := h.append(t, ri)
	if row.Status != ledger.Authorized || row.Class != retention.MoneyMoved {
		t.Fatalf("no actions, scope orders:cancel: %v %v, want authorized money_moved", row.Status, row.Class)
	}
}

// An incident opened between the sweep's decision and its deleting
// transaction keeps the row.
func TestSweepDecidesAgainWhenDeleting(t *testing.T) {
	h := newHarness(t)
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	h.set(t0)
	due, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "D-1", At: t0})))
	h.drain(t)
	h.set(t0.AddDate(0, 19, 0))
	var once sync.Once
	var incident *ledger.Row
	defer ledger.SetSweepHook(func() {
		once.Do(func() {
			incident, _ = h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "D-2", At: t0.Add(time.Minute), ScopesUsed: []string{"plan:change"}})))
		})
	})()
	res, err := h.l.Sweep(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if incident == nil || incident.Status != ledger.Incident {
		t.Fatalf("the hook did not open an incident: %+v", incident)
	}
	if len(res.Swept) != 0 || len(res.Kept) != 1 || !strings.Contains(res.Kept[0].Kept, "incident") {
		t.Fatalf("swept %+v kept %+v", res.Swept, res.Kept)
	}
	if _, err := h.l.Get(context.Background(), due.ID); err != nil {
		t.Fatalf("the held row is gone: %v", err)
	}
}

// TestSignedClaimsWithNULAreRefused: a NUL byte in a signed claim that
// becomes a row's field (the receipt's user, grant, agent, brand or
// scopes; a refusal's request JWT issuer) is refused with nothing
// stored, as a NUL byte in a posted field is: a PostgreSQL text column
// cannot hold one, so every store refuses it alike (docs/design/012,
// rule 3).
func TestSignedClaimsWithNULAreRefused(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		claim string
		value any
	}{
		{"user", "user", "acct-1\x00"},
		{"grant", "grantId", "grant\x00x"},
		{"agent", "pa", "https://agent.example\x00"},
		{"brand", "brand", "https://brand.example/\x00"},
		{"scopes", "scopesUsed", []string{"orders:read\x00"}},
	} {
		r := h.sc.Mint(pacttest.Spec{Target: "N-" + c.name})
		r.Claims[c.claim] = c.value
		h.sc.Resign(r)
		row, _, err := h.l.AppendReceipt(ctx, in(r))
		if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("%s with a NUL byte: row %v, %v; want it refused as invalid", c.name, row != nil, err)
		}
	}
	r := h.sc.Mint(pacttest.Spec{Target: "N-refusal"})
	r.RequestClaims["iss"] = "https://agent.example\x00"
	h.sc.Resign(r)
	row, err := h.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedAgent: "agent", Tool: "issue_refund", Reason: "no receipt", RequestJWT: r.RequestJWT, ObservedAt: h.clock()})
	if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("a refusal whose request JWT's iss holds a NUL byte: row %v, %v; want it refused as invalid", row != nil, err)
	}
	if rows, _, err := h.l.List(ctx, ledger.Query{PageSize: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("rows stored: %d, %v; want none", len(rows), err)
	}
}
