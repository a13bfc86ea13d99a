package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

func mkdirAll(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	return nil
}

// diskSpace returns the bytes available to ledgerd and the size of the
// filesystem holding dir.
func diskSpace(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// probeSize is how much probeWrite writes: a few bbolt pages.
const probeSize = 64 << 10

// probeWrite reports whether dir's filesystem takes a small write now: it
// creates, fills and removes a probe file. It catches what free space does
// not show, such as an exhausted quota.
func probeWrite(dir string) (err error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	path := filepath.Join(dir, ".write-probe-"+hex.EncodeToString(b))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.Remove(path)) }()
	_, werr := f.Write(make([]byte, probeSize))
	return errors.Join(werr, f.Close())
}
