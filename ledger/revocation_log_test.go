package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// Each revocation that changes a grant's record is a leaf of the log, with
// a proof once integrated; a revocation that changes nothing is not.
func TestRevocationIsLogged(t *testing.T) {
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	const grant = "a2agrant_logged"
	writerAt, adminAt := h.clock().Add(-time.Hour), h.clock().Add(-time.Minute)
	if _, err := h.l.RevokeGrant(ctx, grant, writerAt, "reported by the Provider", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.RevokeGrant(ctx, grant, adminAt, "stolen laptop", "admin-key", true); err != nil {
		t.Fatal(err)
	}
	// Later than the writer's and not an admin's: changes nothing.
	if _, err := h.l.RevokeGrant(ctx, grant, adminAt, "again", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	n, err := h.integrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("integrated %d leaves, want 2 (one a revocation that changed the record)", n)
	}
	for _, tc := range []struct {
		at    time.Time
		admin bool
		want  []string
	}{
		{writerAt, false, []string{"kind revocation", "admin no", "revoked " + writerAt.UTC().Format(time.RFC3339Nano)}},
		{adminAt, true, []string{"kind revocation", "admin yes", "revoked " + adminAt.UTC().Format(time.RFC3339Nano)}},
	} {
		b, err := h.l.Proof(ctx, ledger.RevocationRef(grant, tc.at, tc.admin))
		if err != nil {
			t.Fatalf("proof of the revocation as of %s: %v", tc.at, err)
		}
		if _, err := b.Verify(h.logVKey); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.Leaf, w+"\n") {
				t.Errorf("leaf %q: want the line %q", b.Leaf, w)
			}
		}
		// The grant id is a hash in the leaf, as in a row's.
		if strings.Contains(b.Leaf, grant) || !strings.Contains(b.Leaf, "grant sha256:") {
			t.Errorf("leaf %q: want the grant id's hash, not the id", b.Leaf)
		}
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("honest ledger with revocations: %+v", got.Findings)
	}
}

// fsck finds a logged revocation the row store lost or holds later: a
// restore of the row store to before it, or an edit.
func TestIntegrityFindsLostRevocations(t *testing.T) {
	const grant = "a2agrant_lost"
	tests := []struct {
		name string
		edit func(tx *bbolt.Tx) error
		want string
	}{
		{"deleted", tamper.DropRevocation(grant), "the row store holds no revocation of that grant"},
		{"moved later", tamper.EditRevocation(grant, func(r *ledger.Revocation) {
			r.RevokedAt = r.RevokedAt.Add(24 * time.Hour)
			r.AdminRevokedAt = r.AdminRevokedAt.Add(24 * time.Hour)
		}), "records grant " + grant + " revoked as of"},
		{"the admin's dropped", tamper.EditRevocation(grant, func(r *ledger.Revocation) {
			r.AdminRevokedAt, r.AdminBy, r.AdminNote, r.AdminRecordedAt = time.Time{}, "", "", time.Time{}
		}), "records an admin's revocation of grant " + grant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			ctx := context.Background()
			if _, err := h.l.RevokeGrant(ctx, grant, h.clock().Add(-time.Hour), "stolen laptop", "admin-key", true); err != nil {
				t.Fatal(err)
			}
			if _, err := h.l.RevokeGrant(ctx, "a2agrant_other", time.Time{}, "", "writer-key", false); err != nil {
				t.Fatal(err)
			}
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("clean ledger: %+v", got.Findings)
			}
			h.tamper(t, tc.edit)
			got := integrity(t, h)
			var problems []string
			for _, f := range got.Findings {
				problems = append(problems, f.Problem)
			}
			all := strings.Join(problems, "\n")
			if !strings.Contains(all, tc.want) {
				t.Fatalf("findings:\n%s\nwant one with %q", all, tc.want)
			}
			if strings.Contains(all, "a2agrant_other") {
				t.Fatalf("findings name a grant not edited:\n%s", all)
			}
		})
	}
}

// The same revocation recorded again after the row store lost it is put
// back and logs nothing new: its leaf is in the log already, and fsck
// then finds nothing.
func TestRevocationRecordedAgainAfterARestore(t *testing.T) {
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), logs: &syncbuf.Buffer{}, metrics: ledger.NewMetrics(prometheus.NewRegistry())}
	t.Cleanup(h.sc.Close)
	h.open(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	const grant = "a2agrant_again"
	at := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	if _, err := h.l.RevokeGrant(ctx, grant, at, "stolen laptop", "admin-key", true); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.tamper(t, tamper.DropRevocation(grant))
	if got := integrity(t, h); len(got.Findings) != 1 {
		t.Fatalf("revocation lost: want one finding, got %+v", got.Findings)
	}
	if _, err := h.l.RevokeGrant(ctx, grant, at, "put back", "admin-key", true); err != nil {
		t.Fatal(err)
	}
	n, err := h.l.Integrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if refused := testutil.ToFloat64(h.metrics.LogLeavesRefused); n != 0 || refused != 0 {
		t.Fatalf("integrated %d leaves and refused %v, want none: the revocation is logged already, and nothing was queued outside the ledger", n, refused)
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("revocation put back: %+v", got.Findings)
	}
}

