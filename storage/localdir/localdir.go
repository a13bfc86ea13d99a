// Package localdir is evidence storage in a local directory, for the
// embedded default: each object is created exclusively (O_EXCL), fsynced
// and made read-only. It has the same interface as S3 Object Lock but a
// weaker guarantee: anyone with write access to the directory can still
// remove or change files.
package localdir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// Store is a ledger.ObjectStore on a directory.
type Store struct {
	dir string
}

// Open creates dir when needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("evidence directory %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &Store{dir: abs}, nil
}

func (s *Store) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("evidence key %q is not a relative object key", key)
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// Put implements ledger.ObjectStore.
func (s *Store) Put(_ context.Context, key string, body []byte, retainUntil time.Time) (ledger.Location, error) {
	loc := ledger.Location{Store: "dir", Bucket: s.dir, Key: key, RetainUntil: retainUntil.UTC()}
	p, err := s.path(key)
	if err != nil {
		return loc, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return loc, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if errors.Is(err, fs.ErrExist) {
		have, rerr := os.ReadFile(p)
		if rerr == nil && bytes.Equal(have, body) {
			// The same object put again (a JWKS snapshot named anew after
			// its last row was swept): it is retained for the new put too,
			// so that a deletion queued for the earlier one is refused.
			return loc, s.ExtendRetention(context.Background(), loc, retainUntil)
		}
		if rerr == nil && len(have) == 0 {
			// An earlier attempt crashed between create and write.
			if err := os.Chmod(p, 0o600); err == nil {
				if err := os.WriteFile(p, body, 0o400); err == nil {
					return loc, syncAndLock(p)
				}
			}
		}
		return loc, fmt.Errorf("put %s: %w", key, ledger.ErrObjectExists)
	}
	if err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	if _, err := f.Write(body); err != nil {
		f.Close()
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	return loc, nil
}

func syncAndLock(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Chmod(p, 0o400)
}

// Get implements ledger.ObjectStore.
func (s *Store) Get(_ context.Context, key string) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
	}
	return b, err
}

// Ping implements ledger.ObjectStore.
func (s *Store) Ping(context.Context) error {
	_, err := os.Stat(s.dir)
	return err
}

// lockState is the sidecar a directory store keeps for holds and retention.
type lockState struct {
	RetainUntil time.Time `json:"retainUntil,omitzero"`
	LegalHold   bool      `json:"legalHold"`
}

func (s *Store) updateLock(key string, fn func(*lockState)) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	var st lockState
	if b, err := os.ReadFile(p + ".lock"); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	fn(&st)
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := p + ".lock.tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p+".lock")
}

// SetLegalHold implements ledger.ObjectStore: recorded in a sidecar file.
func (s *Store) SetLegalHold(_ context.Context, loc ledger.Location, on bool) error {
	return s.updateLock(loc.Key, func(st *lockState) { st.LegalHold = on })
}

// ExtendRetention implements ledger.ObjectStore: recorded in a sidecar file.
func (s *Store) ExtendRetention(_ context.Context, loc ledger.Location, until time.Time) error {
	return s.updateLock(loc.Key, func(st *lockState) {
		if until.After(st.RetainUntil) {
			st.RetainUntil = until.UTC()
		}
	})
}

// Delete implements ledger.ObjectStore: it refuses while the sidecar says
// the object is held or retained, then removes the file.
func (s *Store) Delete(_ context.Context, loc ledger.Location) error {
	p, err := s.path(loc.Key)
	if err != nil {
		return err
	}
	var st lockState
	if b, err := os.ReadFile(p + ".lock"); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	until := loc.RetainUntil
	if st.RetainUntil.After(until) {
		until = st.RetainUntil
	}
	switch {
	case st.LegalHold:
		return fmt.Errorf("delete %s: under legal hold", loc.Key)
	case time.Now().Before(until):
		return fmt.Errorf("delete %s: retained until %s", loc.Key, until.Format(time.RFC3339))
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", loc.Key, err)
	}
	_ = os.Remove(p + ".lock")
	return nil
}
