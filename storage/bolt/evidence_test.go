package bolt_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// rawValue reads one value straight from the (closed) bbolt file.
func rawValue(t *testing.T, path, bucket, key string) []byte {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	_ = db.View(func(tx *bbolt.Tx) error {
		v = append([]byte(nil), tx.Bucket([]byte(bucket)).Get([]byte(key))...)
		return nil
	})
	return v
}

// TestEvidenceStoredCompressedOldBundlesRead stores a bundle (kept
// compressed, smaller than the bundle) and puts an uncompressed one
// straight into the file, as a store written before compression holds it:
// both read back as they were written.
func TestEvidenceStoredCompressedOldBundlesRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	bundle := []byte(`{"receiptJws":"` + strings.Repeat("eyJhbGciOiJFUzI1NiJ9.", 40) + `","actions":[{"tool":"cancel_order"}]}`)
	old := []byte(`{"receiptJws":"written.before.compression"}`)
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.PutEvidence("new", bundle) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if raw := rawValue(t, path, "evidence", "new"); len(raw) >= len(bundle) || !bytes.HasPrefix(raw, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("stored %d bytes for a %d-byte bundle, not compressed", len(raw), len(bundle))
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("evidence")).Put([]byte("old"), old) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s, err = bolt.Open(path, bolt.Config{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(ctx, func(tx ledger.Tx) error {
		for id, want := range map[string][]byte{"new": bundle, "old": old} {
			got, err := tx.Evidence(id)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("Evidence(%s) = %q, %v; want %q", id, got, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
