package config

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func sum256(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// KeysDir is where first start writes generated API keys, under the data dir.
const KeysDir = "api-keys"

// EnsureKeys returns the API keys to use. With keys configured, those.
// Otherwise the keys in <dataDir>/api-keys/<role>.key, creating one random
// key per role (files mode 0600) on first start; created reports whether
// it did.
func EnsureKeys(c *Config) (keys []APIKey, dir string, created bool, err error) {
	if len(c.APIKeys) > 0 {
		return c.APIKeys, "", false, nil
	}
	if err := makeDataDir(c.DataDir); err != nil {
		return nil, "", false, err
	}
	dir = filepath.Join(c.DataDir, KeysDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, dir, false, fmt.Errorf("api key directory: %w", err)
	}
	for _, role := range Roles {
		p := filepath.Join(dir, role+".key")
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			raw := make([]byte, 32)
			if _, err := rand.Read(raw); err != nil {
				return nil, dir, false, err
			}
			key := "pl_" + role + "_" + base64.RawURLEncoding.EncodeToString(raw)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return nil, dir, false, fmt.Errorf("create %s: %w", p, err)
			}
			_, werr := f.WriteString(key + "\n")
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return nil, dir, false, fmt.Errorf("write %s: %w", p, werr)
			}
			created = true
			b = []byte(key)
		} else if err != nil {
			return nil, dir, false, fmt.Errorf("read %s: %w", p, err)
		}
		key := strings.TrimSpace(string(b))
		if key == "" {
			return nil, dir, false, fmt.Errorf("%s is empty", p)
		}
		keys = append(keys, APIKey{Name: role, SHA256: HashKey(key), Roles: []string{role}})
	}
	return keys, dir, created, nil
}

// makeDataDir creates the data directory dir (mode 0700) unless it is
// there; its errors name it.
func makeDataDir(dir string) error {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("data dir %s: not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	return nil
}

// LooseKeyFiles lists the API key directory dir and the role key files in
// it that others than their owner may read or change (mode bits 0077): a
// key file made by ledgerd is 0600 in a 0700 directory, but one copied in,
// or a directory that was there before, keeps the mode it came with.
func LooseKeyFiles(dir string) []string {
	var loose []string
	check := func(p string) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o077 != 0 {
			loose = append(loose, fmt.Sprintf("%s (mode %04o)", p, st.Mode().Perm()))
		}
	}
	check(dir)
	for _, role := range Roles {
		check(filepath.Join(dir, role+".key"))
	}
	return loose
}

// SecretFiles lists the files the configuration names that hold a secret
// besides the API key directory (LooseKeyFiles): the TLS private keys, the
// writer key the Provider posts with, the Merkle log's checkpoint key and
// the database's password file. The Provider's signing key is beside its
// store, which the server knows.
func (c *Config) SecretFiles() []string {
	files := []string{c.TLS.KeyFile, c.Provider.LedgerTLS.KeyFile, c.Provider.LedgerKeyFile, c.Store.PasswordFile}
	if c.MerkleLog.On() {
		files = append(files, c.LogKeyFile())
	}
	return slices.DeleteFunc(files, func(f string) bool { return f == "" })
}

// LooseSecretFiles lists, of the secret files named, those others than
// their owner may read or change, and the folders holding them that others
// may write into (mode bits 0022, without the sticky bit), where a file
// could be replaced by one of their own. A file is loose with any of the
// mode bits 0077 set, as PostgreSQL holds its server key, except that one
// root owns may be read by its group (0640, the way a service's dynamic
// user is given a key: docs/operations.md, "systemd"). A file not there is
// left out: ledgerd makes its keys 0600 in folders of 0700, and a missing
// one it needs is an error of its own. Each entry says what is open.
func LooseSecretFiles(paths []string) []string {
	var loose []string
	seen := map[string]bool{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || seen[p] {
			continue
		}
		seen[p] = true
		if m := st.Mode().Perm(); m&0o077 != 0 && (m&0o037 != 0 || !ownedByRoot(st)) {
			loose = append(loose, fmt.Sprintf("%s (mode %04o: others than its owner may read or change it; chmod 600 it)", p, m))
		}
		dir := filepath.Dir(p)
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if d, err := os.Stat(dir); err == nil && d.Mode()&os.ModeSticky == 0 && d.Mode().Perm()&0o022 != 0 {
			loose = append(loose, fmt.Sprintf("%s (mode %04o: others than its owner may replace the secret files in it; chmod go-w it)", dir, d.Mode().Perm()))
		}
	}
	return loose
}

// LoopbackHost reports whether host (a host name or address, without port
// or brackets) names this machine: localhost or a loopback address. A
// name is taken at its word: one that resolves to a loopback address is
// not this machine to a check that does not resolve it.
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
