package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/pact"
)

// keyShop is a shop whose Provider has a public URL of its own, so that
// its interface URL (the tokens' aud) stays the same across restarts on
// new ports, and whose pipeline reaches the ledger through a gate that
// answers 503 while down holds.
func keyShop(t *testing.T) (*shop, *atomic.Bool, func()) {
	var ledgerURL atomic.Pointer[url.URL]
	down := new(atomic.Bool)
	down.Store(true)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(ledgerURL.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	s := newShop(t, func(c *config.Config) {
		c.Provider.LedgerURL = gate.URL
		c.Provider.BaseURL = "https://provider.example"
	})
	point := func() {
		u, _ := url.Parse("http://" + s.srv.HTTPAddr())
		ledgerURL.Store(u)
		s.p = s.srv.Provider()
		s.base = "http://" + s.srv.ProviderAddr() + "/a2a/shop"
	}
	point()
	return s, down, point
}

// jwksKids lists the kids the shop's JWKS publishes.
func (s *shop) jwksKids(t *testing.T) []string {
	t.Helper()
	res, err := http.Get(s.base + "/oauth/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var set struct{ Keys []struct{ Kid string } }
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.Kid)
	}
	return kids
}

// rotateProviderKey runs the rotation ledgerd's `provider rotate-key`
// runs, with ledgerd stopped.
func rotateProviderKey(t *testing.T, cfg config.Config) {
	t.Helper()
	if _, err := server.RotateProviderKey(context.Background(), cfg, false, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
}

// The Provider's signing key is rotated while a receipt it signed waits in
// its outbox and a delegation token it issued is live. After the restart
// the receipt, posted under the new key's reign, lands AUTHORIZED; the
// token still works at the Provider; and the JWKS publishes both keys,
// the new one signing.
func TestReceiptsAndTokensSignedBeforeARotationStillVerify(t *testing.T) {
	s, down, point := keyShop(t)
	tok := s.token(t)
	s.send(t, tok, "m1", "cancel order A-5531")
	if d := s.p.PipelineDepth(); d != 1 {
		t.Fatalf("the Provider's outbox holds %d entries while the ledger is down, want 1", d)
	}
	before := s.jwksKids(t)
	if len(before) != 1 {
		t.Fatalf("before the rotation the JWKS lists %v, want one key", before)
	}
	s.stop()
	rotateProviderKey(t, s.cfg)
	s.start(t)
	point()
	after := s.jwksKids(t)
	if len(after) != 2 || !slices.Contains(after, before[0]) {
		t.Fatalf("after the rotation the JWKS lists %v, want the new key and the retired %s", after, before[0])
	}
	// In its period the retired key is published, not held past it.
	if v, ok := scrape(t, s.env)["pactledger_provider_retired_keys_held"]; !ok || v != 0 {
		t.Errorf("pactledger_provider_retired_keys_held %v (shown: %v) in the retired key's period, want 0", v, ok)
	}

	down.Store(false)
	waitDepth(t, s, 0, 20*time.Second)
	var list struct{ Rows []Row }
	s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
	if len(list.Rows) != 1 || list.Rows[0].Status != "ROW_STATUS_AUTHORIZED" || list.Rows[0].BrandKey.Kid != before[0] {
		t.Errorf("the receipt signed before the rotation is recorded as %+v, want one row AUTHORIZED under kid %s", list.Rows, before[0])
	}

	// The token issued before the rotation still works, and the new
	// receipt is signed by the new key.
	s.send(t, tok, "m2", "where is order A-88213")
	waitDepth(t, s, 0, 20*time.Second)
	s.call(t, "GET", "/v1/rows?target=A-88213", "support", nil, &list)
	if len(list.Rows) != 1 || list.Rows[0].Status != "ROW_STATUS_AUTHORIZED" || list.Rows[0].BrandKey.Kid == before[0] {
		t.Fatalf("the receipt signed after the rotation is recorded as %+v, want one row AUTHORIZED under the new kid", list.Rows)
	}
}

// A Provider whose store holds grants does not start without its signing
// key: a new key would silently break every token and receipt the lost
// one signed. It says what to do.
func TestAProviderWithGrantsRefusesANewKeySilently(t *testing.T) {
	s := newShop(t)
	s.token(t)
	s.stop()
	keyFile := filepath.Join(s.cfg.DataDir, "provider-signing-key.json")
	if err := os.Rename(keyFile, keyFile+".lost"); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), s.cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = srv.Serve(ctx)
		t.Fatal("ledgerd started with a new Provider signing key over a store holding a grant")
	}
	for _, want := range []string{"no Provider signing key at " + keyFile, "grants 1", "restore it from the backup", "ledgerd provider rotate-key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(keyFile); err == nil {
		t.Error("the refusal left a new key file behind")
	}
}

