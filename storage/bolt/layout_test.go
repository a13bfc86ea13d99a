package bolt_test

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/verifier"
)

// layout1File copies testdata/layout1.db.gz, a file the previous layout
// wrote with populateFixture, into a temporary directory.
func layout1File(t *testing.T) string {
	t.Helper()
	f, err := os.Open("testdata/layout1.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// freshFixture is a new store holding populateFixture's records.
func freshFixture(t *testing.T) *bolt.Store {
	t.Helper()
	s := openLinked(t, filepath.Join(t.TempDir(), "fresh.db"))
	if err := s.Update(t.Context(), populateFixture); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLayout1FileConverts: a file the previous layout wrote opens, is
// converted once, and answers every read as a new store holding the same
// records does; the old buckets are gone.
func TestLayout1FileConverts(t *testing.T) {
	path := layout1File(t)
	got := openLinked(t, path)
	sameRecords(t, got, freshFixture(t))
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		for _, b := range []string{"rows", "ix_time", "ix_principal", "ix_expiry", "request_jwt", "log_index", "objects", "snapshot_rows", "snapshot_refs", "snapshot_links"} {
			if tx.Bucket([]byte(b)) != nil {
				t.Errorf("bucket %s of the previous layout is still there", b)
			}
		}
		if v := tx.Bucket([]byte("meta")).Get([]byte("layout")); !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 0, 0, 11}) {
			t.Errorf("layout mark %x, want 11", v)
		}
		if tx.Bucket([]byte("meta")).Get([]byte("compact pending")) != nil {
			t.Error("the converted file is still marked for compaction")
		}
		return nil
	})
	sameRecords(t, openLinked(t, path), freshFixture(t))
}

// longRequestJWTKeys takes the fixture's request-JWT hashes back to the
// keys of layouts 2 to 6: their 32 bytes.
func longRequestJWTKeys(tx *bbolt.Tx) error {
	b := tx.Bucket([]byte("request_jwts"))
	for _, r := range fixtureRows(60) {
		long, _ := hex.DecodeString(r.RequestJWTSHA256)
		if v := b.Get(long[:16]); v != nil {
			if err := b.Put(long, append([]byte(nil), v...)); err != nil {
				return err
			}
			if err := b.Delete(long[:16]); err != nil {
				return err
			}
		}
	}
	n := 0
	err := b.ForEach(func(k, _ []byte) error {
		if len(k) != 32 {
			return fmt.Errorf("request-JWT key %x left", k)
		}
		n++
		return nil
	})
	if err == nil && n < 50 {
		err = fmt.Errorf("%d request-JWT keys, want the fixture's", n)
	}
	return err
}

// fixtureFile writes the fixture to a new file of this layout, closed,
// with its row numbers and request JWTs under a key each, as layouts
// before 9 kept them (layout 9 reads them as runs of one): the tests take
// it back to older layouts from there.
func fixtureFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := openLinked(t, path)
	if err := s.Update(t.Context(), populateFixture); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	unrunIDs(t, path)
	return path
}

// unrunIDs takes the file at path's row numbers and request JWTs out of
// runs (bolt.Layout8IDs).
func unrunIDs(t *testing.T, path string) {
	t.Helper()
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		_, err := bolt.Layout8IDs(tx)
		return err
	})
}

// TestLayout2FileGetsDrillPool: a file of layout 2 (layout 3 without the
// drill pool) gets its pool filled from its rows at open, and answers as a
// new store does.
func TestLayout2FileGetsDrillPool(t *testing.T) {
	path := fixtureFile(t)
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket([]byte("drill_pool")); err != nil {
			return err
		}
		if err := longRequestJWTKeys(tx); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), []byte{0, 0, 0, 0, 0, 0, 0, 2})
	})
	got := openLinked(t, path)
	var n int
	if err := got.View(t.Context(), func(tx ledger.Tx) error {
		var err error
		n, _, _, err = tx.DrillPool()
		return err
	}); err != nil || n == 0 {
		t.Fatalf("drill pool after the conversion: %d rows, %v", n, err)
	}
	sameRecords(t, got, freshFixture(t))
}

