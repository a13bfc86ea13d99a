package server

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestCompactGivesUpOnAFileTakenMeanwhile: a ledgerd that opens the file
// between Compact's closing the store and its copy holds the file's
// lock; Compact fails with ErrLocked after the open's 5 s rather than
// wait for it for ever.
func TestCompactGivesUpOnAFileTakenMeanwhile(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir = dir
	off := false
	cfg.MerkleLog.Enabled = &off
	cfg.Store.Path = filepath.Join(dir, "ledger.db")
	s, err := bolt.Open(cfg.Store.Path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var other *bolt.Store
	afterCompactClose = func(path string) {
		if other, err = bolt.Open(path, bolt.Config{}); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() {
		afterCompactClose = nil
		if other != nil {
			other.Close()
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := Compact(t.Context(), cfg, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, bolt.ErrLocked) {
			t.Errorf("compact of a file a ledgerd took meanwhile: %v, want ErrLocked", err)
		}
	case <-time.After(4 * compactLockWait):
		t.Fatalf("compact still waits for the file's lock after %s", 4*compactLockWait)
	}
}
