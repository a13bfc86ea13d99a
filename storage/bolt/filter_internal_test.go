package bolt

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// setFilterHooks sets the build's chunk size, its hook and the smallest
// capacity for one test.
func setFilterHooks(t *testing.T, chunk int, minKeys int64, after func()) {
	t.Helper()
	oldChunk, oldMin, oldAfter := filterChunk, filterMinKeys, afterFilterChunk
	filterChunk, filterMinKeys, afterFilterChunk = chunk, minKeys, after
	t.Cleanup(func() { filterChunk, filterMinKeys, afterFilterChunk = oldChunk, oldMin, oldAfter })
}

// waitFilter waits until s has a filter in use that cond accepts.
func waitFilter(t *testing.T, s *Store, cond func(*keyFilter) bool) *keyFilter {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if f := s.filters.active.Load(); f != nil && cond(f) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatal("no key filter in use")
		}
		runtime.Gosched()
	}
}

func createRows(t *testing.T, s *Store, names ...string) []*ledger.Row {
	t.Helper()
	var out []*ledger.Row
	err := s.Update(context.Background(), func(tx ledger.Tx) error {
		out = out[:0]
		for _, n := range names {
			r := numbersRow(n)
			if err := tx.CreateRow(r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// createBatches writes batches writes of size rows each, named after
// prefix.
func createBatches(t *testing.T, s *Store, prefix string, batches, size int) []*ledger.Row {
	t.Helper()
	var rows []*ledger.Row
	for i := range batches {
		var names []string
		for j := range size {
			names = append(names, fmt.Sprintf("%s %d/%d", prefix, i, j))
		}
		rows = append(rows, createRows(t, s, names...)...)
	}
	return rows
}

// checkFound checks that the filter in use holds every row's keys and
// that reads and writes find each row.
func checkFound(t *testing.T, s *Store, f *keyFilter, rows []*ledger.Row) {
	t.Helper()
	missing := 0
	for _, r := range rows {
		if !f.mayHave(idKey(r.ID)) || !f.mayHave(reqKey(r.RequestJWTSHA256)) {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("the filter in use lacks the keys of %d of %d rows", missing, len(rows))
	}
	check := func(tx ledger.Tx) error {
		for _, r := range rows {
			if got, err := tx.Row(r.ID); err != nil || got.ID != r.ID {
				return fmt.Errorf("row %s: %v, %v", r.ID, got, err)
			}
			if id, err := tx.RowByRequestJWT(r.RequestJWTSHA256); err != nil || id != r.ID {
				return fmt.Errorf("request JWT of %s: %q, %v", r.ID, id, err)
			}
		}
		return nil
	}
	if err := s.View(context.Background(), check); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), check); err != nil {
		t.Fatal(err)
	}
}

// Rows written while the filter is built, between the chunks of its scan,
// are in it when it is put in use, as are the rows the file held, those
// whose keys are still pending among them.
func TestKeyFilterHoldsRowsWrittenDuringItsBuild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	rows := createBatches(t, s, "before", 20, 100)
	s = reopenSettled(t, s, path)
	rows = append(rows, createBatches(t, s, "pending", 2, 25)...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	chunks, resume := make(chan struct{}), make(chan struct{})
	setFilterHooks(t, 100, filterMinKeys, func() { chunks <- struct{}{}; <-resume })
	s, err = Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// After every chunk of the scan (two buckets of 2,000 keys, about 100
	// a chunk), two rows are written. Their keys fall at random places:
	// those behind the scan's position are in the filter only because
	// the write added them.
	deadline := time.Now().Add(30 * time.Second)
	during := 0
	for s.filters.active.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the filter was not built")
		}
		select {
		case <-chunks:
			rows = append(rows, createRows(t, s, fmt.Sprintf("during %d", during), fmt.Sprintf("during %d'", during))...)
			during++
			resume <- struct{}{}
		default:
			runtime.Gosched()
		}
	}
	if during < 30 {
		t.Fatalf("rows were written after %d chunks, want the scan in 30 or more", during)
	}
	f := waitFilter(t, s, func(*keyFilter) bool { return true })
	checkFound(t, s, f, rows)
	rows = append(rows, createRows(t, s, "after")...)
	checkFound(t, s, f, rows)
}

// A key never written is absent from the filter but for a few in a
// hundred, and a lookup of it finds nothing.
func TestKeyFilterAnswersAbsentKeys(t *testing.T) {
	s := openNumbers(t)
	var names []string
	for i := range 2000 {
		names = append(names, fmt.Sprintf("row %d", i))
	}
	createRows(t, s, names...)
	f := waitFilter(t, s, func(*keyFilter) bool { return true })
	const n = 20000
	present := 0
	for range n {
		k := make([]byte, 32)
		rand.Read(k)
		if f.mayHave(k) {
			present++
		}
	}
	if present > n/50 {
		t.Errorf("%d of %d keys never written pass the filter, want at most 2 %%", present, n)
	}
	absent := numbersRow("never written")
	err := s.Update(context.Background(), func(tx ledger.Tx) error {
		if _, err := tx.Row(absent.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a row never written: %v", err)
		}
		if id, err := tx.RowByRequestJWT(absent.RequestJWTSHA256); id != "" || err != nil {
			t.Errorf("a request JWT never written: %q, %v", id, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A filter that holds more keys than it was sized for is replaced by a
// larger one, built while the writes go on; every key is in it.
func TestKeyFilterGrows(t *testing.T) {
	setFilterHooks(t, 50, 256, nil)
	s := openNumbers(t)
	first := waitFilter(t, s, func(*keyFilter) bool { return true })
	rows := createBatches(t, s, "row", 40, 25)
	f := waitFilter(t, s, func(f *keyFilter) bool { return f.capacity >= 2000 })
	if f == first || f.capacity <= first.capacity {
		t.Fatalf("the filter in use was sized for %d keys, the first for %d", f.capacity, first.capacity)
	}
	checkFound(t, s, f, rows)
}
