package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// revocationView is a grant's revocation as GetGrant shows it.
type revocationView struct {
	RevokedAt         string `json:"revokedAt"`
	By                string `json:"by"`
	AdminRevokedAt    string `json:"adminRevokedAt"`
	ProviderRevokedAt string `json:"providerRevokedAt"`
	ProviderBrand     string `json:"providerBrand"`
	ProviderStatement string `json:"providerStatement"`
}

// grantRevocation is the revocation the ledger holds for grant.
func (s *shop) grantRevocation(t *testing.T, grant string) revocationView {
	t.Helper()
	var view struct{ Revocation revocationView }
	if code := s.call(t, "GET", "/v1/grants/"+grant, "support", nil, &view); code != 200 {
		t.Fatalf("GetGrant %s: %d", grant, code)
	}
	return view.Revocation
}

// A customer revokes a grant on the account page; the Provider's store is
// then put back from a copy made before the revocation, which holds the
// grant active. The revocation the Provider posted carried its signed
// statement, which the ledger keeps: the Provider honours it as an
// admin's, and the agent's next turn under the grant is refused.
func TestARevocationOutlivesAnOlderProviderStore(t *testing.T) {
	s := newShop(t)
	at := s.token(t)
	grant := pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	waitDepth(t, s, 0, 15*time.Second)

	s.stop()
	db := filepath.Join(s.cfg.DataDir, "provider.db")
	backup, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	s.start(t)
	s.p = s.srv.Provider()

	if err := s.p.RevokeGrant("shop", "acct-48213", grant); err != nil {
		t.Fatalf("revoke on the account page: %v", err)
	}
	waitDepth(t, s, 0, 15*time.Second)
	rev := s.grantRevocation(t, grant)
	if rev.ProviderRevokedAt == "" || rev.ProviderRevokedAt != rev.RevokedAt || rev.ProviderBrand != s.base || strings.Count(rev.ProviderStatement, ".") != 2 {
		t.Fatalf("the ledger holds %+v for the grant the customer revoked, want the Provider's statement of it, by brand %s", rev, s.base)
	}
	if rev.AdminRevokedAt != "" {
		t.Fatalf("the Provider's revocation is recorded as an admin's: %+v", rev)
	}

	s.stop()
	if err := os.WriteFile(db, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	s.p = s.srv.Provider()
	if code, body := s.sendRaw(t, at, "m2", "cancel order A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("a turn under the grant the customer revoked, after its store was put back from before: %d %s, want 401", code, body)
	}
	gs, err := s.p.UserGrants("shop", "acct-48213")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.ID == grant && g.Active(time.Now()) {
			t.Fatalf("the account page lists grant %s active after the refused turn", grant)
		}
	}
}

// A writer key cannot make the embedded Provider stop a grant with a
// statement of its own making: one signed by another key, or the
// Provider's own of another time, is refused with nothing recorded, and
// the grant keeps working. The Provider's genuine statement, whoever
// posts it, is its own revocation and is honoured.
func TestAWritersStatementMustBeTheProviders(t *testing.T) {
	s := newShop(t)
	at := s.token(t)
	grant := pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	waitDepth(t, s, 0, 15*time.Second)
	now := time.Now().UTC()
	forged := s.sc.Brand.Key.SignTyp(verifier.RevocationTyp, verifier.RevocationClaims{Issuer: s.base + "/oauth", Brand: s.base, GrantID: grant,
		RevokedAt: now.Format(time.RFC3339Nano), IssuedAt: now.Unix()})
	genuine, err := s.p.RevocationStatement(grant, now)
	if err != nil || genuine == "" {
		t.Fatalf("the Provider's statement: %q, %v", genuine, err)
	}
	for name, body := range map[string]map[string]any{
		"signed by another key":              {"providerStatement": forged},
		"the Provider's, of an earlier time": {"providerStatement": genuine, "revokedAt": now.Add(-time.Hour).Format(time.RFC3339Nano)},
	} {
		var status struct{ Message string }
		if code := s.call(t, "POST", "/v1/grants/"+grant+":revoke", "writer", body, &status); code != http.StatusBadRequest || !strings.Contains(status.Message, "providerStatement") {
			t.Errorf("a statement %s: %d %q, want 400 saying what is wrong with the providerStatement", name, code, status.Message)
		}
	}
	if rev := s.grantRevocation(t, grant); rev.RevokedAt != "" {
		t.Fatalf("the ledger holds %+v after refused statements", rev)
	}
	s.send(t, at, "m2", "what is the status of order A-88213?") // served

	if code := s.call(t, "POST", "/v1/grants/"+grant+":revoke", "writer", map[string]any{"providerStatement": genuine}, nil); code != 200 {
		t.Fatalf("the Provider's own statement: %d", code)
	}
	if code, body := s.sendRaw(t, at, "m3", "cancel order A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("a turn after the Provider's own statement is recorded: %d %s, want 401", code, body)
	}
}
