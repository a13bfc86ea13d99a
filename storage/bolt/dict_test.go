package bolt_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// TestFileDictionary: once a file holds its first few hundred rows it
// gets its own compression dictionary; rows written after it are smaller,
// and rows written before and after read back the same, also after the
// file is opened again.
func TestFileDictionary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s := openLinked(t, path)
	rows := fixtureRows(600)
	for i := 0; i < len(rows); i += 50 {
		err := s.Update(t.Context(), func(tx ledger.Tx) error {
			for _, r := range rows[i : i+50] {
				if err := tx.CreateRow(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	readAll := func(s ledger.Store) {
		t.Helper()
		err := s.View(t.Context(), func(tx ledger.Tx) error {
			for _, want := range rows {
				got, err := tx.Row(want.ID)
				if err != nil {
					return err
				}
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				if string(g) != string(w) {
					t.Errorf("row %.8s reads back as\n%s\nwant\n%s", want.ID, g, w)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	readAll(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var early, late, dicts int
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte("meta")).Cursor()
		for k, _ := c.Seek([]byte("dict ")); k != nil && string(k[:5]) == "dict "; k, _ = c.Next() {
			dicts++
		}
		data := tx.Bucket([]byte("row_data"))
		for i := uint64(1); i <= 200; i++ {
			early += len(data.Get(seq(i)))
			late += len(data.Get(seq(400 + i)))
		}
		return nil
	})
	if dicts != 1 {
		t.Fatalf("%d dictionaries stored, want the file's own one", dicts)
	}
	t.Logf("rows 1-200: %d B each; rows 401-600: %d B each", early/200, late/200)
	if late*3 > early*2 {
		t.Errorf("rows written after the file's dictionary take %d B, before it %d B: want a third less at least", late/200, early/200)
	}
	readAll(openLinked(t, path))
}

func seq(n uint64) []byte {
	return []byte{byte(n >> 56), byte(n >> 48), byte(n >> 40), byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}
