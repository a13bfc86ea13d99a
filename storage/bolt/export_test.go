package bolt_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestExportOfANewerLayoutSaysItIsNewer: `ledgerd migrate --from` on a
// file a newer version wrote is refused as newer, without the advice for
// an older file (to start this version's ledgerd on it to convert it),
// which that ledgerd refuses too.
func TestExportOfANewerLayoutSaysItIsNewer(t *testing.T) {
	path := newerLayoutFile(t, nil)
	ex, err := bolt.OpenExport(path, time.Second)
	if err == nil {
		ex.Close()
		t.Fatal("a layout-12 file was opened for export")
	}
	if !errors.Is(err, bolt.ErrLayoutNew) || !strings.Contains(err.Error(), "layout 12") || strings.Contains(err.Error(), "converts it") {
		t.Errorf("export of a layout-12 file: %q; want bolt.ErrLayoutNew naming layout 12, without the advice to convert it", err)
	}
}

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

// TestExportLogStateHoldsTheDivergenceRecord: the export's log state
// carries the integrator's record that the published log diverged, and
// none once the record is cleared.
func TestExportLogStateHoldsTheDivergenceRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	record := []byte(`{"since":"2026-10-07T13:00:00Z","holder":"ledgerd-a","error":"another log in the bucket"}`)
	for _, want := range [][]byte{record, nil} {
		s, err := bolt.Open(path, bolt.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.SetLogDivergence(want) }); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		e, err := bolt.OpenExport(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.LogState()
		e.Close()
		if err != nil || !bytes.Equal(st.Diverged, want) || (want == nil) != (st.Diverged == nil) {
			t.Errorf("log state's divergence record: %q, %v; want %q", st.Diverged, err, want)
		}
	}
}
