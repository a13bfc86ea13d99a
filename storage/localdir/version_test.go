package localdir_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/objecttest"
	"github.com/pactledger/pactledger/ledger"
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
	if err != nil || len(entries) != 2 || entries[0].Name() != "checkpoint" || entries[1].Name() != "checkpoint.lock" {
		t.Fatalf("log directory holds %v (%v), want the checkpoint and its sidecar only", entries, err)
	}
	for _, k := range []string{"../escape", "/abs", ""} {
		if _, err := s.SwapVersion(ctx, k, []byte("x"), until, nil); err == nil {
			t.Errorf("key %q accepted", k)
		}
	}
}

// The retain-until a version is written with is recorded with it, as a
// put's is: a location without it (edited in the row store) deletes
// nothing retained, and a later version never shortens it.
func TestSwapVersionRecordsItsRetention(t *testing.T) {
	ctx := context.Background()
	s, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	if _, err := s.SwapVersion(ctx, "log/checkpoint", []byte("one"), until, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SwapVersion(ctx, "log/checkpoint", []byte("two"), time.Now().Add(-time.Hour), []byte("one")); err != nil {
		t.Fatal(err)
	}
	err = s.Delete(ctx, ledger.Location{Key: "log/checkpoint"})
	if err == nil || !strings.Contains(err.Error(), until.Format(time.RFC3339)) {
		t.Fatalf("delete by a location without a retain-until: %v, want retained until %s", err, until.Format(time.RFC3339))
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

// ListKept lists the keys of one folder: none is hidden in a directory,
// and the folders below, temporary files and sidecars are no keys.
func TestListKeptListsTheFolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if _, err := s.SwapVersion(ctx, "log/checkpoint", []byte("cp"), until, nil); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"log/checkpoints/10", "log/checkpoints/7", "log/checkpoints/sub/1"} {
		if _, err := s.Put(ctx, key, []byte(key), until); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ExtendRetention(ctx, ledger.Location{Key: "log/checkpoints/7"}, until.Add(time.Hour)); err != nil { // a sidecar
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "log", "checkpoints", ".8.123.tmp"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	list := func(prefix string) string {
		t.Helper()
		var keys []string
		if err := s.ListKept(ctx, prefix, func(k ledger.KeptKey) error {
			if k.Hidden || k.Version != "" {
				t.Errorf("%s: %+v, want neither hidden nor a version", k.Key, k)
			}
			keys = append(keys, k.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(keys)
		return strings.Join(keys, ",")
	}
	if got := list("log/checkpoints/"); got != "log/checkpoints/10,log/checkpoints/7" {
		t.Errorf("ListKept(log/checkpoints/) = %s", got)
	}
	if got := list("log/checkpoint"); got != "log/checkpoint" {
		t.Errorf("ListKept(log/checkpoint) = %s", got)
	}
	if got := list("nothing/here/"); got != "" {
		t.Errorf("ListKept of a missing folder = %s", got)
	}
	var _ ledger.KeptLister = s
}