// A revocation that carries a Provider's statement new for its brand is a
// leaf of its own, with the hashes of the brand and the statement; fsck
// finds the statement the row store lost or holds later, which the
// embedded Provider would need after a copy of its store from before it
// is put back.
func TestAProvidersStatementIsLoggedAndChecked(t *testing.T) {
	const grant = "a2agrant_stated"
	tests := []struct {
		name string
		edit func(tx *bbolt.Tx) error
		want string
	}{
		{"dropped", tamper.EditRevocation(grant, func(r *ledger.Revocation) { r.ProviderStatements = nil }),
			"records the Provider's signed statement of grant " + grant + "'s revocation as of"},
		{"moved later", tamper.EditRevocation(grant, func(r *ledger.Revocation) {
			r.ProviderStatements[0].RevokedAt = r.ProviderStatements[0].RevokedAt.Add(time.Hour)
		}), "but the row store holds that brand's as of"},
		{"replaced", tamper.EditRevocation(grant, func(r *ledger.Revocation) { r.ProviderStatements[0].Statement = "forged.not.signed" }),
			"but the row store holds another statement of that brand as of that time"},
		// What an operator records after a restore lost the statement: an
		// admin's revocation as of its time, which stops the Provider.
		{"dropped, and an admin's revocation recorded as of its time", func(tx *bbolt.Tx) error {
			return tamper.EditRevocation(grant, func(r *ledger.Revocation) {
				r.ProviderStatements = nil
				r.AdminRevokedAt, r.AdminBy, r.AdminRecordedAt = r.RevokedAt, "admin-key", r.RecordedAt
			})(tx)
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			ctx := context.Background()
			at := h.clock().Add(-time.Hour)
			// A writer's revocation as of the same time first: the
			// statement still changes the record, and is logged.
			if _, err := h.l.RevokeGrant(ctx, grant, at, "", "writer-key", false); err != nil {
				t.Fatal(err)
			}
			stmt := h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, h.statementClaims(grant, at))
			if _, err := h.l.RevokeGrantStated(ctx, grant, at, "revoked on the account page", "writer-key", false, stmt); err != nil {
				t.Fatal(err)
			}
			if n, err := h.integrate(ctx); err != nil || n != 2 {
				t.Fatalf("integrated %d leaves, %v; want 2", n, err)
			}
			b, err := h.l.Proof(ctx, ledger.StatedRevocationRef(grant, at, false, h.sc.Brand.ID, stmt))
			if err != nil {
				t.Fatalf("proof of the stated revocation: %v", err)
			}
			if _, err := b.Verify(h.logVKey); err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"brand sha256:", "statement sha256:", "admin no"} {
				if !strings.Contains(b.Leaf, w) {
					t.Errorf("leaf %q lacks %q", b.Leaf, w)
				}
			}
			if strings.Contains(b.Leaf, h.sc.Brand.ID) || strings.Contains(b.Leaf, stmt) {
				t.Errorf("leaf %q holds the brand or the statement, not their hashes", b.Leaf)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("clean ledger: %+v", got.Findings)
			}
			h.tamper(t, tc.edit)
			var problems []string
			for _, f := range integrity(t, h).Findings {
				problems = append(problems, f.Problem)
			}
			all := strings.Join(problems, "\n")
			if tc.want == "" && all != "" || !strings.Contains(all, tc.want) {
				t.Fatalf("findings:\n%s\nwant one with %q", all, tc.want)
			}
		})
	}
}

// A restore of the row store lost a Provider's statement, and the
// statement is posted again, signed again (another iat, another
// signature): it is a leaf of its own, and fsck finds nothing.
func TestAStatementSignedAgainAfterARestoreIsLogged(t *testing.T) {
	const grant = "a2agrant_again_stated"
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	at := h.clock().Add(-time.Hour)
	first := h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, h.statementClaims(grant, at))
	if _, err := h.l.RevokeGrantStated(ctx, grant, at, "account page", "writer-key", false, first); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.tamper(t, tamper.DropRevocation(grant))
	c := h.statementClaims(grant, at)
	c.IssuedAt += 3600
	again := h.sc.Brand.Key.SignTyp(verifier.RevocationTyp, c)
	if _, err := h.l.RevokeGrantStated(ctx, grant, at, "posted again", "writer-key", false, again); err != nil {
		t.Fatal(err)
	}
	if n, err := h.l.Integrate(ctx); err != nil || n != 1 {
		t.Fatalf("integrated %d leaves, %v; want the statement signed again", n, err)
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("a statement signed again after a restore: %+v", got.Findings)
	}
}
