package bolt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// TestViewReportsOnlyDamageAsDamaged: in a guarded read of the whole file
// (view), a panic of bbolt's on a page that is not what it should be is
// an error wrapping ErrDamaged, and any other panic (a nil dereference, an
// index out of range, an error or a string of the code decoding what it
// read) goes on as it was, so that a fault of the code is never reported
// as a file to restore from a backup.
func TestViewReportsOnlyDamageAsDamaged(t *testing.T) {
	db, err := openDB(filepath.Join(t.TempDir(), "ledger.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var nilMap *map[string]int
	var short []byte
	at := 3
	for _, tc := range []struct {
		name    string
		fn      func()
		damaged bool
	}{
		{"bbolt's assertion", func() { panic("assertion failed: Page expected to be: 12, but self identifies as 12357") }, true},
		{"a page of no known type", func() { panic("invalid page type: 12: 20") }, true},
		{"nil dereference", func() { _ = (*nilMap)["x"] }, false},
		{"index out of range", func() { _ = short[at] }, false},
		{"an error", func() { panic(errors.New("decode row 7: unexpected end")) }, false},
		{"a string", func() { panic("unreachable") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			p := func() (p any) {
				defer func() { p = recover() }()
				err = view(db, func(*bbolt.Tx) error { tc.fn(); return nil })
				return nil
			}()
			switch {
			case tc.damaged && !errors.Is(err, ErrDamaged):
				t.Errorf("view: %v, panic %v; want an error wrapping ErrDamaged", err, p)
			case !tc.damaged && p == nil:
				t.Errorf("view: %v; want the panic to go on", err)
			}
		})
	}
	// The store's reads go on after each.
	if err := view(db, func(*bbolt.Tx) error { return nil }); err != nil {
		t.Errorf("a read after the panics: %v", err)
	}

	// A file cut short under the open store: the read of its pages
	// faults on the memory map (SIGBUS).
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("pages"))
		for i := 0; err == nil && i < 1000; i++ {
			err = b.Put(fmt.Appendf(nil, "%06d", i), make([]byte, 1000))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(db.Path(), 2*int64(db.Info().PageSize)); err != nil {
		t.Fatal(err)
	}
	err = view(db, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("pages")).ForEach(func(k, v []byte) error { return nil })
	})
	if !errors.Is(err, ErrDamaged) {
		t.Errorf("a read of a file cut short: %v, want an error wrapping ErrDamaged", err)
	}
}

// TestAFileGrowingWhileCheckedIsLockedNotDamaged: a second open of a file
// a store has open (a second ledgerd, `ledgerd compact`, `ledgerd migrate
// --from`) says the file is locked, never that it is damaged, even when
// the store grows the file and commits pages past its former end while
// the open checks the file's length against its pages.
func TestAFileGrowingWhileCheckedIsLockedNotDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	grow := func(string) {
		lengthChecking.Store(nil)
		// Past the file's end and the 16 MiB it grows by at a time.
		err := s.db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("growth"))
			for i := 0; err == nil && int64(i)<<20 < before.Size()+GrowStep; i++ {
				err = b.Put(fmt.Appendf(nil, "%06d", i), make([]byte, 1<<20))
			}
			return err
		})
		if err != nil {
			t.Error(err)
		}
	}
	lengthChecking.Store(&grow)
	defer lengthChecking.Store(nil)

	second, err := Open(path, Config{OpenTimeout: 100 * time.Millisecond})
	if err == nil {
		second.Close()
	}
	if !errors.Is(err, ErrLocked) || errors.Is(err, ErrDamaged) {
		t.Errorf("a second open while the store grows the file: %v, want ErrLocked", err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() <= before.Size()+GrowStep {
		t.Errorf("the file grew from %d bytes to %d only, want past %d", before.Size(), after.Size(), before.Size()+GrowStep)
	}
}