// provider.retiredKeyTTL's default and least value are the Provider's.
func TestRetiredKeyTTLBoundsAreTheProviders(t *testing.T) {
	if got := time.Duration(config.Default().Provider.RetiredKeyTTL); got != pact.DefaultRetiredKeyTTL || config.DefaultRetiredKeyTTL != pact.DefaultRetiredKeyTTL {
		t.Errorf("provider.retiredKeyTTL defaults to %s, the Provider to %s", got, pact.DefaultRetiredKeyTTL)
	}
	c := config.Default()
	c.Provider.RetiredKeyTTL = config.Duration(pact.MinRetiredKeyTTL)
	if err := c.Validate(); err != nil {
		t.Errorf("provider.retiredKeyTTL %s: %v", pact.MinRetiredKeyTTL, err)
	}
	c.Provider.RetiredKeyTTL = config.Duration(pact.MinRetiredKeyTTL - time.Second)
	if err := c.Validate(); err == nil {
		t.Errorf("provider.retiredKeyTTL %s passed", pact.MinRetiredKeyTTL-time.Second)
	}
}

// provider-signing-key.json put back from a backup taken before a
// rotation, beside a provider.db whose outbox holds a receipt the newer
// key signed: ledgerd does not start, since posted the receipt would be
// recorded UNAUTHORIZED for good ("unknown kid"). It names the kid and the
// entries, and says to put back the key file that goes with provider.db;
// with that file back it starts and the receipt lands AUTHORIZED.
func TestAnOlderProviderKeyFileBesideANewerOutboxDoesNotStart(t *testing.T) {
	s, down, point := keyShop(t)
	s.stop()
	keyFile := pact.SigningKeyPath(filepath.Join(s.cfg.DataDir, "provider.db"))
	older, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	rot, err := server.RotateProviderKey(context.Background(), s.cfg, false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.start(t)
	point()
	s.send(t, s.token(t), "m1", "cancel order A-5531")
	if d := s.p.PipelineDepth(); d != 1 {
		t.Fatalf("the Provider's outbox holds %d entries while the ledger is down, want 1", d)
	}
	s.stop()
	newer, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, older, 0o600); err != nil {
		t.Fatal(err)
	}

	srv, err := server.New(context.Background(), s.cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		s.env.srv, s.env.base, s.env.stop = srv, "http://"+srv.HTTPAddr(), func() { cancel(); <-done }
		t.Cleanup(s.stop)
		point()
		down.Store(false)
		waitDepth(t, s, 0, 20*time.Second)
		var list struct{ Rows []Row }
		s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
		t.Fatalf("ledgerd started with a key file that lacks the key (%s) that signed the receipt waiting in the Provider's outbox; the receipt was then recorded as %+v", rot.Kid, list.Rows)
	}
	if !errors.Is(err, pact.ErrKeyFileMismatch) {
		t.Errorf("the refusal %v is not pact.ErrKeyFileMismatch", err)
	}
	for _, want := range []string{keyFile, rot.Kid + " (1 waiting for the ledger, 0 set aside)", `UNAUTHORIZED for good ("unknown kid")`,
		"Put back the provider-signing-key.json that goes with provider.db", `"Backups" and "The Provider's signing key"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}

	if err := os.WriteFile(keyFile, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	point()
	down.Store(false)
	waitDepth(t, s, 0, 20*time.Second)
	var list struct{ Rows []Row }
	s.call(t, "GET", "/v1/rows?target=A-5531", "support", nil, &list)
	if len(list.Rows) != 1 || list.Rows[0].Status != "ROW_STATUS_AUTHORIZED" || list.Rows[0].BrandKey.Kid != rot.Kid {
		t.Errorf("with the key file put back the receipt is recorded as %+v, want one row AUTHORIZED under kid %s", list.Rows, rot.Kid)
	}
}

// ledgerd does not start with an admin key in provider.ledgerKeyFile:
// the Provider's posts would be recorded as an admin's, and its report of
// each grant it replaced would stop the Provider as an admin's revocation
// does, ending the grant that replaced it and carries its scopes. A key
// that is a writer and an admin is refused too; the message says why.
func TestTheProvidersPipelineKeyIsNoAdmins(t *testing.T) {
	s := newShop(t)
	s.stop()
	for _, roles := range [][]string{{config.RoleAdmin}, {config.RoleWriter, config.RoleAdmin}} {
		cfg := s.cfg
		const key = "test-pipeline-admin-key"
		cfg.APIKeys = append(slices.Clone(cfg.APIKeys), config.APIKey{Name: "pipeline", SHA256: config.HashKey(key), Roles: roles})
		cfg.Provider.LedgerKeyFile = filepath.Join(t.TempDir(), "pipeline.key")
		if err := os.WriteFile(cfg.Provider.LedgerKeyFile, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err == nil {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = srv.Serve(ctx)
			t.Fatalf("ledgerd started with a pipeline key of roles %v", roles)
		}
		for _, want := range []string{"provider.ledgerKeyFile must hold a writer key without the admin role", "the key pipeline, which has the admin role"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("roles %v: the refusal %q does not say %q", roles, err, want)
			}
		}
	}
	// No keys configured: the admin key ledgerd generates is refused too.
	cfg := s.cfg
	cfg.APIKeys, cfg.DataDir = nil, t.TempDir()
	cfg.Provider.LedgerKeyFile = filepath.Join(cfg.DataDir, config.KeysDir, config.RoleAdmin+".key")
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = srv.Serve(ctx)
		t.Fatal("ledgerd started with its generated admin key as the pipeline key")
	}
	if !strings.Contains(err.Error(), "which has the admin role") {
		t.Errorf("the refusal of the generated admin key: %v", err)
	}
}
