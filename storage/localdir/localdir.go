// Package localdir is evidence storage in a local directory, for the
// embedded default: each object is written whole to a temporary file,
// fsynced, made read-only and linked to its key only where the key does
// not exist, after the retain-until it was put with is recorded in a
// sidecar file beside it ("<key>.lock", which also keeps its legal hold).
// It has the same interface as S3 Object Lock but a weaker guarantee:
// anyone with write access to the directory can still remove or change
// files.
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
	"sync"
	"syscall"
	"time"

	"github.com/pactledger/pactledger/internal/fsync"
	"github.com/pactledger/pactledger/ledger"
)

// Store is a ledger.ObjectStore on a directory.
type Store struct {
	dir string
	// synced holds the folders whose entries, and those of the folders
	// above them up to dir, this Store has fsynced (see folder).
	synced sync.Map
}

// syncDir is fsync.Dir; tests replace it to see which folders are synced.
var syncDir = fsync.Dir

// Open creates dir when needed.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	made := abs // the folder above those Open makes
	for {
		if _, err := os.Stat(made); err == nil || filepath.Dir(made) == made {
			break
		}
		made = filepath.Dir(made)
	}
	if err := mkdirSynced(abs, made); err != nil {
		return nil, fmt.Errorf("evidence directory %s: %w", dir, err)
	}
	return &Store{dir: abs}, nil
}

// String names the store in messages: "the evidence directory DIR".
func (s *Store) String() string { return "the evidence directory " + s.dir }

// folder creates dir, a folder of the store, when needed and makes its
// entry durable: the folder each new folder was made in is fsynced, up
// to the store's own, so that a power loss after a put returns cannot
// take a new folder (segments/<day>/) and every object in it, when the
// ledger keeps no other copy. A folder this Store has not seen is
// settled the same way though it exists already: another writer may have
// made it and not have synced its entry yet.
func (s *Store) folder(dir string) error {
	if _, ok := s.synced.Load(dir); ok {
		if _, err := os.Stat(dir); err == nil {
			return nil
		}
	}
	if err := mkdirSynced(dir, s.dir); err != nil {
		return err
	}
	s.synced.Store(dir, true)
	return nil
}

// mkdirSynced is os.MkdirAll of dir and an fsync of each folder above it
// up to and including top (dir itself or a folder above it: nothing is
// synced where top is dir).
func mkdirSynced(dir, top string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for d := dir; d != top; {
		up := filepath.Dir(d)
		if up == d {
			break // the root of the file system: top was not above dir
		}
		d = up
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("evidence key %q is not a relative object key", key)
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// Put implements ledger.ObjectStore. The body is written to a temporary
// file beside the key, fsynced and made read-only. Then, under the lock
// of the key's directory, the retain-until is recorded in the key's
// sidecar and fsynced, and only then is the file linked to the key
// (link(2) fails where the key exists) and the directory fsynced: an
// object appears whole or not at all, never without the record of its
// retention (Delete trusts that record, not the location it is handed,
// which the row store may have had edited), and of writers putting one
// key at once exactly one creates it while the others find it. A crash
// before the link leaves a sidecar without an object; a later put of the
// key takes it over, keeping the later of the two retain-untils.
func (s *Store) Put(_ context.Context, key string, body []byte, retainUntil time.Time) (ledger.Location, error) {
	loc := ledger.Location{Store: "dir", Bucket: s.dir, Key: key, RetainUntil: retainUntil.UTC()}
	p, err := s.path(key)
	if err != nil {
		return loc, err
	}
	dir := filepath.Dir(p)
	if err := s.folder(dir); err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
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
	unlock, err := lockDir(dir)
	if err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	defer unlock()
	if _, err := os.Lstat(p); err == nil {
		return loc, putAgain(loc, p, body)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	if err := writeLockState(p, extendTo(loc.RetainUntil)); err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	err = os.Link(tmp, p)
	if errors.Is(err, fs.ErrExist) { // put by a writer that takes no lock
		return loc, putAgain(loc, p, body)
	}
	if err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	if err := syncDir(dir); err != nil {
		return loc, fmt.Errorf("put %s: %w", key, err)
	}
	return loc, nil
}

// putAgain is Put of a key that exists at p, under the lock of its
// directory.
func putAgain(loc ledger.Location, p string, body []byte) error {
	have, err := os.ReadFile(p)
	if err == nil && bytes.Equal(have, body) {
		// The same object put again (a JWKS snapshot named anew after its
		// last row was swept): it is retained for the new put too, so that
		// a deletion queued for the earlier one is refused.
		if err := writeLockState(p, extendTo(loc.RetainUntil)); err != nil {
			return fmt.Errorf("put %s: %w", loc.Key, err)
		}
		return nil
	}
	if err == nil && len(have) == 0 {
		// An earlier version's put crashed between create and write. Its
		// retention is recorded before the body can be read.
		if err := writeLockState(p, extendTo(loc.RetainUntil)); err != nil {
			return fmt.Errorf("put %s: %w", loc.Key, err)
		}
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

// readLockState reads the sidecar of the object at p: the zero state
// where there is none. One that cannot be read is an error, never taken
// for no hold and no retention.
func readLockState(p string) (lockState, error) {
	var st lockState
	b, err := os.ReadFile(p + ".lock")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("read its retention and legal hold: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read its retention and legal hold in %s: %w", p+".lock", err)
	}
	return st, nil
}

// extendTo changes a sidecar's retain-until to until where that is later:
// retention is extended, never shortened.
func extendTo(until time.Time) func(*lockState) {
	return func(st *lockState) {
		if until.After(st.RetainUntil) {
			st.RetainUntil = until.UTC()
		}
	}
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
	return writeLockState(p, fn)
}

// writeLockState changes the sidecar of the object at p with fn, under
// the lock of its directory: written whole to a temporary file, fsynced,
// renamed over the sidecar and the directory fsynced. A change that
// changes nothing writes nothing.
func writeLockState(p string, fn func(*lockState)) error {
	st, err := readLockState(p)
	if err != nil {
		return err
	}
	was := st
	fn(&st)
	if st == was {
		if _, err := os.Stat(p + ".lock"); err == nil {
			return nil
		}
	}
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
	return syncDir(filepath.Dir(p))
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
	return s.updateLock(loc.Key, extendTo(until))
}

// Delete implements ledger.ObjectStore: it refuses while the sidecar says
// the object is held or retained (or cannot be read), whatever the
// location says, then removes the file. An object an earlier release
// put, which wrote no sidecar at a put, may have none: its location's
// retain-until is kept.
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
	st, err := readLockState(p)
	if err != nil {
		return fmt.Errorf("delete %s: %w", loc.Key, err)
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