// TestMarkedFileIsCompacted: a file marked for compaction (a conversion
// whose copy was cut short: the mark set, a partial copy left beside it)
// is copied without its free pages at the next open, answers as before,
// and the partial copy is gone.
func TestMarkedFileIsCompacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := openLinked(t, path)
	if err := s.Update(t.Context(), populateFixture); err != nil {
		t.Fatal(err)
	}
	// Pages to free: rows written and swept again.
	err := s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, r := range fixtureRows(3000)[100:] {
			r.ID = fixtureID("gone " + r.ID)
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, r := range fixtureRows(3000)[100:] {
			r.ID = fixtureID("gone " + r.ID)
			if err := tx.RemoveRow(r, ledger.Tombstone{ID: r.ID}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("compact pending"), []byte{1})
	})
	if err := os.WriteFile(path+".compacting", []byte("a copy cut short"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := freePages(t, path)
	got := openLinked(t, path)
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	after := freePages(t, path)
	if after*4 > before {
		t.Errorf("free pages %d before the compaction, %d after: want a quarter at most", before, after)
	}
	if _, err := os.Stat(path + ".compacting"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy beside the file: %v, want it gone", err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("meta")).Get([]byte("compact pending")) != nil {
			t.Error("the compacted file is still marked")
		}
		return nil
	})
	want := freshFixture(t)
	err = want.Update(t.Context(), func(tx ledger.Tx) error {
		for _, r := range fixtureRows(3000)[100:] {
			tomb := ledger.Tombstone{ID: fixtureID("gone " + r.ID)}
			r.ID = tomb.ID
			if err := tx.CreateRow(r); err != nil {
				return err
			}
			if err := tx.RemoveRow(r, tomb); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, openLinked(t, path), want)
}

// freePages counts the free pages of the closed file at path.
func freePages(t *testing.T, path string) int {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return db.Stats().FreePageN
}

// TestLayoutConversionResumes: a conversion stopped after some of its
// transactions (as by a crash) resumes at the next open and ends with the
// same records, none twice.
func TestLayoutConversionResumes(t *testing.T) {
	path := layout1File(t)
	stop := errors.New("stopped")
	for _, at := range []string{"rows", "request JWTs", "leaf index", "objects", "drill pool"} {
		batches := 0
		restore := bolt.SetConversionHooks(7, func(pass string) error {
			if pass != at {
				return nil
			}
			if batches++; batches == 2 {
				return stop
			}
			return nil
		})
		s, err := bolt.Open(path, bolt.Config{})
		restore()
		if err == nil {
			s.Close()
			t.Fatalf("stopping the %s pass: the open succeeded", at)
		}
		if !errors.Is(err, stop) {
			t.Fatalf("stopping the %s pass: %v", at, err)
		}
	}
	sameRecords(t, openLinked(t, path), freshFixture(t))
}

// TestNewerLayoutIsRefused: a file marked with a later layout is not
// opened.
func TestNewerLayoutIsRefused(t *testing.T) {
	path := newerLayoutFile(t, nil)
	if s, err := bolt.Open(path, bolt.Config{}); err == nil || !strings.Contains(err.Error(), "layout 12") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open of a layout-12 file: %v, want a refusal naming layout 12", err)
	}
}

