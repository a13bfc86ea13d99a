package bolt_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// zstdFrame starts every zstd frame (RFC 8878 §3.1.1).
var zstdFrame = []byte{0x28, 0xb5, 0x2f, 0xfd}

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

// TestEvidenceCompressedWhenTheOutboxIsDeep stores bundles as they are
// while the outbox is short, and compressed (smaller, a zstd frame) once
// it holds bolt.CompressFromDepth objects, or when a bundle starts with
// zstd's magic; a bundle put straight into the file, as a store written
// before compression holds it, reads too. All read back as they were
// written.
func TestEvidenceCompressedWhenTheOutboxIsDeep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	bundle := []byte(`{"receiptJws":"` + strings.Repeat("eyJhbGciOiJFUzI1NiJ9.", 40) + `","actions":[{"tool":"cancel_order"}]}`)
	magic := append(append([]byte(nil), zstdFrame...), "not a frame"...)
	old := []byte(`{"receiptJws":"written.before.compression"}`)
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(id string, b []byte) {
		t.Helper()
		if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.PutEvidence(id, b) }); err != nil {
			t.Fatal(err)
		}
	}
	put("shallow", bundle)
	put("magic", magic)
	// One object short of the depth, then the depth itself.
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	enqueue := func(n int) {
		t.Helper()
		err := s.Update(ctx, func(tx ledger.Tx) error {
			for i := range n {
				ref := fmt.Sprintf("r%d", i)
				if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: ref, Key: ledger.EvidenceKey(ref), RetainUntil: at}, at); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	enqueue(bolt.CompressFromDepth - 1)
	put("short", bundle)
	enqueue(1)
	put("deep", bundle)
	s.Close()

	for _, id := range []string{"shallow", "short"} {
		if raw := rawValue(t, path, "evidence", id); !bytes.Equal(raw, bundle) {
			t.Errorf("%s: stored %d bytes, want the bundle's %d as they are", id, len(raw), len(bundle))
		}
	}
	for id, b := range map[string][]byte{"deep": bundle, "magic": magic} {
		if raw := rawValue(t, path, "evidence", id); bytes.Equal(raw, b) || !bytes.HasPrefix(raw, zstdFrame) {
			t.Errorf("%s: stored %d bytes for a %d-byte bundle, not compressed", id, len(raw), len(b))
		}
	}
	if raw := rawValue(t, path, "evidence", "deep"); len(raw) >= len(bundle) {
		t.Errorf("deep: compressed to %d bytes, not under the bundle's %d", len(raw), len(bundle))
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
		for id, want := range map[string][]byte{"shallow": bundle, "short": bundle, "deep": bundle, "magic": magic, "old": old} {
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
