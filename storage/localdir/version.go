package localdir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// SwapVersion writes body as the new content of key: the one object that
// changes, such as the Merkle log's live checkpoint (C2SP tlog-tiles
// "checkpoint"), only while the key holds prev (nil: while there is no
// key), so that two writers cannot each replace what the other wrote
// after reading it; otherwise it returns an error wrapping
// ledger.ErrObjectChanged. Writers take an exclusive lock on the key's
// directory (flock(2), which holds between processes) around the
// comparison and the write. The body goes to a temporary file beside the
// key, is fsynced and made read-only, then renamed over the key and the
// directory fsynced, so a reader sees the old content or the new, never
// a part.
//
// This is weaker than S3, where each version stays locked: a directory
// keeps only the latest content, and retainUntil holds against Delete
// only (it is recorded in the key's sidecar before the rename, as Put
// records it, and never shortened), not against the next SwapVersion or
// anyone with write access to the directory. Everything the latest
// checkpoint says is also in the write-once checkpoints the log keeps by
// size.
func (s *Store) SwapVersion(_ context.Context, key string, body []byte, retainUntil time.Time, prev []byte) (ledger.Location, error) {
	loc := ledger.Location{Store: "dir", Bucket: s.dir, Key: key, RetainUntil: retainUntil.UTC()}
	p, err := s.path(key)
	if err != nil {
		return loc, err
	}
	dir := filepath.Dir(p)
	if err := s.folder(dir); err != nil {
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	defer unlock()
	have, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if prev != nil {
			return loc, fmt.Errorf("put a version of %s: %w: it is gone", key, ledger.ErrObjectChanged)
		}
	case err != nil:
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	case prev == nil || !bytes.Equal(have, prev):
		return loc, fmt.Errorf("put a version of %s: %w", key, ledger.ErrObjectChanged)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	tmp := f.Name()
	if err := writeLocked(f, body); err != nil {
		_ = os.Remove(tmp)
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	if err := writeLockState(p, extendTo(loc.RetainUntil)); err != nil {
		_ = os.Remove(tmp)
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	if err := syncDir(dir); err != nil {
		return loc, fmt.Errorf("put a version of %s: %w", key, err)
	}
	return loc, nil
}

// writeLocked writes body to f, fsyncs it, makes it read-only and closes it.
func writeLocked(f *os.File, body []byte) error {
	if _, err := f.Write(body); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o400); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ListKept implements ledger.KeptLister from a listing of the key's
// directory. A directory keeps no versions and no delete markers: a
// removed file is gone, so no key is ever hidden, and Get reads each.
// Temporary files of puts in progress and the sidecars of holds and
// retention are no keys.
func (s *Store) ListKept(_ context.Context, prefix string, fn func(ledger.KeptKey) error) error {
	return s.eachEntry(prefix, func(folder string, e fs.DirEntry) error {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".lock") {
			return nil
		}
		return fn(ledger.KeptKey{Key: folder + n})
	})
}

// ListFolders implements ledger.FolderLister from a listing of the
// prefix's directory: each directory in it whose name starts with the
// rest of prefix.
func (s *Store) ListFolders(_ context.Context, prefix string, fn func(string) error) error {
	return s.eachEntry(prefix, func(folder string, e fs.DirEntry) error {
		if n := e.Name(); e.IsDir() && !strings.HasPrefix(n, ".") {
			return fn(folder + n + "/")
		}
		return nil
	})
}

// eachEntry calls fn with each entry of prefix's directory (the part of
// prefix up to its last slash, folder) whose name starts with the rest of
// prefix, a page at a time: a directory of many keys is not held whole.
func (s *Store) eachEntry(prefix string, fn func(folder string, e fs.DirEntry) error) error {
	folder, name := "", prefix
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		folder, name = prefix[:i+1], prefix[i+1:]
	}
	dir := s.dir
	if folder != "" {
		p, err := s.path(folder)
		if err != nil {
			return err
		}
		dir = p
	}
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(1000)
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), name) {
				continue
			}
			if err := fn(folder, e); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
	}
}