// TestNewerLayoutFileIsLeftUntouched: the refusal of a file a newer
// version wrote writes nothing to it: not this version's buckets (here
// one a later layout dropped), not a transaction of any kind.
func TestNewerLayoutFileIsLeftUntouched(t *testing.T) {
	path := newerLayoutFile(t, func(tx *bbolt.Tx) error { return tx.DeleteBucket([]byte("ids_pending")) })
	lastTx := func() (id int, pending bool) {
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.View(func(tx *bbolt.Tx) error {
			id, pending = tx.ID(), tx.Bucket([]byte("ids_pending")) != nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return id, pending
	}
	before, _ := lastTx()
	s2, err := bolt.Open(path, bolt.Config{})
	if err == nil {
		s2.Close()
		t.Fatal("a layout-12 file was opened")
	}
	if !errors.Is(err, bolt.ErrLayoutNew) || !strings.Contains(err.Error(), "layout 12") {
		t.Errorf("open of a layout-12 file: %v, want bolt.ErrLayoutNew naming layout 12", err)
	}
	if after, pending := lastTx(); after != before || pending {
		t.Errorf("the refused file was written to: last write transaction %d before the open, %d after; bucket ids_pending created: %v", before, after, pending)
	}
}

// sameRecords compares what got and want answer for every read of the
// fixture. Rows that tie on time may list in another order (a converted
// file numbers rows in id order, a new one in commit order), so listings
// are compared in (time, id) order and checked to run newest first.
func sameRecords(t *testing.T, got, want ledger.Store) {
	t.Helper()
	rows := fixtureRows(60)
	read := func(s ledger.Store, fn func(tx ledger.Tx) (string, error)) string {
		t.Helper()
		var out string
		if err := s.View(t.Context(), func(tx ledger.Tx) error {
			var err error
			out, err = fn(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	check := func(what string, fn func(tx ledger.Tx) (string, error)) {
		t.Helper()
		if g, w := read(got, fn), read(want, fn); g != w {
			t.Errorf("%s:\n got %s\nwant %s", what, g, w)
		}
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	for _, r := range rows {
		check("row "+r.ID[:8], func(tx ledger.Tx) (string, error) {
			row, err := tx.Row(r.ID)
			if errors.Is(err, ledger.ErrNotFound) {
				tomb, terr := tx.Tombstone(r.ID)
				return "swept " + js(tomb), terr
			}
			return js(row), err
		})
		check("request JWT of "+r.ID[:8], func(tx ledger.Tx) (string, error) { return tx.RowByRequestJWT(r.RequestJWTSHA256) })
		check("object of "+r.ID[:8], func(tx ledger.Tx) (string, error) {
			loc, err := tx.Object(ledger.EvidenceKey(r.ID))
			return js(loc), err
		})
	}
	for _, key := range []string{"segments/2026-09-01/1.seg", ledger.SnapshotKey(fixtureID("snap-a"))} {
		check("object "+key, func(tx ledger.Tx) (string, error) {
			loc, err := tx.Object(key)
			return js(loc), err
		})
	}
	for _, snap := range []string{fixtureID("snap-a"), fixtureID("snap-b"), fixtureID("snap-c"), fixtureID("snap-d")} {
		check("snapshot in use "+snap[:8], func(tx ledger.Tx) (string, error) {
			in, err := tx.SnapshotInUse(snap)
			return fmt.Sprint(in), err
		})
	}
	check("leaves", func(tx ledger.Tx) (string, error) {
		var out []string
		for i := int64(0); ; i++ {
			ref, data, err := tx.Leaf(i)
			if errors.Is(err, ledger.ErrNotFound) {
				break
			}
			if err != nil {
				return "", err
			}
			idx, err := tx.LeafIndex(ref)
			if err != nil {
				return "", err
			}
			out = append(out, fmt.Sprintf("%d %s %s %d", i, ref, data, idx))
		}
		pending, err := tx.PendingLeaves(100)
		for _, p := range pending {
			out = append(out, "queued "+p.Ref)
		}
		return strings.Join(out, "\n"), err
	})
	check("rows by id", func(tx ledger.Tx) (string, error) {
		var ids []string
		after := ""
		for {
			page, next, err := tx.RowsByID(after, 7)
			if err != nil {
				return "", err
			}
			for _, r := range page {
				ids = append(ids, r.ID)
			}
			if after = next; after == "" {
				return strings.Join(ids, " "), nil
			}
		}
	})
	check("expired", func(tx ledger.Tx) (string, error) {
		var ids []string
		after := ""
		for {
			page, next, err := tx.Expired(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), after, 5)
			if err != nil {
				return "", err
			}
			for _, r := range page {
				ids = append(ids, r.RetainUntil.Format(time.RFC3339)+" "+r.ID)
			}
			if after = next; after == "" {
				slices.Sort(ids)
				return strings.Join(ids, " "), nil
			}
		}
	})
	check("drill pool", func(tx ledger.Tx) (string, error) {
		n, _, _, err := tx.DrillPool()
		if err != nil {
			return "", err
		}
		var positions []uint64
		if err := tx.DrillPoolPositions(func(p uint64) { positions = append(positions, p) }); err != nil {
			return "", err
		}
		found, err := tx.DrillPoolRows(positions)
		var ids []string
		for _, r := range found {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		return fmt.Sprint(n, " ", ids), err
	})
	r0 := rows[0]
	for _, q := range []ledger.Query{
		{}, {Principal: "acct-3"}, {GrantID: "grant-2"}, {Target: "A-5"}, {Agent: "https://pa-1.example"},
		{Status: ledger.Incident}, {Class: r0.Class}, {Principal: "acct-3", Status: ledger.Authorized},
		{Since: r0.IssuedAt.Add(5 * time.Second), Until: r0.IssuedAt.Add(20 * time.Second)},
		{GrantID: "grant-1", Until: r0.IssuedAt.Add(17 * time.Second)},
		{GrantID: "grant-1", Signed: true}, {GrantID: "grant-2", Signed: true, Until: r0.IssuedAt.Add(17 * time.Second)},
	} {
		check(fmt.Sprintf("list %+v", q), func(tx ledger.Tx) (string, error) {
			return listAll(tx, q)
		})
	}
}

// listAll pages through q, 4 rows a page, and returns the rows in (time,
// id) order, or an error if the listing did not run newest first.
func listAll(tx ledger.Tx, q ledger.Query) (string, error) {
	q.PageSize = 4
	var rows []*ledger.Row
	for {
		page, next, err := tx.List(q)
		if err != nil {
			return "", err
		}
		rows = append(rows, page...)
		if q.PageToken = next; next == "" {
			break
		}
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].IssuedAt.After(rows[i-1].IssuedAt) {
			return "", fmt.Errorf("row %d listed after an older one", i)
		}
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.IssuedAt.Format(time.RFC3339)+" "+r.ID[:8])
	}
	slices.Sort(out)
	return fmt.Sprintf("%d rows: %s", len(out), strings.Join(out, " ")), nil
}

// withBundles stores an evidence bundle for ten of the fixture's rows.
func withBundles(tx ledger.Tx) error {
	for _, r := range fixtureRows(60)[10:20] {
		if err := tx.PutEvidence(r.ID, []byte(`{"receiptJws":"`+r.ID+`"}`)); err != nil {
			return err
		}
	}
	return nil
}

// TestLayout3FileKeysByNumber: a file of layout 3 (a row's leaf index
// beside its number in row_seq, its evidence bundle and evidence record
// keyed by its id) has them moved to keys by the row's number at open,
// keeps a swept row's record by its id, and answers as a new store does.
func TestLayout3FileKeysByNumber(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := openLinked(t, path)
	if err := s.Update(t.Context(), func(tx ledger.Tx) error {
		if err := populateFixture(tx); err != nil {
			return err
		}
		return withBundles(tx)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to layout 3's keys.
	unrunIDs(t, path)
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		ids := map[string][]byte{} // row number -> idKey
		if err := tx.Bucket([]byte("row_seq")).ForEach(func(k, v []byte) error {
			ids[string(v)] = append([]byte(nil), k...)
			return nil
		}); err != nil {
			return err
		}
		moves := 0
		entries, err := rowLeafEntries(tx)
		if err != nil {
			return err
		}
		for _, e := range entries {
			moves++
			if err := tx.Bucket([]byte("row_seq")).Put(ids[string(e[:8])], e); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket([]byte("row_leaves")); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("row_leaves")); err != nil {
			return err
		}
		ev := tx.Bucket([]byte("evidence"))
		for seq, id := range ids {
			if v := ev.Get([]byte(seq)); v != nil {
				moves++
				if err := ev.Put([]byte(hex.EncodeToString(id)), append([]byte(nil), v...)); err != nil {
					return err
				}
				if err := ev.Delete([]byte(seq)); err != nil {
					return err
				}
			}
			objects := tx.Bucket([]byte("object_records"))
			if v := objects.Get(append([]byte{3}, seq...)); v != nil {
				moves++
				if err := objects.Put(append([]byte{1}, id...), append([]byte(nil), v...)); err != nil {
					return err
				}
				if err := objects.Delete(append([]byte{3}, seq...)); err != nil {
					return err
				}
			}
		}
		if moves < 50+10+50 {
			t.Fatalf("%d entries moved back to layout 3's keys, want the leaf indexes, bundles and records of the rows", moves)
		}
		if err := longRequestJWTKeys(tx); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), []byte{0, 0, 0, 0, 0, 0, 0, 3})
	})
	got := openLinked(t, path)
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		_ = tx.Bucket([]byte("row_seq")).ForEach(func(k, v []byte) error {
			if len(v) != 8 {
				t.Errorf("row_seq entry %x: %d bytes, want the row's number alone", k, len(v))
			}
			return nil
		})
		_ = tx.Bucket([]byte("evidence")).ForEach(func(k, _ []byte) error {
			if len(k) != 8 {
				t.Errorf("evidence bundle still keyed by id %q", k)
			}
			return nil
		})
		byID := 0
		_ = tx.Bucket([]byte("object_records")).ForEach(func(k, _ []byte) error {
			if len(k) == 33 && k[0] == 1 {
				byID++
			}
			return nil
		})
		if byID != 1 { // the swept row's
			t.Errorf("%d evidence records keyed by id, want 1 (the swept row's)", byID)
		}
		entries, err := rowLeafEntries(tx)
		if n := len(entries); err != nil || n < 50 {
			t.Errorf("row_leaves holds %d entries (%v), want the rows' leaf indexes", n, err)
		}
		return nil
	})
	want := freshFixture(t)
	if err := want.Update(t.Context(), withBundles); err != nil {
		t.Fatal(err)
	}
	reopened := openLinked(t, path)
	sameRecords(t, reopened, want)
	for _, st := range []ledger.Store{reopened, want} {
		if err := st.View(t.Context(), func(tx ledger.Tx) error {
			for _, r := range fixtureRows(60)[10:20] {
				b, err := tx.Evidence(r.ID)
				if err != nil || string(b) != `{"receiptJws":"`+r.ID+`"}` {
					t.Errorf("evidence of %s: %q, %v", r.ID, b, err)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLayout4FileCountsSnapshots: a file of layout 4 (a key per row and
// JWKS snapshot in snapshot_links) gets the counts a new store keeps, at
// open; the links are gone, and every row counted out leaves a snapshot
// unused exactly when the last row naming it goes.
func TestLayout4FileCountsSnapshots(t *testing.T) {
	path := fixtureFile(t)
	stored := slices.Delete(fixtureRows(60), 8, 9) // the fixture sweeps row 8
	counts := map[string]string{}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if err := tx.Bucket([]byte("snapshot_counts")).ForEach(func(k, v []byte) error {
			counts[string(k)] = string(v)
			return nil
		}); err != nil {
			return err
		}
		// Back to layout 4: a link per row and snapshot it names.
		links, err := tx.CreateBucket([]byte("snapshot_links"))
		if err != nil {
			return err
		}
		for _, r := range stored {
			id, _ := hex.DecodeString(r.ID)
			seq := tx.Bucket([]byte("row_seq")).Get(id)
			for _, snap := range ledger.SnapshotsOf(r) {
				sid, _ := hex.DecodeString(snap)
				num := tx.Bucket([]byte("snapshot_numbers")).Get(sid)
				if len(num) != 4 || len(seq) != 8 {
					return fmt.Errorf("row %s: number %x, snapshot number %x", r.ID, seq, num)
				}
				if err := links.Put(append(append([]byte(nil), num...), seq...), nil); err != nil {
					return err
				}
			}
		}
		if err := tx.DeleteBucket([]byte("snapshot_counts")); err != nil {
			return err
		}
		if err := longRequestJWTKeys(tx); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), []byte{0, 0, 0, 0, 0, 0, 0, 4})
	})
	if len(counts) != 3 {
		t.Fatalf("the fixture names %d snapshots, want 3", len(counts))
	}
	got := openLinked(t, path)
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("snapshot_links")) != nil {
			t.Error("snapshot_links is still there")
		}
		converted := map[string]string{}
		_ = tx.Bucket([]byte("snapshot_counts")).ForEach(func(k, v []byte) error {
			converted[string(k)] = string(v)
			return nil
		})
		if !maps.Equal(counts, converted) {
			t.Errorf("counts after the conversion %x, want a new store's %x", converted, counts)
		}
		return nil
	})

	// Count the rows out one by one: a snapshot is in use until the last
	// row naming it goes.
	got = openLinked(t, path)
	defer got.Close()
	rows := stored
	for i, r := range rows {
		if err := got.Update(t.Context(), func(tx ledger.Tx) error {
			return tx.RemoveRow(r, ledger.Tombstone{ID: r.ID, Class: r.Class, SweptAt: r.RecordedAt})
		}); err != nil {
			t.Fatal(err)
		}
		for _, snap := range []string{fixtureID("snap-a"), fixtureID("snap-b"), fixtureID("snap-c")} {
			want := slices.ContainsFunc(rows[i+1:], func(r *ledger.Row) bool { return slices.Contains(ledger.SnapshotsOf(r), snap) })
			var used bool
			if err := got.View(t.Context(), func(tx ledger.Tx) error {
				var err error
				used, err = tx.SnapshotInUse(snap)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if used != want {
				t.Fatalf("after %d rows removed, snapshot %s in use: %v, want %v", i+1, snap[:8], used, want)
			}
		}
	}
}

// TestLayout5FileMergesIndexRuns: a file of layout 5 (a key for every
// index entry and every row's leaf index) has them merged into runs at
// open, and answers as a new store does.
func TestLayout5FileMergesIndexRuns(t *testing.T) {
	path := fixtureFile(t)
	indexes := []string{"by_principal", "by_grant", "by_target", "by_agent", "by_status", "by_class", "by_time", "by_expiry"}
	entries := map[string]int{}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		// Back to layout 5: every entry of every run a key of its own.
		for _, name := range indexes {
			b := tx.Bucket([]byte(name))
			var keys [][]byte
			if err := b.ForEach(func(k, v []byte) error {
				if len(v) > 0 {
					keys = append(keys, append([]byte(nil), k...))
				}
				entries[name]++
				return nil
			}); err != nil {
				return err
			}
			for _, k := range keys {
				prefix := k[:len(k)-16]
				var ks [][]byte
				for p, err := range bolt.IndexRunKeys(prefix, k, b.Get(k)) {
					if err != nil {
						return err
					}
					ks = append(ks, p)
				}
				if err := b.Delete(k); err != nil {
					return err
				}
				for _, e := range ks {
					if err := b.Put(e, nil); err != nil {
						return err
					}
				}
				entries[name] += len(ks) - 1
			}
		}
		// Layout 5's leaf indexes: a key per row.
		leaves, err := tx.CreateBucket([]byte("row_leaf_index"))
		if err != nil {
			return err
		}
		rows, err := rowLeafEntries(tx)
		if err != nil {
			return err
		}
		for _, e := range rows {
			entries["row_leaves"]++
			if err := leaves.Put(e[:8], e[8:]); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket([]byte("row_leaves")); err != nil {
			return err
		}
		if err := longRequestJWTKeys(tx); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), []byte{0, 0, 0, 0, 0, 0, 0, 5})
	})
	if entries["row_leaves"] < 50 {
		t.Fatalf("the layout-5 file holds %d leaf indexes of rows, want the rows'", entries["row_leaves"])
	}
	if entries["by_time"] != 60-1 { // the fixture sweeps a row
		t.Fatalf("the layout-5 time index holds %d entries, want 59", entries["by_time"])
	}
	got := openLinked(t, path)
	sameRecords(t, got, freshFixture(t))
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		for _, name := range indexes {
			if n := tx.Bucket([]byte(name)).Stats().KeyN; n >= entries[name] && entries[name] > 3 {
				t.Errorf("%s: %d keys for %d entries after the conversion", name, n, entries[name])
			}
		}
		if n := tx.Bucket([]byte("by_time")).Stats().KeyN; n != 1 {
			t.Errorf("by_time: %d keys for its 59 entries after the conversion, want one run", n)
		}
		if tx.Bucket([]byte("row_leaf_index")) != nil {
			t.Error("row_leaf_index is still there")
		}
		if n := tx.Bucket([]byte("row_leaves")).Stats().KeyN; n != 1 {
			t.Errorf("row_leaves: %d keys for %d leaf indexes after the conversion, want one run", n, entries["row_leaves"])
		}
		return nil
	})
	sameRecords(t, openLinked(t, path), freshFixture(t))
}

