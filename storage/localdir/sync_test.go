package localdir

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// recordSyncs makes syncDir record the folders it syncs for the test.
func recordSyncs(t *testing.T) func() []string {
	var mu sync.Mutex
	var synced []string
	was := syncDir
	syncDir = func(dir string) error {
		mu.Lock()
		synced = append(synced, dir)
		mu.Unlock()
		return was(dir)
	}
	t.Cleanup(func() { syncDir = was })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(synced)
	}
}

// A put into a new folder syncs each folder that gained an entry, from
// the key's own up to the store's: a power loss after the put returns
// cannot take the new folders and the object with them. The same holds
// for a version's new folder, and for the folders Open makes.
func TestNewFoldersAreSynced(t *testing.T) {
	ctx := context.Background()
	synced := recordSyncs(t)
	parent := t.TempDir()
	root := filepath.Join(parent, "data", "evidence")
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "segments/2026-12-07/1-2.json", []byte("bundle"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SwapVersion(ctx, "log/checkpoint", []byte("cp"), time.Now().Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	got := synced()
	for _, dir := range []string{
		parent,                          // gained data/
		filepath.Join(parent, "data"),   // gained evidence/
		root,                            // gained segments/ and log/
		filepath.Join(root, "segments"), // gained 2026-12-07/
		filepath.Join(root, "segments", "2026-12-07"),
		filepath.Join(root, "log"),
	} {
		if !slices.Contains(got, dir) {
			t.Errorf("%s was not synced; synced: %v", dir, got)
		}
	}
}
