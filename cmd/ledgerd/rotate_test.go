package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pgtest"
)

// readyStore is the store part of /readyz and its status code.
type readyStore struct {
	code   int
	status string
}

// storeReady asks base's /readyz about the row store, with key (one that
// may read the ledger is shown the errors' text).
func storeReady(t *testing.T, base, key string) readyStore {
	t.Helper()
	var ready struct {
		Store struct{ Kind, Status string }
	}
	code := call(t, "GET", base+"/readyz", key, nil, &ready)
	return readyStore{code: code, status: ready.Store.Status}
}

// roleKey is the API key ledgerd created for role in dataDir.
func roleKey(t *testing.T, dataDir, role string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, config.KeysDir, role+".key"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// waitReady polls base's /readyz until ok says yes of it, and fails t
// with the last answer after 30 s.
func waitReady(t *testing.T, base, key, what string, logs *syncBuffer, ok func(readyStore) bool) readyStore {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := storeReady(t, base, key)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /readyz is still %d with the store %q\n%s", what, r.code, r.status, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostgresPasswordRotation: the database password changes (ALTER
// ROLE) and the sessions ledgerd had end. Until store.passwordFile holds
// the new password, /readyz is 503 and says the database rejected the
// password, not that it does not answer; once the file is rewritten, new
// connections read it and ledgerd is ready again without a restart.
// Neither password shows in the log.
func TestPostgresPasswordRotation(t *testing.T) {
	pgtest.Available(t)
	cluster, err := pgtest.New("rotate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Remove() })
	const role, first, second = "ledgerd_rotate", "first-Pw-7Hq2", "second-Pw-K9x4"
	if err := cluster.AddPasswordRole(t.Context(), role, first); err != nil {
		t.Fatal(err)
	}
	db := regexp.MustCompile(`dbname=(\S+)`).FindStringSubmatch(cluster.CreateDB(t))[1]
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "db-password")
	if err := os.WriteFile(pwFile, []byte(first+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	off := false
	cfg := config.Default()
	cfg.Listen = config.Listen{GRPC: "127.0.0.1:0", HTTP: "127.0.0.1:0"}
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Store = config.Store{Kind: config.StorePostgres, DSN: cluster.DSNAs(role, db), PasswordFile: pwFile}
	cfg.Provider.Enabled = &off
	cfgPath := writeConfig(t, dir, "ledgerd.yaml", cfg)
	var out bytes.Buffer
	if err := run(t.Context(), []string{"migrate", "--config", cfgPath}, &out, &out); err != nil {
		t.Fatalf("ledgerd migrate: %v\n%s", err, out.String())
	}
	base, logs, stop := runLedgerd(t, cfgPath)
	support := roleKey(t, cfg.DataDir, config.RoleSupport)
	if r := storeReady(t, base, support); r.code != http.StatusOK || r.status != "ok" {
		t.Fatalf("/readyz with the first password = %d, store %q", r.code, r.status)
	}

	if err := cluster.Exec(t.Context(), "postgres", "ALTER ROLE "+role+" PASSWORD '"+second+"'"); err != nil {
		t.Fatal(err)
	}
	// End the sessions ledgerd had, again at each poll: one its pool was
	// opening as the password changed may have signed in with the old
	// one after the first sweep, and would answer for the store.
	terminate := func() {
		if err := cluster.Exec(t.Context(), "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
			t.Fatal(err)
		}
	}
	terminate()
	r := waitReady(t, base, support, "the password changed, the file not yet", logs, func(r readyStore) bool {
		if strings.Contains(r.status, "password") {
			return true
		}
		terminate()
		return false
	})
	t.Logf("/readyz with a rejected password: store %q", r.status)
	if r.code != http.StatusServiceUnavailable || !strings.HasPrefix(r.status, "password rejected") || !strings.Contains(r.status, "28P01") || strings.Contains(r.status, "not answering") {
		t.Errorf("/readyz with a rejected password = %d, store %q; want 503 saying the password was rejected (28P01)", r.code, r.status)
	}
	// A probe sending no key is told the same, without the error's text
	// (it names the database's user).
	if r := waitReady(t, base, "", "the password changed, asked without a key", logs, func(r readyStore) bool {
		if r.code != http.StatusOK {
			return true
		}
		terminate()
		return false
	}); r.code != http.StatusServiceUnavailable || !strings.HasPrefix(r.status, "password rejected") || strings.Contains(r.status, "28P01") || strings.Contains(r.status, role) {
		t.Errorf("/readyz with no key and a rejected password = %d, store %q; want 503 saying the password was rejected, without the error", r.code, r.status)
	}

	if err := os.WriteFile(pwFile, []byte(second+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base, support, "the file holds the new password", logs, func(r readyStore) bool {
		return r.code == http.StatusOK && r.status == "ok"
	})
	stop()
	if s := logs.String(); strings.Contains(s, first) || strings.Contains(s, second) {
		t.Errorf("the log shows a database password:\n%s", s)
	}
}
