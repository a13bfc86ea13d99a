package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// editCopies replaces old with new (the same length) in every write-once
// object of dir that holds it, as anyone who can write to the directory
// may; it returns how many it edited.
func editCopies(t *testing.T, dir, old, new string) int {
	t.Helper()
	edited := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(old)) {
			return err
		}
		_ = os.Chmod(filepath.Dir(p), 0o700)
		_ = os.Chmod(p, 0o600)
		edited++
		return os.WriteFile(p, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o400)
	})
	if err != nil || edited == 0 {
		t.Fatalf("editing the write-once copy: %d files, %v", edited, err)
	}
	return edited
}

// TestEvidenceSaysWhetherTheStoredCopyMatchesTheRow: an uploaded bundle's
// write-once copy edited. While the cache holds the bundle uploaded (it
// hashed to the row's hash), Evidence answers with it and says it came
// from the cache, not from the stored copy; once the cache is cold it
// reads the copy and the answer carries both hashes, which differ. A
// bundle that differs is not cached: every read reads the copy again.
func TestEvidenceSaysWhetherTheStoredCopyMatchesTheRow(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-1234"})))
	ev, err := h.l.Evidence(ctx, r.ID)
	if err != nil || ev.ReadFrom != ledger.ReadFromRowStore || ev.RowSHA256 != r.EvidenceSHA256 || ev.SHA256 != r.EvidenceSHA256 || ev.Differs() {
		t.Fatalf("before upload: %+v %v", ev, err)
	}
	if _, err := h.l.UploadRound(ctx, 100, 2); err != nil {
		t.Fatal(err)
	}
	editCopies(t, h.objDir, "T-1234", "T-1235")

	// Warm: the bundle kept at upload, which hashed right.
	ev, err = h.l.Evidence(ctx, r.ID)
	if err != nil || ev.ReadFrom != ledger.ReadFromCache || ev.SHA256 != r.EvidenceSHA256 || ev.Differs() || ev.Evidence.Actions[0].Target != "T-1234" {
		t.Fatalf("from the cache: %+v %v", ev, err)
	}

	// Cold: the copy is read, and it differs.
	h.store.Close()
	h.open(t)
	for i := range 2 {
		ev, err = h.l.Evidence(ctx, r.ID)
		if err != nil || ev.ReadFrom != ledger.ReadFromWriteOnceCopy || !ev.Differs() || ev.RowSHA256 != r.EvidenceSHA256 ||
			ev.SHA256 == r.EvidenceSHA256 || ev.Evidence.Actions[0].Target != "T-1235" {
			t.Fatalf("read %d of the edited copy: %+v %v", i+1, ev, err)
		}
	}
}

// TestEvidenceSaysWhenTheRowStoreBundleDiffers: a bundle still in the row
// store (not uploaded yet) edited there: the answer says it read the row
// store and that the bundle differs; one that no longer decodes is an
// error that says it differs from the write-time hash.
func TestEvidenceSaysWhenTheRowStoreBundleDiffers(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-1234"})))
	put := func(edit func([]byte) []byte) {
		t.Helper()
		err := h.store.Update(ctx, func(tx ledger.Tx) error {
			b, err := tx.Evidence(r.ID)
			if err != nil {
				return err
			}
			return tx.PutEvidence(r.ID, edit(bytes.Clone(b)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(func(b []byte) []byte { return bytes.Replace(b, []byte("T-1234"), []byte("T-1235"), 1) })
	ev, err := h.l.Evidence(ctx, r.ID)
	if err != nil || ev.ReadFrom != ledger.ReadFromRowStore || !ev.Differs() || ev.RowSHA256 != r.EvidenceSHA256 || ev.SHA256 == r.EvidenceSHA256 {
		t.Fatalf("edited in the row store: %+v %v", ev, err)
	}
	put(func(b []byte) []byte { return b[1:] })
	if _, err := h.l.Evidence(ctx, r.ID); err == nil || !strings.Contains(err.Error(), "not the write-time "+r.EvidenceSHA256) {
		t.Fatalf("a bundle that no longer decodes: %v", err)
	}
}

// TestUploaderRefusesABundleEditedBeforeItsUpload: a row's bundle edited
// in the row store before its upload is not put in write-once storage:
// it moves to the dead letters, the reason and an ERROR line saying it
// does not hash to the row's write-time hash, while the other row's
// bundle of the round is uploaded.
func TestUploaderRefusesABundleEditedBeforeItsUpload(t *testing.T) {
	for _, old := range []bool{false, true} {
		name := "the entry keeps the write-time hash"
		if old {
			name = "an entry queued without it, checked against the row"
		}
		t.Run(name, func(t *testing.T) { testBundleEditedBeforeItsUpload(t, old) })
	}
}

func testBundleEditedBeforeItsUpload(t *testing.T, old bool) {
	h := newHarness(t)
	ctx := context.Background()
	edited, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-1234"})))
	honest, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-5678"})))
	err := h.store.Update(ctx, func(tx ledger.Tx) error {
		b, err := tx.Evidence(edited.ID)
		if err != nil {
			return err
		}
		out, err := tx.Outbox(100)
		if err != nil {
			return err
		}
		for _, e := range out {
			if e.Kind == ledger.ObjectEvidence && e.Ref == edited.ID && e.SHA256 != edited.EvidenceSHA256 {
				t.Errorf("the row's evidence entry keeps hash %q, want the row's write-time %s", e.SHA256, edited.EvidenceSHA256)
			}
		}
		if old {
			// As an older version queued it: no hash in the entry.
			for _, e := range out {
				if e.Kind != ledger.ObjectEvidence || e.SHA256 == "" {
					continue
				}
				if _, err := tx.Dequeue(e.Seq); err != nil {
					return err
				}
				e.SHA256 = ""
				if err := tx.Enqueue(e, time.Now()); err != nil {
					return err
				}
			}
		}
		return tx.PutEvidence(edited.ID, bytes.Replace(bytes.Clone(b), []byte("T-1234"), []byte("T-1235"), 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	out, err := h.l.Outbox(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(out.DeadLetters) != 1 || out.DeadLetters[0].Entry.Ref != edited.ID ||
		!strings.Contains(out.DeadLetters[0].Reason, "not the write-time "+edited.EvidenceSHA256) ||
		!strings.Contains(out.DeadLetters[0].Reason, "edited in the row store before its upload") {
		t.Fatalf("dead letters: %+v; want the edited row's bundle, refused", out.DeadLetters)
	}
	if _, err := h.l.WriteOnceCopy(ctx, ledger.EvidenceKey(edited.ID)); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the edited bundle's write-once copy: %v; want none", err)
	}
	if _, err := h.l.WriteOnceCopy(ctx, ledger.EvidenceKey(honest.ID)); err != nil {
		t.Fatalf("the other row's write-once copy: %v", err)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "not those the ledger wrote") {
		t.Fatalf("logs:\n%s\nwant an ERROR line for the edited bundle", logs)
	}
	filepath.WalkDir(h.objDir, func(p string, d fs.DirEntry, err error) error {
		if b, rerr := os.ReadFile(p); err == nil && !d.IsDir() && rerr == nil && bytes.Contains(b, []byte("T-1235")) {
			t.Errorf("write-once storage holds the edited bytes in %s", p)
		}
		return nil
	})
}
