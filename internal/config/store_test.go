package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// load loads and validates yaml.
func load(t *testing.T, yaml string) (config.Config, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err == nil {
		err = c.Validate()
	}
	return c, err
}

func TestStoreDefaultsToBbolt(t *testing.T) {
	c, err := load(t, "dataDir: /srv/ledger\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Kind != config.StoreBbolt || c.Store.Path != filepath.Join("/srv/ledger", "ledger.db") {
		t.Errorf("store = %+v, want bbolt at /srv/ledger/ledger.db", c.Store)
	}
	if c.Store.CommitDelay != nil {
		t.Errorf("store.commitDelay = %v unset, want nil (the store's default)", *c.Store.CommitDelay)
	}
	for yaml, want := range map[string]time.Duration{"store: {commitDelay: 0s}\n": 0, "store: {commitDelay: 5ms}\n": 5 * time.Millisecond} {
		c, err := load(t, yaml)
		if err != nil || c.Store.CommitDelay == nil || time.Duration(*c.Store.CommitDelay) != want {
			t.Errorf("%q: store = %+v, %v; want commitDelay %v", yaml, c.Store, err, want)
		}
	}
	c, err = load(t, "store: {kind: postgres, dsn: 'host=db dbname=ledger'}\n")
	if err != nil || c.Store.Kind != config.StorePostgres || c.Store.Path != "" {
		t.Errorf("postgres store = %+v, %v", c.Store, err)
	}
}

func TestStoreRejects(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown kind", "store: {kind: mysql}\n", "want bbolt or postgres"},
		{"postgres without a dsn", "store: {kind: postgres}\n", "store.dsn is required"},
		{"postgres with a path", "store: {kind: postgres, dsn: 'host=db', path: /x}\n", "store.path and store.commitDelay are for kind bbolt"},
		{"postgres with a commit delay", "store: {kind: postgres, dsn: 'host=db', commitDelay: 2ms}\n", "are for kind bbolt"},
		{"a negative commit delay", "store: {commitDelay: -1ms}\n", "want 0s (none) to 50ms"},
		{"a commit delay too long", "store: {commitDelay: 1s}\n", "want 0s (none) to 50ms"},
		{"bbolt with a dsn", "store: {dsn: 'host=db'}\n", "for kind postgres"},
		{"two password sources", "store: {kind: postgres, dsn: 'host=db', passwordFile: /p, passwordEnv: PW}\n", "not both"},
		{"unknown field", "store: {kind: postgres, dsn: 'host=db', password: x}\n", "password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := load(t, tc.yaml); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestStorePassword(t *testing.T) {
	const secret = "c0rrect-h0rse"
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("  "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pw, err := (config.Store{PasswordFile: file}).Password(); err != nil || pw != secret {
		t.Errorf("from a file: %q, %v", pw, err)
	}
	t.Setenv("PACTLEDGER_TEST_DB_PASSWORD", secret)
	if pw, err := (config.Store{PasswordEnv: "PACTLEDGER_TEST_DB_PASSWORD"}).Password(); err != nil || pw != secret {
		t.Errorf("from the environment: %q, %v", pw, err)
	}
	if pw, err := (config.Store{}).Password(); err != nil || pw != "" {
		t.Errorf("none configured: %q, %v", pw, err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat(secret, 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range []config.Store{
		{PasswordFile: big},
		{PasswordFile: empty},
		{PasswordFile: filepath.Join(dir, "missing")},
		{PasswordEnv: "PACTLEDGER_TEST_DB_PASSWORD_UNSET"},
	} {
		_, err := s.Password()
		if err == nil {
			t.Errorf("%+v: no error", s)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%+v: the error shows the password: %v", s, err)
		}
	}
}
