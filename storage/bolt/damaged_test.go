package bolt_test

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// drillFile is a store file holding n drill reports of about 1 KiB each,
// with the bytes its pages use (bbolt's page high-water mark) and the
// page size.
func drillFile(t *testing.T, n int) (path string, used int64, pageSize int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "ledger.db")
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	if err := s.Update(t.Context(), func(tx ledger.Tx) error {
		for i := range n {
			pad := make([]byte, 500)
			for j := range pad {
				pad[j] = byte(r.Uint32())
			}
			body := []byte(`{"pad":"` + hex.EncodeToString(pad) + `"}`)
			if err := tx.PutDrill(fmt.Sprintf("2026-10-07T13:00:00Z-%06d", i), body); err != nil {
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
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bbolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return path, used, db.Info().PageSize
}

// copyOf copies the file at path into a new directory.
func copyOf(t *testing.T, path string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "ledger.db")
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return to
}

// readAll reads every drill report of the file at path as an export
// does.
func readAll(path string) error {
	e, err := bolt.OpenExport(path, time.Second)
	if err != nil {
		return err
	}
	defer e.Close()
	var after []byte
	for {
		recs, err := e.Records(bolt.ExportDrills, after, 100)
		if err != nil || len(recs) < 100 {
			return err
		}
		after = recs[len(recs)-1].Key
	}
}

// TestADamagedFileIsAnError: a file cut short below the pages it uses,
// and one with a page overwritten, make an error saying the file is
// damaged and to restore it from a backup, from an open (ledgerd's
// start, the truncated file), an export (`ledgerd migrate --from`) and a
// compaction (`ledgerd compact`), rather than a crash of the process.
func TestADamagedFileIsAnError(t *testing.T) {
	path, used, pageSize := drillFile(t, 3000)

	truncated := copyOf(t, path)
	if err := os.Truncate(truncated, used/2); err != nil {
		t.Fatal(err)
	}
	// A page in the middle of the file that a read reaches: its header
	// then names another page.
	overwritten := copyOf(t, path)
	db, err := bbolt.Open(overwritten, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var leaf int
	err = db.View(func(tx *bbolt.Tx) error {
		var leaves []int
		for id := 2; id < int(used)/pageSize; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p != nil && p.Type == "leaf" {
				leaves = append(leaves, id)
			}
		}
		if len(leaves) < 10 {
			return fmt.Errorf("%d leaf pages in the file, want many", len(leaves))
		}
		leaf = leaves[len(leaves)/2]
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(overwritten, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(binary.NativeEndian.AppendUint64(nil, uint64(leaf)+12345), int64(leaf)*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, file, want string
		do               func(path string) error
	}{
		{"open truncated", truncated, "is truncated", func(p string) error {
			s, err := bolt.Open(p, bolt.Config{})
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"export truncated", truncated, "is truncated", readAll},
		{"compact truncated", truncated, "is truncated", func(p string) error { return bolt.CompactFile(p, time.Second) }},
		{"export overwritten", overwritten, "restore it from a backup", readAll},
		{"compact overwritten", overwritten, "restore it from a backup", func(p string) error { return bolt.CompactFile(p, time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(tc.file)
			t.Log(err)
			if !errors.Is(err, bolt.ErrDamaged) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrDamaged saying %q", err, tc.want)
			}
		})
	}
	if err := readAll(path); err != nil {
		t.Errorf("the undamaged file: %v", err)
	}
}
