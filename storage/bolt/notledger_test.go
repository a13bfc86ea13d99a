package bolt_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/storage/bolt"
)

// TestOpenRefusesAnotherProgramsFile: a bbolt file that is not a
// ledger's (the Provider's provider.db given as store.path) is refused
// with a plain message, and nothing is written to it; a new file, and
// an existing empty one, are a new ledger's.
func TestOpenRefusesAnotherProgramsFile(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "provider.db")
	db, err := bbolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{"contexts", "grants", "pipeline", "device_codes"} {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bolt.Open(other, bolt.Config{})
	if err == nil {
		s.Close()
		t.Fatal("another program's bbolt file was opened as a ledger's")
	}
	if !errors.Is(err, bolt.ErrNotLedger) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), `"contexts"`) || !strings.Contains(err.Error(), "nothing was written to it") {
		t.Fatalf("open of another program's file: %v", err)
	}
	if after, err := os.ReadFile(other); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the refused file changed (%d bytes, was %d): %v", len(after), len(before), err)
	}

	empty := filepath.Join(dir, "empty.db")
	if db, err = bbolt.Open(empty, 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{empty, filepath.Join(dir, "new.db")} {
		s, err := bolt.Open(path, bolt.Config{})
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// And again, as a ledger's file now.
		if s, err = bolt.Open(path, bolt.Config{}); err != nil {
			t.Fatalf("open %s again: %v", path, err)
		}
		s.Close()
	}
}
