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
