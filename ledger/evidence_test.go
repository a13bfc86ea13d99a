package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// TestUploadedEvidenceLeavesTheRowStore records rows, uploads their
// evidence and checks that the row store no longer holds the bundles while
// every read (the evidence, VerifyRow, the integrity check) still has them:
// first from the cache of recent bundles, then, on a fresh ledger, from
// write-once storage; with the write-once objects gone, only the cache
// could have answered.
func TestUploadedEvidenceLeavesTheRowStore(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var rows []*ledger.Row
	for i := range 4 {
		r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "E-" + strconv.Itoa(i)})))
		rows = append(rows, r)
	}
	if _, err := h.l.UploadRound(ctx, 100, 2); err != nil {
		t.Fatal(err)
	}
	err := h.store.View(ctx, func(tx ledger.Tx) error {
		for _, r := range rows {
			if _, err := tx.Evidence(r.ID); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("the row store still holds the evidence of %s after upload: %v", r.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reads := func(what string) {
		t.Helper()
		for _, r := range rows {
			ev, err := h.l.Evidence(ctx, r.ID)
			if err != nil || ev.SHA256 != r.EvidenceSHA256 || ev.Evidence.ReceiptJWS == "" {
				t.Fatalf("%s: evidence of %s: %+v %v", what, r.ID, ev, err)
			}
			rv, err := h.l.VerifyRow(ctx, r.ID)
			if err != nil || !rv.Same {
				t.Fatalf("%s: VerifyRow %s: %+v %v", what, r.ID, rv, err)
			}
		}
		page, err := h.l.CheckIntegrity(ctx, 0, "")
		if err != nil || page.WormCompared != len(rows) || len(page.Findings) != 0 {
			t.Fatalf("%s: integrity %+v %v", what, page, err)
		}
	}
	reads("just uploaded")

	// A fresh ledger has nothing cached: reads take the write-once copies.
	h.store.Close()
	h.open(t)
	reads("after a restart")

	// With the write-once objects gone, the bundles read above are still
	// cached; a fresh ledger has no copy to read.
	removeObjects(t, h.objDir)
	for _, r := range rows {
		if ev, err := h.l.Evidence(ctx, r.ID); err != nil || ev.SHA256 != r.EvidenceSHA256 {
			t.Fatalf("cached evidence of %s: %v", r.ID, err)
		}
	}
	h.store.Close()
	h.open(t)
	if _, err := h.l.Evidence(ctx, rows[0].ID); err == nil {
		t.Fatal("evidence read with neither the row store's copy nor the write-once copy")
	}
}

// TestEvidenceCacheOff reads uploaded evidence with the cache turned off,
// from an object store that reads whole objects only (the bundle is cut
// out of its segment): once the write-once objects are gone, nothing
// answers.
func TestEvidenceCacheOff(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{})))
	if _, err := h.l.UploadRound(ctx, 100, 2); err != nil {
		t.Fatal(err)
	}
	objects, err := localdir.Open(h.objDir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), h.sc.Brands(), h.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: h.sc.Audience})
	wholeObjects := struct{ ledger.ObjectStore }{objects} // no GetRange
	l, err := ledger.New(h.store, wholeObjects, v, reg, ledger.Config{Logger: slog.New(slog.DiscardHandler), EvidenceCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := l.Evidence(ctx, r.ID)
	if err != nil || ev.SHA256 != r.EvidenceSHA256 {
		t.Fatalf("evidence: %v", err)
	}
	removeObjects(t, h.objDir)
	if _, err := l.Evidence(ctx, r.ID); err == nil {
		t.Fatal("evidence read without its write-once copy, with no cache")
	}
}

// removeObjects deletes every object of a local write-once directory, as
// a test may (the directory only refuses the ledger).
func removeObjects(t *testing.T, dir string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_ = os.Chmod(filepath.Dir(f), 0o700)
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// An edit of an uploaded bundle's write-once copy is seen by VerifyRow as
// by CheckIntegrity, though the bundle read just before is still cached.
func TestVerifyRowReadsTheWriteOnceCopy(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "V-1234"})))
	if _, err := h.l.UploadRound(ctx, 100, 2); err != nil {
		t.Fatal(err)
	}
	if rv, err := h.l.VerifyRow(ctx, r.ID); err != nil || !rv.Same {
		t.Fatalf("before the edit: %+v %v", rv, err)
	}
	if _, err := h.l.Evidence(ctx, r.ID); err != nil { // cached now
		t.Fatal(err)
	}
	edited := 0
	err := filepath.WalkDir(h.objDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("V-1234")) {
			return err
		}
		_ = os.Chmod(filepath.Dir(p), 0o700)
		_ = os.Chmod(p, 0o600)
		edited++
		return os.WriteFile(p, bytes.ReplaceAll(b, []byte("V-1234"), []byte("V-9999")), 0o400)
	})
	if err != nil || edited == 0 {
		t.Fatalf("editing the write-once copy: %d files, %v", edited, err)
	}
	rv, err := h.l.VerifyRow(ctx, r.ID)
	if err != nil || rv.Same || len(rv.Differences) == 0 || !strings.Contains(rv.Differences[0], "the evidence was edited") {
		t.Fatalf("after the edit: %+v %v", rv, err)
	}
	if page, err := h.l.CheckIntegrity(ctx, 0, ""); err != nil || len(page.Findings) != 1 {
		t.Fatalf("integrity after the edit: %+v %v", page, err)
	}
}
