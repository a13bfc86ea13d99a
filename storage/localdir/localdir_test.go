package localdir_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
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

// The retain-until an object is put with is the store's own record: a
// location whose retain-until was edited away in the row store (a
// deletion queued with none) is refused while the object is retained.
func TestDeleteHonoursRetentionGivenAtPut(t *testing.T) {
	ctx := context.Background()
	s, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	loc, err := s.Put(ctx, "segments/2026-12-07/1-2.json", []byte(`{"a":1}`), time.Now().Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	loc.RetainUntil = time.Time{}
	if err := s.Delete(ctx, loc); err == nil {
		t.Fatal("deleting by a location without a retain-until removed an object put retained for 48 hours")
	}
	if b, err := s.Get(ctx, loc.Key); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("after the refused delete: %q %v", b, err)
	}
}

// The same bytes put again extend the retention recorded for the key and
// never shorten it.
func TestPutAgainNeverShortensRetention(t *testing.T) {
	ctx := context.Background()
	s, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	day := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	retained := func(want time.Time) {
		t.Helper()
		err := s.Delete(ctx, ledger.Location{Key: "jwks/s.json"})
		if err == nil || !strings.Contains(err.Error(), "retained until "+want.Format(time.RFC3339)) {
			t.Fatalf("delete: %v, want retained until %s", err, want.Format(time.RFC3339))
		}
	}
	for _, put := range []struct{ until, want time.Time }{
		{day, day},
		{day.Add(-12 * time.Hour), day},
		{time.Now().Add(-time.Hour), day},
		{day.Add(24 * time.Hour), day.Add(24 * time.Hour)},
	} {
		if _, err := s.Put(ctx, "jwks/s.json", []byte("keys"), put.until); err != nil {
			t.Fatal(err)
		}
		retained(put.want)
	}
}

// A put that crashed after recording the retention and before linking
// the object leaves a sidecar without an object: a later put of the key
// succeeds, keeps the later retain-until, and the object is retained.
func TestPutOverASidecarWithoutObject(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "segments", "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	left := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	if err := os.WriteFile(filepath.Join(dir, "segments", "d", "1-2.json.lock"), []byte(`{"retainUntil":"`+left+`","legalHold":false}`), 0o400); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := s.Put(ctx, "segments/d/1-2.json", []byte("bundle"), until); err != nil {
		t.Fatalf("put over a sidecar left without its object: %v", err)
	}
	if b, err := s.Get(ctx, "segments/d/1-2.json"); err != nil || string(b) != "bundle" {
		t.Fatalf("get: %q %v", b, err)
	}
	err = s.Delete(ctx, ledger.Location{Key: "segments/d/1-2.json"})
	if err == nil || !strings.Contains(err.Error(), until.Format(time.RFC3339)) {
		t.Fatalf("delete: %v, want retained until %s", err, until.Format(time.RFC3339))
	}
}

// A sidecar that cannot be read may hold the object: Delete refuses
// rather than read it as no hold and no retention.
func TestDeleteRefusesAnUnreadableSidecar(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := s.Put(ctx, "rows/a.json", []byte("one"), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	side := filepath.Join(dir, "rows", "a.json.lock")
	if err := os.Remove(side); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(side, []byte(`{"legalHold":tr`), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, loc); err == nil {
		t.Fatal("delete with a sidecar that cannot be read removed the object")
	}
	if _, err := s.Get(ctx, loc.Key); err != nil {
		t.Fatalf("after the refused delete: %v", err)
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
