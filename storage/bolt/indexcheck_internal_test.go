package bolt

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/verifier"
)

// checkOne writes r, edits the file with edit (given r's row number), and
// returns what CheckIndexes finds.
func checkOne(t *testing.T, r *ledger.Row, edit func(btx *bolt.Tx, seq []byte) error) []ledger.IndexFinding {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	update(t, s, func(tx ledger.Tx) error { return tx.CreateRow(r) })
	if edit != nil {
		if err := s.db.Update(func(btx *bolt.Tx) error { return edit(btx, RowNumber(btx, r.ID)) }); err != nil {
			t.Fatal(err)
		}
	}
	got, err := storetest.IndexFindings(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// fsck's check of each record's index entries: a row issued past 2262 is
// checked where this version keys it, an entry of the time index moved
// to another time is found, and a value that held bytes that were not
// UTF-8 (the record keeps U+FFFD for them) is not judged.
func TestCheckEntriesOfRowsAtTheEdges(t *testing.T) {
	id := strings.Repeat("b", 64)
	missing := func(indexes ...string) []ledger.IndexFinding {
		var out []ledger.IndexFinding
		for _, ix := range indexes {
			out = append(out, ledger.IndexFinding{RowID: id, Index: ix, Problem: ledger.IndexMissingEntry})
		}
		return out
	}
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	newRow := func(issued time.Time, target string) *ledger.Row {
		return &ledger.Row{ID: id, Kind: ledger.KindReceipt, Status: ledger.Authorized, Principal: "p", GrantID: "g", IssuedAt: issued,
			Actions: []verifier.RowAction{{Tool: "cancel_order", Target: target}}}
	}
	drop := func(names ...string) func(btx *bolt.Tx, seq []byte) error {
		return func(btx *bolt.Tx, seq []byte) error { return DropIndexEntries(btx, seq, names...) }
	}
	for _, tc := range []struct {
		name string
		r    *ledger.Row
		edit func(btx *bolt.Tx, seq []byte) error
		want []ledger.IndexFinding
	}{
		{"an honest row past 2262", newRow(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), "A-1"), nil, nil},
		{"a row past 2262 hidden from lookups", newRow(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), "A-1"), drop("by_principal", "by_target"), missing("by_principal", "by_target")},
		{"its time entry moved", newRow(at, "A-1"), func(btx *bolt.Tx, seq []byte) error {
			b := btx.Bucket(ixTime)
			p := indexPosting(at, seq)
			if err := deleteEntry(b, indexPrefix(""), p); err != nil {
				return err
			}
			return insertEntry(b, indexPrefix(""), indexPosting(at.AddDate(0, 0, -300), seq))
		}, missing("by_time")},
		{"a target that held bytes that were not UTF-8", newRow(at, "A-\xff"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkOne(t, tc.r, tc.edit); !slices.Equal(got, tc.want) {
				t.Errorf("CheckIndexes:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// A copy of a row's record under another number, put in the drill pool,
// is not drilled: its id leads to the row's own record, and the pool's
// read fails with ErrStoreEdited naming the row.
func TestTheDrillPoolServesNoCopy(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := strings.Repeat("c", 64)
	update(t, s, func(tx ledger.Tx) error {
		return tx.CreateRow(&ledger.Row{ID: id, Kind: ledger.KindReceipt, Status: ledger.Authorized, Principal: "p", IssuedAt: time.Now()})
	})
	copyAt := uint64(1 << 20)
	if err := s.db.Update(func(btx *bolt.Tx) error {
		v := btx.Bucket(bRowData).Get(RowNumber(btx, id))
		if err := btx.Bucket(bRowData).Put(seqKey(copyAt), append([]byte(nil), v...)); err != nil {
			return err
		}
		return setPoolBit(btx.Bucket(bDrillPool), copyAt, true)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		rows, err := tx.DrillPoolRows([]uint64{copyAt})
		if !errors.Is(err, ledger.ErrStoreEdited) || !strings.Contains(err.Error(), "leads to a record of row "+id+" that its id does not lead to") {
			t.Errorf("DrillPoolRows of the copy: %d rows, %v; want ErrStoreEdited naming row %s", len(rows), err, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
