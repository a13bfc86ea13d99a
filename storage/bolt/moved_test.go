package bolt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/storage/bolt"
)

// movedFixture is a closed ledger file holding the fixture's rows, its
// last write transaction and how many rows it stores.
func movedFixture(t *testing.T) (string, uint64, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s := openLinked(t, path)
	if err := s.Update(t.Context(), populateFixture); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := bolt.OpenExport(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	v, err := e.Version()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := e.Records(bolt.ExportRows, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return path, v, len(recs)
}

// readFile returns the bytes of the file at path.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMovedFileIsRefused: a file marked as moved into PostgreSQL is
// refused by Open (ledgerd, ledgerd compact) and by CompactFile with
// plain words naming the store, the time and the way back, and left as
// it was; the move's read-only open reads it as before, and knows it
// unchanged since the mark. A file written to since the move read it is
// not marked. A version that knows no mark sees a layout newer than any.
func TestMovedFileIsRefused(t *testing.T) {
	path, v, rows := movedFixture(t)
	at := time.Date(2026, 12, 8, 9, 30, 0, 0, time.UTC)
	mark := bolt.Moved{Store: "PostgreSQL", Database: "postgres://ledger@db.example:5432/ledger", At: at, Began: at.Add(-time.Minute), Version: v}

	before := readFile(t, path)
	stale := mark
	stale.Version = v - 1
	if _, err := bolt.MarkMoved(path, stale, time.Second); !errors.Is(err, bolt.ErrWrittenSince) {
		t.Fatalf("mark of a file written to since the move read it: %v, want ErrWrittenSince", err)
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Fatal("a refused mark changed the file")
	}

	got, err := bolt.MarkMoved(path, mark, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.MarkedIn != v+1 || got.Layout == 0 || got.Database != mark.Database || !got.At.Equal(at) {
		t.Fatalf("mark: %+v", got)
	}
	// Marking again keeps the first mark.
	again := mark
	again.Database = "postgres://other@elsewhere:5432/x"
	if m, err := bolt.MarkMoved(path, again, time.Second); err != nil || m.MarkedIn != got.MarkedIn || m.Database != mark.Database {
		t.Fatalf("mark again: %+v, %v; want the first mark", m, err)
	}

	marked := readFile(t, path)
	s, err := bolt.Open(path, bolt.Config{})
	if err == nil {
		s.Close()
		t.Fatal("ledgerd's open of a moved file succeeded")
	}
	for _, want := range []string{path, "was moved to PostgreSQL", mark.Database, "2026-12-08T09:30:00Z", "run ledgerd on that store", "ledgerd unmark-moved " + path} {
		if !errors.Is(err, bolt.ErrMoved) || !strings.Contains(err.Error(), want) {
			t.Errorf("open of a moved file: %q; want ErrMoved and %q", err, want)
		}
	}
	if err := bolt.CompactFile(path, time.Second); !errors.Is(err, bolt.ErrMoved) {
		t.Errorf("compaction of a moved file: %v, want ErrMoved", err)
	}
	if !bytes.Equal(marked, readFile(t, path)) {
		t.Fatal("a refused open or compaction changed the moved file")
	}
	if _, err := os.Stat(path + ".compacting"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused compaction left a copy: %v", err)
	}

	// A version without the mark refuses it as of a newer layout.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var layout uint64
	_ = db.View(func(tx *bbolt.Tx) error {
		layout = binary.BigEndian.Uint64(tx.Bucket([]byte("meta")).Get([]byte("layout")))
		return nil
	})
	db.Close()
	if layout <= got.Layout || layout < 1<<32 {
		t.Errorf("layout mark of a moved file: %d; want one newer than any layout (the file's is %d)", layout, got.Layout)
	}

	e, err := bolt.OpenExport(path, time.Second)
	if err != nil {
		t.Fatalf("the move's read-only open of a moved file: %v", err)
	}
	defer e.Close()
	m, err := e.Moved()
	if err != nil || m == nil || m.MarkedIn != got.MarkedIn {
		t.Fatalf("Moved() = %+v, %v", m, err)
	}
	now, err := e.Version()
	if err != nil || !m.Unchanged(now) {
		t.Errorf("the moved file's version %d: want it unchanged since the mark (%d)", now, m.MarkedIn)
	}
	recs, err := e.Records(bolt.ExportRows, nil, 1000)
	if err != nil || len(recs) != rows {
		t.Errorf("rows read from the moved file: %d, %v; want %d", len(recs), err, rows)
	}
}

// TestUnmarkMoved: the way back, ClearMoved, is refused while another
// process has the file (the mark stays), then clears the mark: ledgerd
// opens the file again, with its rows, and the move's export too. A file
// without a mark is left as it was.
func TestUnmarkMoved(t *testing.T) {
	path, v, rows := movedFixture(t)
	at := time.Date(2026, 12, 8, 9, 30, 0, 0, time.UTC)
	if _, err := bolt.MarkMoved(path, bolt.Moved{Database: "postgres://ledger@127.0.0.1:5432/ledger", At: at, Began: at, Version: v}, time.Second); err != nil {
		t.Fatal(err)
	}

	// Another process holding the file: the move's read-only open
	// shares its lock, which keeps a writer out.
	e, err := bolt.OpenExport(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.ClearMoved(path, 50*time.Millisecond); !errors.Is(err, bolt.ErrLocked) {
		t.Errorf("unmark while the file is open elsewhere: %v, want ErrLocked", err)
	}
	if m, err := e.Moved(); err != nil || m == nil {
		t.Errorf("the mark after a refused unmark: %+v, %v; want it kept", m, err)
	}
	e.Close()

	m, err := bolt.ClearMoved(path, time.Second)
	if err != nil || m == nil || m.Database != "postgres://ledger@127.0.0.1:5432/ledger" {
		t.Fatalf("unmark: %+v, %v", m, err)
	}
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatalf("open after the mark was cleared: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = bolt.OpenExport(path, time.Second)
	if err != nil {
		t.Fatalf("export after the mark was cleared: %v", err)
	}
	defer e.Close()
	if m, err := e.Moved(); err != nil || m != nil {
		t.Errorf("mark after unmark: %+v, %v", m, err)
	}
	if recs, err := e.Records(bolt.ExportRows, nil, 1000); err != nil || len(recs) != rows {
		t.Errorf("rows after unmark: %d, %v; want %d", len(recs), err, rows)
	}
	e.Close()

	before := readFile(t, path)
	if m, err := bolt.ClearMoved(path, time.Second); err != nil || m != nil {
		t.Errorf("unmark of a file without a mark: %+v, %v; want nothing done", m, err)
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("unmark of a file without a mark changed it")
	}
}
