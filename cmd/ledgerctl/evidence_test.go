package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
)

// uploaded waits until every row's evidence is in write-once storage.
func (f *fixture) uploaded(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, out, _ := f.ctl(t, "auditor", "fsck")
		if strings.Contains(out, "0 still in the outbox") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("evidence never uploaded: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// editSegment changes one byte of row id's bundle inside its segment file
// in the local evidence directory (old becomes new, the same length), as
// anyone who can write to the directory may.
func (f *fixture) editSegment(t *testing.T, id, old, new string) {
	t.Helper()
	code, out, errs := f.ctl(t, "support", "--json", "evidence", id)
	var ev struct {
		Objects []struct {
			Name, Key      string
			Offset, Length int
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &ev) != nil {
		t.Fatalf("evidence --json: %d %s %s", code, out, errs)
	}
	for _, o := range ev.Objects {
		if o.Name != "evidence" {
			continue
		}
		p := filepath.Join(f.cfg.DataDir, "evidence", filepath.FromSlash(o.Key))
		if err := tamper.EditBundle(p, o.Offset, o.Length, old, new); err != nil {
			t.Fatalf("row %s: %v", id, err)
		}
		return
	}
	t.Fatalf("no evidence object for %s: %s", id, out)
}

// TestEvidenceWarnsWhenTheStoredBundleDiffers: a byte of a row's bundle
// flipped in its segment file. While the ledger still holds the bundle
// it uploaded in its cache, evidence prints that bundle (which hashes
// right) and says the stored copy was not read; once it reads the copy
// (after a restart), it prints a WARNING naming both hashes and exits 1.
func TestEvidenceWarnsWhenTheStoredBundleDiffers(t *testing.T) {
	f := start(t)
	f.uploaded(t)
	_, out, _ := f.ctl(t, "support", "--json", "show", f.rowID)
	var row struct {
		Row struct{ EvidenceSha256 string }
	}
	if err := json.Unmarshal([]byte(out), &row); err != nil || len(row.Row.EvidenceSha256) != 64 {
		t.Fatalf("show --json: %v %s", err, out)
	}
	want := row.Row.EvidenceSha256
	f.editSegment(t, f.rowID, "A-5531", "A-5532")

	code, out, errs := f.ctl(t, "support", "evidence", f.rowID)
	if code != 0 || !strings.Contains(out, want) || strings.Contains(out+errs, "WARNING") || !strings.Contains(out, "stored copy was not read") {
		t.Errorf("evidence from the cache: %d\n%s%s", code, out, errs)
	}

	f.stop()
	f.serve(t)
	code, out, errs = f.ctl(t, "support", "evidence", f.rowID)
	if code != exitCheckFailed || !strings.Contains(errs, "WARNING") || !strings.Contains(errs, want) || !strings.Contains(out, "A-5532") {
		t.Fatalf("evidence of an edited bundle: exit %d, want %d with a WARNING naming %s\n%s%s", code, exitCheckFailed, want, out, errs)
	}
	if !strings.Contains(errs, "fsck") || !strings.Contains(errs, "write-once copy") {
		t.Errorf("the warning says nothing of what to do:\n%s", errs)
	}
	// --json carries the row's hash beside the one read, and exits 1 too.
	code, out, _ = f.ctl(t, "support", "--json", "evidence", f.rowID)
	var ev struct{ EvidenceSha256, RowEvidenceSha256, ReadFrom string }
	if err := json.Unmarshal([]byte(out), &ev); err != nil || code != exitCheckFailed || ev.RowEvidenceSha256 != want || ev.EvidenceSha256 == want ||
		ev.ReadFrom != "EVIDENCE_READ_FROM_WRITE_ONCE_COPY" {
		t.Fatalf("evidence --json: %d %v %s", code, err, out)
	}
}

// evidence cuts a long value between characters: args whose 60th byte
// falls inside a character print whole characters, never half of one.
func TestEvidenceCutsLongArgsBetweenCharacters(t *testing.T) {
	f := start(t)
	args := `{"order":"A-5531","note":"x` + strings.Repeat("é", 40) + `"}` // 27 bytes, then 2 a character
	id := f.append(t, pacttest.Spec{User: "acct-48213", Target: "A-5531", ArgsJSON: args})
	code, out, errs := f.ctl(t, "support", "evidence", id)
	if code != 0 || !strings.Contains(out, args[:59]+"… (") || strings.Contains(out, `\x`) {
		t.Errorf("evidence: %d\n%s%s\nwant the args cut at byte 59, between characters", code, out, errs)
	}
}
