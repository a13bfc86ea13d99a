// Package localdir is evidence storage in a local directory, for the
// embedded default: each object is written whole to a temporary file,
// fsynced, made read-only and linked to its key only where the key does
// not exist. It has the same interface as S3 Object Lock but a
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
	"syscall"
	"time"

	"github.com/pactledger/pactledger/internal/fsync"
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

// Put implements ledger.ObjectStore. The body is written to a temporary
// file beside the key, fsynced and made read-only, then linked to the key
// (link(2) fails where the key exists) and the directory fsynced: an
// object appears whole or not at all, and of writers putting one key at
// once exactly one creates it while the others find it.
func (s *Store) Put(_ context.Context, key string, body []byte, retainUntil time.Time) (ledger.Location, error) {
	loc := ledger.Location{Store: "dir", Bucket: s.dir, Key: key, RetainUntil: retainUntil.UTC()}
	p, err := s.path(key)
	if err != nil {
		return loc, err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return loc, err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := writeLocked(f, body); err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	err = os.Link(tmp, p)
	if errors.Is(err, fs.ErrExist) {
		return loc, s.putAgain(loc, p, body)
	}
	if err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	if err := fsync.Dir(dir); err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	return loc, nil
}

// putAgain is Put of a key that exists at p.
func (s *Store) putAgain(loc ledger.Location, p string, body []byte) error {
	have, err := os.ReadFile(p)
	if err == nil && bytes.Equal(have, body) {
		// The same object put again (a JWKS snapshot named anew after its
		// last row was swept): it is retained for the new put too, so that
		// a deletion queued for the earlier one is refused.
		return s.ExtendRetention(context.Background(), loc, loc.RetainUntil)
	}
	if err == nil && len(have) == 0 {
		// An earlier version's put crashed between create and write.
		if err := os.Chmod(p, 0o600); err == nil {
			if err := os.WriteFile(p, body, 0o400); err == nil {
				return syncAndLock(p)
			}
		}
	}
	return fmt.Errorf("put %s: %w", loc.Key, ledger.ErrObjectExists)
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
	unlock, err := lockDir(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer unlock()
	var st lockState
	if b, err := os.ReadFile(p + ".lock"); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	fn(&st)
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".lock.*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := writeLocked(f, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, p+".lock"); err != nil {
		return err
	}
	return fsync.Dir(filepath.Dir(p))
}

// lockDir takes an exclusive lock on directory dir (flock(2), which holds
// between processes) for the writers that read, decide and write there:
// a new latest version, a sidecar's retention and hold, a deletion.
func lockDir(dir string) (unlock func(), err error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		d.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { d.Close() }, nil // closing releases the lock
}

// SetLegalHold implements ledger.ObjectStore: recorded in a sidecar file.
func (s *Store) SetLegalHold(_ context.Context, loc ledger.Location, on bool) error {
	return s.updateLock(loc.Key, func(st *lockState) { st.LegalHold = on })
}

// LegalHold implements ledger.LegalHoldReader: what the sidecar file says.
func (s *Store) LegalHold(_ context.Context, loc ledger.Location) (bool, error) {
	p, err := s.path(loc.Key)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("legal hold of %s: %w", loc.Key, ledger.ErrNotFound)
	}
	var st lockState
	b, err := os.ReadFile(p + ".lock")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("legal hold of %s: %w", loc.Key, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return false, fmt.Errorf("legal hold of %s: %w", loc.Key, err)
	}
	return st.LegalHold, nil
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
	unlock, err := lockDir(filepath.Dir(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing of the key was ever put
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", loc.Key, err)
	}
	defer unlock()
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
