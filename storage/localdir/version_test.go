package localdir_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/objecttest"
	"github.com/pactledger/pactledger/storage/localdir"
)

// SwapVersion replaces a key's content atomically: the latest is read back,
// the file stays read-only, and no temporary file is left behind.
func TestSwapVersionReplaces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	var prev []byte
	for _, body := range []string{"origin\n1\nAAAA\n", "origin\n2\nBBBB\n"} {
		loc, err := s.SwapVersion(ctx, "log/checkpoint", []byte(body), until, prev)
		prev = []byte(body)
		if err != nil {
			t.Fatal(err)
		}
		if loc.Store != "dir" || loc.Key != "log/checkpoint" || !loc.RetainUntil.Equal(until.UTC()) {
			t.Fatalf("location %+v", loc)
		}
		got, err := s.Get(ctx, "log/checkpoint")
		if err != nil || string(got) != body {
			t.Fatalf("get: %q %v, want %q", got, err, body)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "log", "checkpoint"))
	if err != nil || st.Mode().Perm() != 0o400 {
		t.Fatalf("file mode %v %v, want read-only", st.Mode(), err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "log"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("log directory holds %v (%v), want the checkpoint only", entries, err)
	}
	for _, k := range []string{"../escape", "/abs", ""} {
		if _, err := s.SwapVersion(ctx, k, []byte("x"), until, nil); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}

// SwapVersion replaces a key's content only over what the writer read.
func TestSwapVersionOnlyOverWhatWasRead(t *testing.T) {
	s, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objecttest.SwapVersion(t, s)
}
