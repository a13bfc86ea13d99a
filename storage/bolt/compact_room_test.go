package bolt_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/storage/bolt"
)

// The tests below run the store in a child process whose files may not
// grow past the store file's size (RLIMIT_FSIZE): a copy of the file
// then fails as it would on a disk without room for it.
const roomChildEnv = "PACTLEDGER_COMPACT_ROOM_CHILD"

// fullStore returns the path of a store file with about 24 MiB of
// records in use, beside its pages.
func fullStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, 4000)
	for i := range 24 {
		if err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("filler"))
			if err != nil {
				return err
			}
			for j := range 256 {
				if err := b.Put(fmt.Appendf(nil, "%08d-%04d", i, j), val); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// compactPending reports whether the file at path is marked for a copy
// at the next Open.
func compactPending(t *testing.T, path string) bool {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var marked bool
	if err := db.View(func(tx *bbolt.Tx) error {
		marked = tx.Bucket([]byte("meta")).Get([]byte("compact pending")) != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return marked
}

// inRoomChild runs test name in a child process on the store file at
// path, and returns its output and error.
func inRoomChild(t *testing.T, name, path string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), roomChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// roomChild, in the child, limits the size of the files it writes to
// the store file's and runs fn; it exits with fn's status.
func roomChild(fn func(path string) int) {
	path := os.Getenv(roomChildEnv)
	st, err := os.Stat(path)
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	lim := uint64(st.Size())
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(3)
	}
	os.Exit(fn(path))
}

// TestFailedCompactFileLeavesTheFile: CompactFile (ledgerd compact)
// that cannot write its copy, on a disk without room for it, leaves the
// file as it was: unmarked, with nothing beside it, and Open, which
// worked on it before under the same conditions, works after.
func TestFailedCompactFileLeavesTheFile(t *testing.T) {
	if os.Getenv(roomChildEnv) != "" {
		roomChild(func(path string) int {
			s, err := bolt.Open(path, bolt.Config{})
			if err != nil {
				fmt.Println("setup: open before compact:", err)
				return 3
			}
			s.Close()
			err = bolt.CompactFile(path, 0)
			fmt.Println("compact:", err)
			if err == nil {
				fmt.Println("setup: compact did not fail")
				return 3
			}
			if s, err = bolt.Open(path, bolt.Config{}); err != nil {
				fmt.Println("open after the failed compact:", err)
				return 1
			}
			s.Close()
			return 0
		})
	}
	path := fullStore(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := inRoomChild(t, t.Name(), path)
	if err != nil {
		t.Fatalf("after a compact that failed for lack of room, the store no longer opens where it opened before: %v\n%s", err, out)
	}
	if !strings.Contains(out, "file too large") {
		t.Fatalf("the compact did not fail for lack of room:\n%s", out)
	}
	if compactPending(t, path) {
		t.Fatal("the failed compact left the file marked for a copy")
	}
	if _, err := os.Stat(path + ".compacting"); !os.IsNotExist(err) {
		t.Fatalf("the failed copy is left beside the file: %v", err)
	}
	if fileAfter, err := os.ReadFile(path); err != nil || len(fileAfter) != len(before) {
		t.Fatalf("the file is %d bytes after the failed compact, was %d: %v", len(fileAfter), len(before), err)
	}
	// With room, it compacts.
	if err := bolt.CompactFile(path, 0); err != nil {
		t.Fatal(err)
	}
}

// TestOpenUsesAMarkedFileWithoutRoomForItsCopy: a file marked for a copy
// without its free pages (after a layout conversion, or by a compaction
// of an earlier version that failed) on a disk without room for the copy
// is opened and used as it is, with a WARN naming the cause, and stays
// marked; the next Open with room copies it.
func TestOpenUsesAMarkedFileWithoutRoomForItsCopy(t *testing.T) {
	if os.Getenv(roomChildEnv) != "" {
		roomChild(func(path string) int {
			s, err := bolt.Open(path, bolt.Config{})
			if err != nil {
				fmt.Println("open of a marked file without room for its copy:", err)
				return 1
			}
			s.Close()
			return 0
		})
	}
	path := fullStore(t)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("compact pending"), []byte{1})
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := inRoomChild(t, t.Name(), path)
	if err != nil {
		t.Fatalf("a marked file without room for its copy does not open: %v\n%s", err, out)
	}
	if !strings.Contains(out, "WARN") || !strings.Contains(out, "could not be copied for lack of room") || !strings.Contains(out, "file too large") {
		t.Fatalf("no WARN naming the cause:\n%s", out)
	}
	if !compactPending(t, path) {
		t.Fatal("the file lost its mark though it was not copied")
	}
	if _, err := os.Stat(path + ".compacting"); !os.IsNotExist(err) {
		t.Fatalf("the failed copy is left beside the file: %v", err)
	}
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if compactPending(t, path) {
		t.Fatal("an Open with room did not copy the marked file")
	}
}
