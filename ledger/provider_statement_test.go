package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// statementClaims are a revocation statement's claims for the harness's
// brand.
func (h *harness) statementClaims(grant string, at time.Time) verifier.RevocationClaims {
	return verifier.RevocationClaims{Issuer: h.sc.AuthServer, Brand: h.sc.Brand.ID, GrantID: grant,
		RevokedAt: at.UTC().Format(time.RFC3339Nano), IssuedAt: h.now.Unix()}
}

// A Provider's signed statement of a revocation is kept with it, the
// earliest one, and sets ProviderRevokedAt; a statement that does not
// verify with the brand's keys, or says another grant or time than the
// revocation, records nothing: a writer key cannot make the Provider
// honour a revocation it did not make.
func TestAProvidersStatementIsCheckedAndKept(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const grant = "a2agrant_S1"
	t1 := time.Date(2026, 10, 7, 13, 10, 0, 123456789, time.UTC)
	good := h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, h.statementClaims(grant, t1))

	other := pacttest.MustKey(h.sc.Brand.Key.Kid, jose.ES256) // the brand's kid, another key
	hmac, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(strings.Repeat("k", 32))},
		(&jose.SignerOptions{}).WithType(verifier.RevocationTyp).WithHeader("kid", h.sc.Brand.Key.Kid))
	if err != nil {
		t.Fatal(err)
	}
	hs, err := hmac.Sign([]byte(`{"iss":"` + h.sc.AuthServer + `","brand":"` + h.sc.Brand.ID + `","grant_id":"` + grant + `","revoked_at":"2026-10-07T13:10:00Z","iat":1}`))
	if err != nil {
		t.Fatal(err)
	}
	hsCompact, _ := hs.CompactSerialize()
	withClaims := func(edit func(*verifier.RevocationClaims)) string {
		c := h.statementClaims(grant, t1)
		edit(&c)
		return h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, c)
	}
	refused := []struct {
		name, statement string
		at              time.Time
		want            string
	}{
		{"signed by another key", other.SignTyp(verifier.RevocationTyp, h.statementClaims(grant, t1)), time.Time{}, "signature"},
		{"signed with HS256", hsCompact, time.Time{}, "alg"},
		{"a receipt's typ", h.sc.Brand.Key.Sign(h.statementClaims(grant, t1)), time.Time{}, "typ"},
		{"of another grant", h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, h.statementClaims("a2agrant_OTHER", t1)), time.Time{}, "a2agrant_OTHER"},
		{"of another time", good, t1.Add(-time.Nanosecond), "revokedAt"},
		{"of another issuer", withClaims(func(c *verifier.RevocationClaims) { c.Issuer = "https://evil.example" }), time.Time{}, "issuer"},
		{"of a brand not trusted", withClaims(func(c *verifier.RevocationClaims) { c.Brand = "https://evil.example/a2a/acme" }), time.Time{}, "not a trusted brand"},
		{"without a time", withClaims(func(c *verifier.RevocationClaims) { c.RevokedAt = "" }), time.Time{}, "revoked_at"},
		{"without iat", withClaims(func(c *verifier.RevocationClaims) { c.IssuedAt = 0 }), time.Time{}, "iat"},
		{"not a JWS", "a.b", time.Time{}, "malformed"},
	}
	for _, c := range refused {
		_, err := h.l.RevokeGrantStated(ctx, grant, c.at, "", "writer-key", false, c.statement)
		if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a statement %s: %v, want invalid input saying %q", c.name, err, c.want)
		}
		if rev, err := h.l.Revocation(ctx, grant); err != nil || rev != nil {
			t.Fatalf("after a statement %s the ledger holds %+v, %v; want nothing", c.name, rev, err)
		}
	}

	steps := []struct {
		name     string
		at       time.Time
		wantProv time.Time
	}{
		{"the first", t1, t1},
		{"a later one", t1.Add(time.Minute), t1},
		{"an earlier one", t1.Add(-time.Minute), t1.Add(-time.Minute)},
	}
	for _, st := range steps {
		stmt := h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, h.statementClaims(grant, st.at))
		// The request's time may be left out: it is the statement's.
		if _, err := h.l.RevokeGrantStated(ctx, grant, time.Time{}, "revoked on the account page", "writer-key", false, stmt); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		rev, err := h.l.Revocation(ctx, grant)
		if err != nil {
			t.Fatal(err)
		}
		if !rev.ProviderRevokedAt.Equal(st.wantProv) || !rev.RevokedAt.Equal(st.wantProv) || rev.ProviderBrand != h.sc.Brand.ID || !rev.AdminRevokedAt.IsZero() {
			t.Fatalf("%s: the ledger holds %+v, want the Provider's statement of %s by %s", st.name, rev, st.wantProv.Format(time.RFC3339Nano), h.sc.Brand.ID)
		}
		if st.wantProv.Equal(st.at) != (rev.ProviderStatement == stmt) {
			t.Fatalf("%s: the statement kept is not the earliest's", st.name)
		}
	}
	// A writer's revocation without a statement changes none of it.
	if _, err := h.l.RevokeGrant(ctx, grant, t1.Add(-time.Hour), "", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	if rev, _ := h.l.Revocation(ctx, grant); !rev.ProviderRevokedAt.Equal(t1.Add(-time.Minute)) || !rev.RevokedAt.Equal(t1.Add(-time.Hour)) {
		t.Fatalf("after a writer's earlier revocation the ledger holds %+v", rev)
	}
}

// A statement checked while its brand's keys cannot be fetched records
// nothing, and says the keys are unavailable: the pipeline posts it again.
func TestAStatementWhoseKeysCannotBeFetchedIsNotRecorded(t *testing.T) {
	h := newHarness(t)
	h.sc.Brand.JWKS.Close()
	stmt := h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, h.statementClaims("a2agrant_S2", h.now))
	_, err := h.l.RevokeGrantStated(context.Background(), "a2agrant_S2", time.Time{}, "", "writer-key", false, stmt)
	if !errors.Is(err, ledger.ErrKeysUnavailable) {
		t.Fatalf("got %v, want ErrKeysUnavailable", err)
	}
	if rev, err := h.l.Revocation(context.Background(), "a2agrant_S2"); err != nil || rev != nil {
		t.Fatalf("the ledger holds %+v, %v; want nothing", rev, err)
	}
}
