package bolt_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// TestFileDictionary: once a file holds its first few hundred rows and
// the record of an evidence object it gets its own compression
// dictionary; rows written after it are smaller, and rows written before
// and after read back the same, also after the file is opened again.
func TestFileDictionary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s := openLinked(t, path)
	rows := fixtureRows(600)
	record := ledger.Location{Store: "s3", Bucket: "evidence", Key: "segments/2026-09-01/1.seg", Offset: 10, Length: 20, RetainUntil: rows[0].RetainUntil, Uploaded: true}
	for i := 0; i < len(rows); i += 50 {
		err := s.Update(t.Context(), func(tx ledger.Tx) error {
			for _, r := range rows[i : i+50] {
				if err := tx.CreateRow(r); err != nil {
					return err
				}
			}
			if i == 100 {
				return tx.SetObject(ledger.EvidenceKey(rows[0].ID), record)
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

	var early, late int
	if n := dictionaries(t, path); n != 1 {
		t.Fatalf("%d dictionaries stored, want the file's own one", n)
	}
	// The record is sampled as JSON, whose field names rows share, though
	// the file keeps it in a binary form.
	js, _ := json.Marshal(record)
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if d := tx.Bucket([]byte("meta")).Get([]byte("dict \x00\x00\x00\x02")); !bytes.Contains(d, js) {
			t.Errorf("the file's dictionary (%d B) does not hold the evidence record as JSON, %s", len(d), js)
		}
		return nil
	})
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		data := tx.Bucket([]byte("row_data"))
		for i := uint64(1); i <= 200; i++ {
			early += len(data.Get(seq(i)))
			late += len(data.Get(seq(400 + i)))
		}
		return nil
	})
	t.Logf("rows 1-200: %d B each; rows 401-600: %d B each", early/200, late/200)
	if late*3 > early*2 {
		t.Errorf("rows written after the file's dictionary take %d B, before it %d B: want a third less at least", late/200, early/200)
	}
	readAll(openLinked(t, path))
}

func seq(n uint64) []byte {
	return []byte{byte(n >> 56), byte(n >> 48), byte(n >> 40), byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

// TestFileDictionaryWithoutEvidence: a file whose rows keep no evidence
// objects gets its dictionary later, from its rows and leaves alone.
func TestFileDictionaryWithoutEvidence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s := openLinked(t, path)
	rows := fixtureRows(4200)
	for i := 0; i < len(rows); i += 600 {
		if i == 600 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if n := dictionaries(t, path); n != 0 {
				t.Fatalf("%d dictionaries after 600 rows without an evidence record, want none yet", n)
			}
			s = openLinked(t, path)
		}
		err := s.Update(t.Context(), func(tx ledger.Tx) error {
			for _, r := range rows[i:min(i+600, len(rows))] {
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dictionaries(t, path); n != 1 {
		t.Fatalf("%d dictionaries after %d rows, want the file's own one", n, len(rows))
	}
}

// dictionaries counts the dictionaries stored in the closed file at path.
func dictionaries(t *testing.T, path string) int {
	t.Helper()
	n := 0
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte("meta")).Cursor()
		for k, _ := c.Seek([]byte("dict ")); len(k) > 5 && string(k[:5]) == "dict "; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n
}
