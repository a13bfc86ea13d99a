package bolt_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestCompactKeepsASymlinkedFile: store.path is a symbolic link to the
// file on another disk. Compacting it writes the copy beside the file
// the link names and renames it there: the link stays a link to the
// same place, which holds the compacted file with what was written, and
// nothing is left beside the link.
func TestCompactKeepsASymlinkedFile(t *testing.T) {
	dir := t.TempDir()
	realDir, linkDir := filepath.Join(dir, "disk"), filepath.Join(dir, "data")
	for _, d := range []string{realDir, linkDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	target, link := filepath.Join(realDir, "ledger.db"), filepath.Join(linkDir, "ledger.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	const id = "2026-12-07T00:00:00Z-linked"
	s, err := bolt.Open(link, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutDrill(id, []byte(`{}`)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}

	if err := bolt.CompactFile(link, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	st, err := os.Lstat(link)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is a %s after compacting, want the symbolic link", link, st.Mode().Type())
	}
	if got, err := os.Readlink(link); err != nil || got != target {
		t.Errorf("the link names %q (%v), want %s", got, err, target)
	}
	after, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Errorf("%s is the file it was: the copy did not replace it", target)
	}
	for _, d := range []string{realDir, linkDir} {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("%s holds %v, want only ledger.db", d, names)
		}
	}
	s, err = bolt.Open(link, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var body []byte
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		var err error
		body, err = tx.Drill(id)
		return err
	}); err != nil || body == nil {
		t.Errorf("drill %s after compacting: %q, %v", id, body, err)
	}
}
