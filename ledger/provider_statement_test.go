package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
// earliest of its brand, in ProviderStatements; a statement that does not
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
		if len(rev.ProviderStatements) != 1 || !rev.ProviderStatements[0].RevokedAt.Equal(st.wantProv) || !rev.RevokedAt.Equal(st.wantProv) ||
			rev.ProviderStatements[0].Brand != h.sc.Brand.ID || !rev.AdminRevokedAt.IsZero() {
			t.Fatalf("%s: the ledger holds %+v, want the Provider's statement of %s by %s", st.name, rev, st.wantProv.Format(time.RFC3339Nano), h.sc.Brand.ID)
		}
		if st.wantProv.Equal(st.at) != (rev.ProviderStatements[0].Statement == stmt) {
			t.Fatalf("%s: the statement kept is not the earliest's", st.name)
		}
	}
	// A writer's revocation without a statement changes none of it.
	if _, err := h.l.RevokeGrant(ctx, grant, t1.Add(-time.Hour), "", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	if rev, _ := h.l.Revocation(ctx, grant); len(rev.ProviderStatements) != 1 || !rev.ProviderStatements[0].RevokedAt.Equal(t1.Add(-time.Minute)) ||
		!rev.RevokedAt.Equal(t1.Add(-time.Hour)) {
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

// ListRevocations lists every revocation by grant id, a page at a time,
// or those recorded or in force from a time on; a page reads a bounded
// number of revocations and says where to go on when it stopped there.
func TestListRevocations(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	start := h.now
	var all []string
	for i := range 25 {
		g := fmt.Sprintf("a2agrant_%02d", i)
		all = append(all, g)
		h.now = start.Add(time.Duration(i) * time.Hour) // recorded an hour apart
		if _, err := h.l.RevokeGrant(ctx, g, start.Add(-48*time.Hour), "", "writer-key", false); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(since time.Time, size int) (got []string, pages int) {
		tok := ""
		for {
			page, next, err := h.l.ListRevocations(ctx, since, size, tok)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, r := range page {
				got = append(got, r.GrantID)
			}
			if next == "" {
				return got, pages
			}
			if pages > 100 {
				t.Fatal("no end to the pages")
			}
			tok = next
		}
	}
	if got, pages := walk(time.Time{}, 10); !reflect.DeepEqual(got, all) || pages != 3 {
		t.Errorf("every revocation by pages of 10: %q in %d pages, want %q in 3", got, pages, all)
	}
	if got, pages := walk(time.Time{}, 25); !reflect.DeepEqual(got, all) || pages != 1 {
		t.Errorf("a page of 25 of 25: %d in %d pages, want one page without a token", len(got), pages)
	}
	// Recorded from the 20th hour on: the last five.
	if got, _ := walk(start.Add(20*time.Hour), 3); !reflect.DeepEqual(got, all[20:]) {
		t.Errorf("since the 20th: %q, want %q", got, all[20:])
	}
	// A revocation moved earlier later on is recorded then: listed since.
	h.now = start.Add(40 * time.Hour)
	if _, err := h.l.RevokeGrant(ctx, all[3], start.Add(-72*time.Hour), "", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := walk(start.Add(30*time.Hour), 100); !reflect.DeepEqual(got, all[3:4]) {
		t.Errorf("since the 30th: %q, want %q", got, all[3:4])
	}
	// A Provider's statement posted late, dated before since and before
	// the revocation in force, changes only the statements: it is
	// recorded then, and listed since.
	h.now = start.Add(50 * time.Hour)
	stated := h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, h.statementClaims(all[5], start.Add(-47*time.Hour)))
	r, err := h.l.RevokeGrantStated(ctx, all[5], time.Time{}, "", "writer-key", false, stated)
	switch {
	case err != nil:
		t.Fatal(err)
	case !r.RevokedAt.Equal(start.Add(-48*time.Hour)) || len(r.ProviderStatements) != 1 || !r.ProviderStatements[0].RecordedAt.Equal(h.now):
		t.Fatalf("a statement later than the revocation in force: %+v; want it kept, recorded at %s, the revocation as of %s", r, h.now, start.Add(-48*time.Hour))
	}
	if got, _ := walk(start.Add(45*time.Hour), 100); !reflect.DeepEqual(got, all[5:6]) {
		t.Errorf("since the 45th, a statement recorded at the 50th: %q, want %q", got, all[5:6])
	}
	if got, _ := walk(start.Add(51*time.Hour), 100); len(got) != 0 {
		t.Errorf("since the 51st: %q, want none", got)
	}
	// A page reads a bounded number: with a filter few match, it may end
	// with none listed and a token to go on.
	defer ledger.SetMaxRevocationsRead(4)()
	page, next, err := h.l.ListRevocations(ctx, start.Add(41*time.Hour), 3, "")
	if err != nil || len(page) != 0 || next == "" {
		t.Errorf("a first page reading 4 of 25, none of them since: %d listed, next %q, %v; want none and a token", len(page), next, err)
	}
	want := append(append(all[3:4:4], all[5]), all[20:]...)
	if got, pages := walk(start.Add(20*time.Hour), 3); !reflect.DeepEqual(got, want) || pages < 7 {
		t.Errorf("since the 20th, reading 4 a page: %q in %d pages, want %q in 7 or more", got, pages, want)
	}
	if _, _, err := h.l.ListRevocations(ctx, time.Time{}, 10, "not base64!"); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("a page token the ledger did not give: %v, want invalid input", err)
	}
	if _, _, err := h.l.ListRevocations(ctx, time.Time{}, 1001, ""); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("a page of 1001: %v, want invalid input", err)
	}
}

// countingStore counts the revocations its transactions list.
type countingStore struct {
	ledger.Store
	listed *int
}

func (s countingStore) View(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.View(ctx, func(tx ledger.Tx) error { return fn(countingTx{Tx: tx, listed: s.listed}) })
}

type countingTx struct {
	ledger.Tx
	listed *int
}

func (t countingTx) Revocations(fn func(string, *ledger.Revocation) error) error {
	return t.Tx.(ledger.RevocationLister).Revocations(fn)
}

func (t countingTx) RevocationsAfter(after string, limit int, fn func(string, *ledger.Revocation) error) error {
	return t.Tx.(ledger.RevocationLister).RevocationsAfter(after, limit, func(g string, r *ledger.Revocation) error {
		*t.listed++
		return fn(g, r)
	})
}

// A page of ListRevocations with since stops reading once it is full and
// knows another follows: it does not read on to its bound.
func TestAFullPageOfRevocationsReadsNoFurther(t *testing.T) {
	listed := 0
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC),
		wrap: func(s ledger.Store) ledger.Store { return countingStore{Store: s, listed: &listed} }}
	t.Cleanup(h.sc.Close)
	h.open(t)
	ctx := context.Background()
	for i := range 600 {
		if _, err := h.l.RevokeGrant(ctx, fmt.Sprintf("a2agrant_%03d", i), time.Time{}, "", "writer-key", false); err != nil {
			t.Fatal(err)
		}
	}
	listed = 0
	page, next, err := h.l.ListRevocations(ctx, h.now.Add(-time.Hour), 1, "")
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("a page of one since an hour ago: %d, %q, %v", len(page), next, err)
	}
	if listed > 300 {
		t.Errorf("a page of one read %d revocations, want it to stop about once full (a chunk of 256 at most)", listed)
	}
}
