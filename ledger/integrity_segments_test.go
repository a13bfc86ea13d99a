package ledger_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// copyRowStore closes the ledger's bbolt file, returns its bytes and
// opens it again: a backup taken while ledgerd is stopped.
func copyRowStore(t *testing.T, h *harness) []byte {
	t.Helper()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(h.dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	h.open(t)
	return b
}

// putBackRowStore closes the ledger's bbolt file, writes backup over it
// and opens it again: the row store restored from that backup.
func putBackRowStore(t *testing.T, h *harness, backup []byte) {
	t.Helper()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "ledger.db"), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	h.open(t)
}

// A row store put back to a copy taken before two rows were recorded, the
// Merkle log off: the rows' evidence reached write-once storage in a
// segment the restored row store does not record, and nothing else tells
// of them. fsck names each, with its segment; the row kept in the copy is
// no finding.
func TestIntegrityFindsRowsLostFromTheRowStoreInSegments(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *harness
	}{
		{"local directory", func(t *testing.T) *harness { return newHarness(t) }},
		{"S3", func(t *testing.T) *harness { return s3Harness(t, s3test.Bucket()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.open(t)
			kept, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "KEPT-1"})))
			h.drain(t)
			backup := copyRowStore(t, h)
			var lost []*ledger.Row
			for _, target := range []string{"LOST-1", "LOST-2"} {
				r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: target})))
				lost = append(lost, r)
			}
			h.drain(t)
			seg := location(t, h, ledger.EvidenceKey(lost[0].ID)).Key
			if !strings.HasPrefix(seg, "segments/") || location(t, h, ledger.EvidenceKey(lost[1].ID)).Key != seg {
				t.Fatalf("the lost rows are not in one segment: %s", seg)
			}
			if p := problems(integrity(t, h)); p != "" {
				t.Fatalf("an honest ledger has findings:\n%s", p)
			}
			putBackRowStore(t, h, backup)
			got := integrity(t, h)
			byRow := map[string]ledger.Finding{}
			for _, f := range got.Findings {
				byRow[f.RowID] = f
			}
			for _, r := range lost {
				f, ok := byRow[r.ID]
				if !ok {
					t.Errorf("row %s, lost from the row store, is named by no finding:\n%s", r.ID, problems(got))
					continue
				}
				want := "row " + r.ID + "'s evidence is in write-once storage (segment " + seg + "), but the row store holds neither the row nor its tombstone"
				if !strings.Contains(f.Problem, want) || f.Restorable {
					t.Errorf("finding of row %s = %q (restorable %v), want %q, not restorable", r.ID, f.Problem, f.Restorable, want)
				}
			}
			if f, ok := byRow[kept.ID]; ok {
				t.Errorf("the row the copy kept is a finding: %s", f.Problem)
			}
			if len(got.Findings) != len(lost) {
				t.Errorf("got %d findings, want %d:\n%s", len(got.Findings), len(lost), problems(got))
			}
		})
	}
}

// Rows a retention sweep removed leave tombstones, and their segment,
// counted no more, stays in write-once storage until its deletion is
// done: fsck reads it and finds each of its rows swept, no finding.
func TestIntegrityReadsSweptRowsSegmentsWithoutFindings(t *testing.T) {
	h := newHarness(t)
	var rows []*ledger.Row
	for _, target := range []string{"SWEPT-1", "SWEPT-2"} {
		r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: target})))
		rows = append(rows, r)
	}
	h.drain(t)
	seg := location(t, h, ledger.EvidenceKey(rows[0].ID)).Key
	res := h.sweepAt(t, rows[0].RetainUntil.Add(48*time.Hour))
	if len(res.Swept) != len(rows) {
		t.Fatalf("swept %d rows, want %d", len(res.Swept), len(rows))
	}
	if _, err := os.Stat(filepath.Join(h.objDir, filepath.FromSlash(seg))); err != nil {
		t.Fatalf("the swept rows' segment is not kept until its deletion: %v", err)
	}
	if p := problems(integrity(t, h)); p != "" {
		t.Errorf("swept rows are findings:\n%s", p)
	}
}
