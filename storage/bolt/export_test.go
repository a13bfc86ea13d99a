package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/pactledger/pactledger/storage/bolt"
)

// TestExportLogIndexInChunks: the export of leaf indexes, kept in two
// buckets, yields every sequenced leaf once whatever the chunk size.
func TestExportLogIndexInChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	s := openLinked(t, path)
	if err := s.Update(t.Context(), populateFixture); err != nil {
		t.Fatal(err)
	}
	s.Close()
	e, err := bolt.OpenExport(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, n := range []int{1000, 61, 60, 7, 5, 1} {
		var after []byte
		total := 0
		for {
			recs, err := e.Records(bolt.ExportLogIndex, after, n)
			if err != nil {
				t.Fatal(err)
			}
			total += len(recs)
			if len(recs) < n {
				break
			}
			after = recs[len(recs)-1].Key
		}
		if total != 61 {
			t.Errorf("log leaf index in chunks of %d: %d records, want 61 (every sequenced leaf)", n, total)
		}
	}
}
