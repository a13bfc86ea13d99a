package localdir_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
