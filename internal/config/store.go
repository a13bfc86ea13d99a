package config

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Row store kinds.
const (
	// StoreBbolt keeps rows in one bbolt file: one ledgerd, no other server.
	StoreBbolt = "bbolt"
	// StorePostgres keeps rows in a PostgreSQL database (or an engine that
	// speaks its protocol) that any number of ledgerd replicas share.
	StorePostgres = "postgres"
)

// maxPasswordBytes bounds a password file.
const maxPasswordBytes = 4096

// Store selects the row store.
type Store struct {
	// Kind is bbolt (default) or postgres.
	Kind string `yaml:"kind"`
	// Path is the bbolt file; default <dataDir>/ledger.db.
	Path string `yaml:"path"`
	// DSN locates the PostgreSQL database: keyword/value
	// ("host=db1,db2 port=5432 dbname=ledger user=ledgerd
	// target_session_attrs=read-write") or a postgres:// URL. Keep the
	// password out of it: use PasswordFile or PasswordEnv.
	DSN string `yaml:"dsn"`
	// PasswordFile holds the database password (surrounding white space
	// ignored).
	PasswordFile string `yaml:"passwordFile"`
	// PasswordEnv names the environment variable holding the database
	// password.
	PasswordEnv string `yaml:"passwordEnv"`
	// CommitDelay (kind bbolt) is how long a group commit waits for more
	// writes before it commits while others are writing; unset: the
	// store's default (bolt.DefaultCommitDelay), 0s: none.
	CommitDelay *Duration `yaml:"commitDelay,omitempty"`
}

// MaxCommitDelay bounds store.commitDelay: every write that shares a
// commit waits up to this long.
const MaxCommitDelay = 50 * time.Millisecond

// validate checks the store block and fills its defaults.
func (s *Store) validate(dataDir string) []error {
	var errs []error
	switch s.Kind {
	case "", StoreBbolt:
		s.Kind = StoreBbolt
		if s.Path == "" {
			s.Path = filepath.Join(dataDir, "ledger.db")
		}
		if s.DSN != "" || s.PasswordFile != "" || s.PasswordEnv != "" {
			errs = append(errs, errors.New("store.dsn, store.passwordFile and store.passwordEnv are for kind postgres"))
		}
		if d := s.CommitDelay; d != nil && (*d < 0 || time.Duration(*d) > MaxCommitDelay) {
			errs = append(errs, fmt.Errorf("store.commitDelay %s: want 0s (none) to %s", time.Duration(*d), MaxCommitDelay))
		}
	case StorePostgres:
		if s.DSN == "" {
			errs = append(errs, errors.New("store.dsn is required for kind postgres"))
		}
		if s.Path != "" || s.CommitDelay != nil {
			errs = append(errs, errors.New("store.path and store.commitDelay are for kind bbolt"))
		}
		if s.PasswordFile != "" && s.PasswordEnv != "" {
			errs = append(errs, errors.New("store: set passwordFile or passwordEnv, not both"))
		}
	default:
		errs = append(errs, fmt.Errorf("store.kind %q: want bbolt or postgres", s.Kind))
	}
	return errs
}

// DSNHoldsPassword reports whether the DSN gives the database password
// itself: a postgres:// URL with a password in its user part or its
// query, or a keyword/value DSN with a password keyword.
func (s Store) DSNHoldsPassword() bool {
	d := strings.TrimSpace(s.DSN)
	if strings.HasPrefix(d, "postgres://") || strings.HasPrefix(d, "postgresql://") {
		u, err := url.Parse(d)
		if err != nil {
			return strings.Contains(d, "@") // unparsed: a user part may hold one
		}
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	return dsnPassword.MatchString(d)
}

// dsnPassword finds a password keyword in a keyword/value DSN (libpq
// allows spaces around the equals sign).
var dsnPassword = regexp.MustCompile(`(^|\s)password\s*=`)

// Password returns the database password from PasswordFile or
// PasswordEnv, or "" when neither is set (the DSN or the driver's own
// sources, such as ~/.pgpass, provide it). The error never holds the
// password.
func (s Store) Password() (string, error) {
	switch {
	case s.PasswordFile != "":
		f, err := os.Open(s.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("store.passwordFile: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxPasswordBytes+1))
		if err != nil {
			return "", fmt.Errorf("store.passwordFile %s: %w", s.PasswordFile, err)
		}
		if len(b) > maxPasswordBytes {
			return "", fmt.Errorf("store.passwordFile %s: longer than %d bytes", s.PasswordFile, maxPasswordBytes)
		}
		pw := strings.TrimSpace(string(b))
		if pw == "" {
			return "", fmt.Errorf("store.passwordFile %s is empty", s.PasswordFile)
		}
		return pw, nil
	case s.PasswordEnv != "":
		pw := os.Getenv(s.PasswordEnv)
		if pw == "" {
			return "", fmt.Errorf("store.passwordEnv: the environment variable %s is unset or empty", s.PasswordEnv)
		}
		return pw, nil
	}
	return "", nil
}
