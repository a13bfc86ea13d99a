package server_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/verifier"
)

// grantServed runs the device flow and one turn under the grant, and
// waits for its receipt to be recorded: the delegation token and its
// grant.
func (s *shop) grantServed(t *testing.T) (at, grant string) {
	t.Helper()
	at = s.token(t)
	grant = pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	waitDepth(t, s, 0, 15*time.Second)
	return at, grant
}

// revocationView is a grant's revocation as GetGrant shows it.
type revocationView struct {
	RevokedAt          string `json:"revokedAt"`
	By                 string `json:"by"`
	AdminRevokedAt     string `json:"adminRevokedAt"`
	ProviderStatements []struct {
		Brand     string `json:"brand"`
		RevokedAt string `json:"revokedAt"`
		Statement string `json:"statement"`
	} `json:"providerStatements"`
	EmbeddedProvider          bool   `json:"embeddedProvider"`
	EmbeddedProviderStoppedAt string `json:"embeddedProviderStoppedAt"`
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
	at, grant := s.grantServed(t)

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
	if len(rev.ProviderStatements) != 1 || rev.ProviderStatements[0].RevokedAt != rev.RevokedAt || rev.ProviderStatements[0].Brand != s.base ||
		strings.Count(rev.ProviderStatements[0].Statement, ".") != 2 {
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
	at, grant := s.grantServed(t)
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

	var answer struct{ Revocation revocationView }
	if code := s.call(t, "POST", "/v1/grants/"+grant+":revoke", "writer", map[string]any{"providerStatement": genuine}, &answer); code != 200 {
		t.Fatalf("the Provider's own statement: %d", code)
	}
	if len(answer.Revocation.ProviderStatements) != 0 || answer.Revocation.EmbeddedProvider {
		t.Errorf("a writer, which may not read the ledger, is told the Provider's statements: %+v", answer.Revocation)
	}
	if code, body := s.sendRaw(t, at, "m3", "cancel order A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("a turn after the Provider's own statement is recorded: %d %s, want 401", code, body)
	}
}

// restoreOlderProviderStore stops the shop, runs between (with the shop
// stopped), puts provider.db back as it was before, and starts it again.
func (s *shop) restoreOlderProviderStore(t *testing.T, backup []byte, between func()) {
	t.Helper()
	s.stop()
	if err := os.WriteFile(filepath.Join(s.cfg.DataDir, "provider.db"), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	if between != nil {
		between()
	}
	s.start(t)
	s.p = s.srv.Provider()
}

// backupProviderStore stops the shop, copies provider.db and starts it
// again.
func (s *shop) backupProviderStore(t *testing.T) []byte {
	t.Helper()
	s.stop()
	b, err := os.ReadFile(filepath.Join(s.cfg.DataDir, "provider.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.start(t)
	s.p = s.srv.Provider()
	return b
}

// Another brand the ledger trusts, with a writer key, posts its own
// statement of the embedded Provider's grant before the customer revokes
// it: the Provider's statement is kept beside it, not displaced, and a
// store put back from before still does not serve the grant.
func TestAnotherBrandsStatementDoesNotDisplaceTheProviders(t *testing.T) {
	s := newShop(t)
	at, grant := s.grantServed(t)
	backup := s.backupProviderStore(t)
	far := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	other := s.sc.Brand.Key.SignTyp(verifier.RevocationTyp, verifier.RevocationClaims{Issuer: s.sc.AuthServer, Brand: s.sc.Brand.ID, GrantID: grant,
		RevokedAt: far.Format(time.RFC3339Nano), IssuedAt: time.Now().Unix()})
	if code := s.call(t, "POST", "/v1/grants/"+grant+":revoke", "writer", map[string]any{"providerStatement": other}, nil); code != 200 {
		t.Fatalf("another trusted brand's statement: %d", code)
	}
	// The ledgerd that runs the embedded Provider says the other brand's
	// statement does not stop it (ledgerctl revocations --not-stopping
	// lists the grant).
	if rev := s.grantRevocation(t, grant); !rev.EmbeddedProvider || rev.EmbeddedProviderStoppedAt != "" {
		t.Fatalf("after another brand's statement the ledger answers %+v, want the embedded Provider not stopped", rev)
	}
	if err := s.p.RevokeGrant("shop", "acct-48213", grant); err != nil {
		t.Fatal(err)
	}
	waitDepth(t, s, 0, 15*time.Second)
	rev := s.grantRevocation(t, grant)
	if len(rev.ProviderStatements) != 2 || rev.EmbeddedProviderStoppedAt == "" || rev.EmbeddedProviderStoppedAt != rev.RevokedAt {
		t.Fatalf("the ledger holds %+v, want both brands' statements, the embedded Provider stopped by its own", rev)
	}
	s.restoreOlderProviderStore(t, backup, nil)
	if code, body := s.sendRaw(t, at, "m2", "cancel order A-5531"); code != http.StatusUnauthorized {
		t.Fatalf("a turn under the grant the customer revoked, after another brand's statement and a restore: %d %s, want 401", code, body)
	}
}

// provider.baseUrl is set after a customer revoked a grant, and the
// Provider's store is put back from before: the statement names the
// brand at its old URL, and the Provider still knows it for its own, by
// its key. The grant's refresh token is refused.
func TestAStatementUnderAnOldBaseURLIsStillTheProviders(t *testing.T) {
	s := newShop(t)
	da := s.form(t, "/oauth/device_authorization", url.Values{"client_id": {s.sc.PA.ID}, "scope": {"orders:read"}})
	if err := s.p.Approve(da["user_code"].(string), "acct-48213", []string{"orders:read"}); err != nil {
		t.Fatal(err)
	}
	tok := s.form(t, "/oauth/token", url.Values{"client_id": {s.sc.PA.ID}, "grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {da["device_code"].(string)}})
	at, _ := tok["access_token"].(string)
	rt, _ := tok["refresh_token"].(string)
	if at == "" || rt == "" {
		t.Fatalf("token: %v", tok)
	}
	grant := pacttest.GrantOf(t, at)
	s.send(t, at, "m1", "what is the status of order A-88213?")
	waitDepth(t, s, 0, 15*time.Second)
	backup := s.backupProviderStore(t)
	if err := s.p.RevokeGrant("shop", "acct-48213", grant); err != nil {
		t.Fatal(err)
	}
	waitDepth(t, s, 0, 15*time.Second)
	_, port, _ := strings.Cut(s.cfg.Provider.Listen, ":")
	s.restoreOlderProviderStore(t, backup, func() { s.cfg.Provider.BaseURL = "http://localhost:" + port })
	s.base = s.cfg.Provider.BaseURL + "/a2a/shop"
	got := s.form(t, "/oauth/token", url.Values{"client_id": {s.sc.PA.ID}, "grant_type": {"refresh_token"}, "refresh_token": {rt}})
	if got["error"] != "invalid_grant" {
		t.Fatalf("a refresh of the grant the customer revoked, after a restore and a new baseUrl: %v, want invalid_grant", got)
	}
}
