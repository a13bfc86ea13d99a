package bolt_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/verifier"
)

// editedStore writes rows a and b, applies edits to the closed file and
// opens it again.
func editedStore(t *testing.T, edits ...func(*bbolt.Tx) error) (s *bolt.Store, a, b string) {
	t.Helper()
	a, b = strings.Repeat("a", 64), strings.Repeat("b", 64)
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, id := range []string{a, b} {
			r := row(id)
			r.GrantID = "grant-1"
			r.Actions = []verifier.RowAction{{Tool: "cancel_order", Target: "A-5531"}}
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tamper.Apply(path, edits...); err != nil {
		t.Fatal(err)
	}
	return openLinked(t, path), a, b
}

// TestListingsServeNoCopyOfARow: an index entry an operator pointed at
// a copy of a row under another number (the copy edited, or the record
// the row's id leads to edited instead) makes a listing through that
// index fail with ledger.ErrStoreEdited naming the row, rather than
// show one version to a lookup and another to a read by id.
func TestListingsServeNoCopyOfARow(t *testing.T) {
	unauthorized := func(r *ledger.Row) { r.Status = ledger.Unauthorized }
	for _, tc := range []struct {
		name   string
		edits  func(id string) []func(*bbolt.Tx) error
		failed []ledger.Query // listings that must fail
		served []ledger.Query // listings that still serve the row as written
	}{
		{
			name: "the listed copy edited",
			edits: func(id string) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.IndexCopy(id, unauthorized)}
			},
			failed: []ledger.Query{
				{}, {Principal: "p"}, {Target: "A-5531"}, {GrantID: "grant-1"},
			},
		},
		{
			name: "the record by id edited",
			edits: func(id string) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.IndexCopy(id, nil), tamper.EditRow(id, unauthorized)}
			},
			failed: []ledger.Query{{}, {Principal: "p"}, {Target: "A-5531"}},
		},
		{
			name: "the lookups' copy edited, the time index left",
			edits: func(id string) []func(*bbolt.Tx) error {
				return []func(*bbolt.Tx) error{tamper.IndexCopy(id, unauthorized, "by_principal", "by_grant", "by_target")}
			},
			failed: []ledger.Query{{Principal: "p"}, {Target: "A-5531"}, {GrantID: "grant-1"}},
			served: []ledger.Query{{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := strings.Repeat("a", 64)
			s, _, _ := editedStore(t, tc.edits(a)...)
			err := s.View(t.Context(), func(tx ledger.Tx) error {
				for _, q := range tc.failed {
					q.PageSize = 10
					rows, _, err := tx.List(q)
					if !errors.Is(err, ledger.ErrStoreEdited) || !strings.Contains(err.Error(), "index entry for row "+a+" points at another record than its id") {
						t.Errorf("%s: got %d rows, %v; want ErrStoreEdited naming row %s", listing(q), len(rows), err, a)
					}
				}
				for _, q := range tc.served {
					q.PageSize = 10
					rows, _, err := tx.List(q)
					if err != nil || len(rows) != 2 || rows[1].ID != a || rows[1].Status != ledger.Authorized {
						t.Errorf("%s: got %d rows, %v; want both, row %s as written", listing(q), len(rows), err, a)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// listing names the listing q asks for.
func listing(q ledger.Query) string {
	return fmt.Sprintf("the listing (principal %q, target %q, grant %q)", q.Principal, q.Target, q.GrantID)
}

// TestReadsByIDServeNoUnlistedRecord: a record an operator wrote under
// an id with no index entries (a forged row), or a row's record whose
// entries were moved to a copy, is listed by no entry of the time index,
// and a read by id fails with ledger.ErrStoreEdited naming the row
// rather than serve what no listing shows. The rows left as written,
// first and later in their run of the index, are served.
func TestReadsByIDServeNoUnlistedRecord(t *testing.T) {
	a, forged := strings.Repeat("a", 64), strings.Repeat("f", 64)
	for _, tc := range []struct {
		name  string
		edits []func(*bbolt.Tx) error
		id    string
	}{
		{"a forged row with no index entries", []func(*bbolt.Tx) error{tamper.ForgeRow(a, forged), tamper.Unindex(forged)}, forged},
		{"a row's entries moved to a copy", []func(*bbolt.Tx) error{tamper.IndexCopy(a, nil)}, a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, b := editedStore(t, tc.edits...)
			err := s.View(t.Context(), func(tx ledger.Tx) error {
				r, err := tx.Row(tc.id)
				if !errors.Is(err, ledger.ErrStoreEdited) || !strings.Contains(err.Error(), "record of row "+tc.id+" is listed by no entry of its time index") {
					t.Errorf("Row(%s): got a row %v, %v; want ErrStoreEdited naming the row", tc.id, r != nil, err)
				}
				if r, err := tx.Row(b); err != nil || r.ID != b {
					t.Errorf("Row(%s), as written: got a row %v, %v", b, r != nil, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCheckIndexesNamesWhatLeadsElsewhere: CheckIndexes names, by row id
// and index, each index whose entries lead to a copy of a row, the
// record its id no longer leads to, and a record no entry of the time
// index lists; a store no one edited has none.
func TestCheckIndexesNamesWhatLeadsElsewhere(t *testing.T) {
	a, forged := strings.Repeat("a", 64), strings.Repeat("f", 64)
	other := func(index string) ledger.IndexFinding {
		return ledger.IndexFinding{RowID: a, Index: index, Problem: ledger.IndexOtherRecord}
	}
	unnamed := ledger.IndexFinding{RowID: a, Index: "row_seq", Problem: ledger.IndexUnnamedRecord}
	unlisted := func(id string) ledger.IndexFinding {
		return ledger.IndexFinding{RowID: id, Index: "by_time", Problem: ledger.IndexUnlistedRecord}
	}
	missing := func(id string, indexes ...string) []ledger.IndexFinding {
		var out []ledger.IndexFinding
		for _, ix := range indexes {
			out = append(out, ledger.IndexFinding{RowID: id, Index: ix, Problem: ledger.IndexMissingEntry})
		}
		return out
	}
	lookups := []string{"by_principal", "by_grant", "by_status", "by_class", "by_target"}
	unauthorized := func(r *ledger.Row) { r.Status = ledger.Unauthorized }
	every := []ledger.IndexFinding{other("by_principal"), other("by_grant"), other("by_target"), other("by_status"), other("by_class"), other("by_time")}
	for _, tc := range []struct {
		name  string
		edits []func(*bbolt.Tx) error
		want  []ledger.IndexFinding
	}{
		{"none", nil, nil},
		{"the listed copy edited", []func(*bbolt.Tx) error{tamper.IndexCopy(a, unauthorized)},
			slices.Concat(missing(a, lookups...), []ledger.IndexFinding{unlisted(a), unnamed}, every)},
		{"the record by id edited", []func(*bbolt.Tx) error{tamper.IndexCopy(a, nil), tamper.EditRow(a, unauthorized)},
			slices.Concat(missing(a, lookups...), []ledger.IndexFinding{unlisted(a), unnamed}, every)},
		{"the lookups' copy edited, the time index left", []func(*bbolt.Tx) error{tamper.IndexCopy(a, unauthorized, "by_principal", "by_grant", "by_target")},
			slices.Concat(missing(a, "by_principal", "by_grant", "by_target"), []ledger.IndexFinding{unnamed, other("by_principal"), other("by_grant"), other("by_target")})},
		{"a forged row with no index entries", []func(*bbolt.Tx) error{tamper.ForgeRow(a, forged), tamper.Unindex(forged)},
			append(missing(forged, lookups...), unlisted(forged))},
		{"an entry of one lookup's index removed", []func(*bbolt.Tx) error{tamper.Unindex(a, "by_target")},
			missing(a, "by_target")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := editedStore(t, tc.edits...)
			got, err := storetest.IndexFindings(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("CheckIndexes:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// A row issued past 2262 that a version before times were held to an
// int64 of nanoseconds wrote has its time entry under the key UnixNano's
// undefined answer gave (here 0's, as max(UnixNano, 0) may): it is an
// honest row, and a read by id serves it.
func TestARowPast2262KeyedByAnEarlierVersionIsServed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("c", 64)
	r := row(id)
	r.IssuedAt = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.CreateRow(r) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(btx *bbolt.Tx) error {
		b := btx.Bucket([]byte("by_time"))
		k, _ := b.Cursor().First()
		if k == nil {
			t.Fatal("no time entry")
		}
		k = append([]byte(nil), k...)
		if err := b.Delete(k); err != nil {
			return err
		}
		old := append([]byte{0}, binary.BigEndian.AppendUint64(nil, 0)...) // the earlier version's key
		return b.Put(append(old, k[9:]...), nil)
	})
	s = openLinked(t, path)
	err = s.View(t.Context(), func(tx ledger.Tx) error {
		_, err := tx.Row(id)
		return err
	})
	if err != nil {
		t.Fatalf("a read by id of the honest row: %v", err)
	}
}

// The drill pool serves a row only as a read by its id would: a forged
// record put in the pool, listed by no entry of the time index, fails the
// drill's read with ErrStoreEdited naming the row, where it was drilled
// as any other (a copy whose id leads elsewhere:
// TestTheDrillPoolServesNoCopy).
func TestTheDrillPoolServesNoEditedRecord(t *testing.T) {
	a, forged := strings.Repeat("a", 64), strings.Repeat("f", 64)
	for _, tc := range []struct {
		name  string
		edits []func(*bbolt.Tx) error
		want  string
	}{
		{"a forged record with no index entries", []func(*bbolt.Tx) error{tamper.ForgeRow(a, forged), tamper.Unindex(forged), tamper.AddToDrillPool(forged)},
			"record of row " + forged + " is listed by no entry of its time index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := editedStore(t, tc.edits...)
			err := s.View(t.Context(), func(tx ledger.Tx) error {
				var positions []uint64
				if err := tx.DrillPoolPositions(func(p uint64) { positions = append(positions, p) }); err != nil {
					return err
				}
				rows, err := tx.DrillPoolRows(positions)
				if !errors.Is(err, ledger.ErrStoreEdited) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("DrillPoolRows(%v): %d rows, %v; want ErrStoreEdited saying %q", positions, len(rows), err, tc.want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
