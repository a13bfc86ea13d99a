package localdir_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

func TestWriteOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if _, err := s.Put(ctx, "rows/a.json", []byte("one"), until); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "rows/a.json", []byte("one"), until); err != nil {
		t.Fatalf("same bytes again: %v", err)
	}
	if _, err := s.Put(ctx, "rows/a.json", []byte("two"), until); !errors.Is(err, ledger.ErrObjectExists) {
		t.Fatalf("overwrite with other bytes: %v, want ErrObjectExists", err)
	}
	st, err := os.Stat(filepath.Join(dir, "rows", "a.json"))
	if err != nil || st.Mode().Perm() != 0o400 {
		t.Fatalf("file mode %v %v, want read-only", st.Mode(), err)
	}
	b, err := s.Get(ctx, "rows/a.json")
	if err != nil || string(b) != "one" {
		t.Fatalf("get: %q %v", b, err)
	}
	if _, err := s.Get(ctx, "rows/missing.json"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	for _, k := range []string{"../escape", "/abs", ""} {
		if _, err := s.Put(ctx, k, []byte("x"), until); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}

// TestPutAgainRetainsForTheNewPut: the same bytes put again with a later
// retain-until (a JWKS snapshot named anew while a deletion of its earlier
// copy is queued) are retained for the new put, so deleting the earlier
// location is refused and the file stays.
func TestPutAgainRetainsForTheNewPut(t *testing.T) {
	ctx := context.Background()
	s, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Put(ctx, "jwks/s.json", []byte("keys"), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "jwks/s.json", []byte("keys"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, old); err == nil {
		t.Fatal("deleting the earlier put's location removed an object the new put retains")
	}
	if b, err := s.Get(ctx, "jwks/s.json"); err != nil || string(b) != "keys" {
		t.Fatalf("after the refused delete: %q %v", b, err)
	}
}

// Writers putting the same object at once (two holders of the Merkle
// log's lease publishing one tile, a retried upload beside the first)
// all succeed, and a reader never sees part of it: an object appears
// whole or not at all.
func TestConcurrentPutsOfOneObject(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("a tile of the log "), 1<<16)
	until := time.Now().Add(time.Hour)
	for round := range 20 {
		key := fmt.Sprintf("log/tile/0/%03d", round)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 4 {
			wg.Go(func() {
				if _, err := s.Put(ctx, key, body, until); err != nil {
					errs <- err
				}
			})
			wg.Go(func() {
				if got, err := s.Get(ctx, key); err == nil && !bytes.Equal(got, body) {
					errs <- fmt.Errorf("a reader saw %d of the object's %d bytes", len(got), len(body))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: %v", key, err)
		}
		if got, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s after the puts: %d bytes, %v", key, len(got), err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "log", "tile", "0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("a temporary file was left behind: %s", e.Name())
		}
	}
}