// rowLeafEntries returns the rows' leaf indexes the file keeps in runs,
// each as its row's number and its leaf's index (8 bytes each).
func rowLeafEntries(tx *bbolt.Tx) ([][]byte, error) {
	var out [][]byte
	err := tx.Bucket([]byte("row_leaves")).ForEach(func(k, v []byte) error {
		for e, err := range bolt.IndexRunKeys(nil, k, v) {
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// TestLayout7FileReadsItsValues: a file of layout 7 (object records as
// compressed JSON, outbox entries as JSON, sequenced leaves compressed)
// is marked layout 8 at open without a rewrite, reads and exports as a
// new store does, and takes new records and entries in the binary form
// beside the old ones.
func TestLayout7FileReadsItsValues(t *testing.T) {
	path := fixtureFile(t)
	queuedAt := time.Date(2026, 12, 2, 10, 0, 0, 7, time.UTC)
	entries := []ledger.OutboxEntry{
		{Kind: ledger.ObjectEvidence, Ref: "r1", Key: "rows/r1.json", RetainUntil: time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC), Segment: true},
		{Kind: ledger.ObjectJWKS, Ref: "s1", Key: "jwks/s1.json", Hold: true},
		{Kind: ledger.ObjectEvidence, Ref: "r2", Key: "rows/r2.json", Op: ledger.OpExtend, RetainUntil: time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	enqueue := func(s *bolt.Store, es []ledger.OutboxEntry) {
		t.Helper()
		err := s.Update(t.Context(), func(tx ledger.Tx) error {
			for _, e := range es {
				if err := tx.Enqueue(e, queuedAt); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s := openLinked(t, path)
	enqueue(s, entries[:2])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	records := 0
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		var err error
		records, err = bolt.Layout7Values(tx)
		if err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), []byte{0, 0, 0, 0, 0, 0, 0, 7})
	})
	if records < 50 {
		t.Fatalf("%d object records rewritten as layout 7 wrote them, want the fixture's", records)
	}
	got := openLinked(t, path)
	want := freshFixture(t)
	sameRecords(t, got, want)
	loc := ledger.Location{Store: "s3", Bucket: "evidence", Key: "rows/new.json", VersionID: "v9", RetainUntil: time.Date(2027, 3, 1, 0, 0, 0, 5, time.UTC), Uploaded: true}
	for _, s := range []*bolt.Store{got, want} {
		if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.SetObject("rows/new.json", loc) }); err != nil {
			t.Fatal(err)
		}
	}
	sameRecords(t, got, want)
	enqueue(want, entries[:2])
	for _, s := range []*bolt.Store{got, want} {
		enqueue(s, entries[2:])
	}
	for _, s := range []*bolt.Store{got, want} {
		err := s.View(t.Context(), func(tx ledger.Tx) error {
			q, err := tx.Outbox(10)
			if err != nil {
				return err
			}
			for i := range q {
				if q[i].Seq == 0 {
					t.Errorf("outbox entry %d has no seq", i)
				}
				q[i].Seq = 0
			}
			if !reflect.DeepEqual(q, entries) {
				t.Errorf("the outbox reads\n%+v\nwant\n%+v", q, entries)
			}
			if at, err := tx.OldestQueued(); err != nil || !at.Equal(queuedAt) {
				t.Errorf("oldest queued %v, %v; want %v", at, err, queuedAt)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wantPath := want.Path()
	for _, s := range []*bolt.Store{got, want} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	old := 0
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if v := tx.Bucket([]byte("meta")).Get([]byte("layout")); !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 0, 0, 11}) {
			t.Errorf("layout mark %x, want 11", v)
		}
		return tx.Bucket([]byte("object_records")).ForEach(func(_, v []byte) error {
			if bytes.HasPrefix(v, zstdFrame) {
				old++
			}
			return nil
		})
	})
	if old != records {
		t.Errorf("%d of the %d layout-7 records left as they were, want all: the step to layout 8 rewrites nothing", old, records)
	}
	exported := func(path string, kind bolt.ExportKind) []bolt.Record {
		t.Helper()
		e, err := bolt.OpenExport(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		recs, err := e.Records(kind, nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	for kind, n := range map[bolt.ExportKind]int{bolt.ExportObjects: records + 1, bolt.ExportOutbox: len(entries)} {
		g, w := exported(path, kind), exported(wantPath, kind)
		if len(g) != len(w) || len(g) != n {
			t.Fatalf("exported %d and %d %s, want %d", len(g), len(w), kind, n)
		}
		for i := range g {
			if g[i].Name != w[i].Name || g[i].Seq != w[i].Seq || g[i].N != w[i].N || !bytes.Equal(g[i].Body, w[i].Body) {
				t.Errorf("exported %s %d: %+v\nwant %+v", kind, i, g[i], w[i])
			}
		}
	}
}

// newerLayoutFile returns the path of a file this version made, marked
// with layout 12 (a later version's) after edit, when not nil.
func newerLayoutFile(t *testing.T, edit func(tx *bbolt.Tx) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l.db")
	s := openLinked(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if edit != nil {
			if err := edit(tx); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), []byte{0, 0, 0, 0, 0, 0, 0, 12})
	})
	return path
}

// signedRows are n rows under the fixture's first four grants whose
// receipt signature passed or failed by turns, some of them refusals (a
// refusal's checks never make it a row that counts), with times that tie
// in pairs.
func signedRows(n int) []*ledger.Row {
	base := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	var out []*ledger.Row
	for i := range n {
		sig := verifier.Pass
		if i%3 == 0 {
			sig = verifier.Fail
		}
		kind := ledger.KindReceipt
		if i%5 == 4 {
			kind = ledger.KindRefusal
		}
		out = append(out, &ledger.Row{
			ID:         fixtureID(fmt.Sprint("signed row ", i)),
			Kind:       kind,
			Status:     ledger.Authorized,
			Class:      retention.MoneyMoved,
			GrantID:    fmt.Sprint("grant-", i%4),
			Principal:  fmt.Sprint("acct-", i%11),
			Actions:    []verifier.RowAction{{Tool: "cancel_order", Target: fmt.Sprint("S-", i)}},
			IssuedAt:   base.Add(time.Duration(i/2) * time.Second),
			RecordedAt: base.Add(time.Duration(i) * time.Second),
			Verifier:   ledger.Record{CheckedBy: "test", Checks: []verifier.Check{{Name: verifier.CheckReceiptSignature, Result: sig}}},
			Dispute:    ledger.DisputeNone,
		})
	}
	return out
}

// withSigned writes the fixture and signedRows(40), of which it sweeps
// the last.
func withSigned(tx ledger.Tx) error {
	if err := populateFixture(tx); err != nil {
		return err
	}
	rows := signedRows(40)
	for _, r := range rows {
		if err := ledger.AddRow(tx, r); err != nil {
			return err
		}
	}
	swept := rows[len(rows)-1]
	return tx.RemoveRow(swept, ledger.Tombstone{ID: swept.ID, Kind: swept.Kind, Status: swept.Status, Class: swept.Class})
}

// TestLayout10FileIndexesSignedRows: a file of layout 10 (no index of the
// receipts whose signature passed) gets the index filled from its rows
// at open, in batches that a stop resumes from, and then lists a grant's
// signed rows as a new store does: only receipts whose signature passed,
// newest first, a swept one gone.
func TestLayout10FileIndexesSignedRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := openLinked(t, path)
	if err := s.Update(t.Context(), withSigned); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket([]byte("by_grant_signed")); err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), []byte{0, 0, 0, 0, 0, 0, 0, 10})
	})
	stop := errors.New("stopped")
	batches := 0
	restore := bolt.SetConversionHooks(7, func(pass string) error {
		if pass != "signed rows" {
			return nil
		}
		if batches++; batches == 3 {
			return stop
		}
		return nil
	})
	s, err := bolt.Open(path, bolt.Config{})
	restore()
	if err == nil {
		s.Close()
		t.Fatal("stopping the pass of the signed rows: the open succeeded")
	}
	if !errors.Is(err, stop) {
		t.Fatalf("stopping the pass of the signed rows: %v", err)
	}
	restore = bolt.SetConversionHooks(7, nil)
	got := openLinked(t, path)
	restore()
	want := openLinked(t, filepath.Join(t.TempDir(), "fresh.db"))
	if err := want.Update(t.Context(), withSigned); err != nil {
		t.Fatal(err)
	}
	sameRecords(t, got, want)
	wantIDs := map[string][]string{}
	for _, r := range signedRows(40)[:39] {
		if r.ReceiptVerified() {
			wantIDs[r.GrantID] = append(wantIDs[r.GrantID], r.ID)
		}
	}
	for g := range 4 {
		grant := fmt.Sprint("grant-", g)
		for _, s := range []*bolt.Store{got, want} {
			var ids []string
			if err := s.View(t.Context(), func(tx ledger.Tx) error {
				q := ledger.Query{GrantID: grant, Signed: true, PageSize: 3}
				for {
					page, next, err := tx.List(q)
					if err != nil {
						return err
					}
					for i, r := range page {
						if i > 0 && r.IssuedAt.After(page[i-1].IssuedAt) {
							return fmt.Errorf("row %s listed after an older one", r.ID[:8])
						}
						ids = append(ids, r.ID)
					}
					if q.PageToken = next; next == "" {
						return nil
					}
				}
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(ids)
			w := slices.Sorted(slices.Values(wantIDs[grant]))
			if len(w) == 0 || !slices.Equal(ids, w) {
				t.Errorf("%s, signed rows of %s: %d rows %v, want %d %v", s.Path(), grant, len(ids), ids, len(w), w)
			}
		}
	}
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if v := meta.Get([]byte("layout")); !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 0, 0, 11}) {
			t.Errorf("layout mark %x, want 11", v)
		}
		for _, k := range []string{"layout2 converted signed rows", "layout2 done signed rows"} {
			if meta.Get([]byte(k)) != nil {
				t.Errorf("the record of the conversion %q is still there", k)
			}
		}
		return nil
	})
	if batches < 3 {
		t.Fatalf("the pass of the signed rows took %d batches before it was stopped, want 3", batches)
	}
}

// The first versions made a grant_tool bucket in every ledger file, which
// no later version reads or removes: a layout-1 file holding it is a
// ledger's, and opens (and converts) as one.
func TestALayout1FileWithTheFirstVersionsBucketsOpens(t *testing.T) {
	path := layout1File(t)
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("grant_tool"))
		if err != nil {
			return err
		}
		return b.Put([]byte("grant-1\x00cancel_order"), []byte{0, 0, 0, 0, 0, 0, 0, 3})
	})
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatalf("a layout-1 file the first versions wrote is refused: %v", err)
	}
	s.Close()
}
