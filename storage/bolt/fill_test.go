package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// inBucket calls f with bucket of the file at path, opened read-only.
func inBucket(t *testing.T, path, bucket string, f func(*bbolt.Bucket)) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bbolt.Tx) error {
		f(tx.Bucket([]byte(bucket)))
		return nil
	})
}

// fill returns the share of bucket's page bytes in use.
func fill(t *testing.T, path, bucket string) float64 {
	t.Helper()
	var f float64
	inBucket(t, path, bucket, func(b *bbolt.Bucket) {
		st := b.Stats()
		f = float64(st.LeafInuse) / float64(st.LeafAlloc)
	})
	return f
}

// writeRowsInSmallCommits writes 5,000 rows with their outbox entries
// and evidence records, 50 a transaction, into a new store at path.
func writeRowsInSmallCommits(t *testing.T, path string) {
	t.Helper()
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC)
	for i := range 100 {
		err := s.Update(ctx, func(tx ledger.Tx) error {
			for j := range 50 {
				id := fmt.Sprintf("%064x", uint64(i*50+j)*0x9E3779B97F4A7C15+1)
				if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: id, Key: ledger.EvidenceKey(id), RetainUntil: at}, at); err != nil {
					return err
				}
				r := row(id)
				r.RequestJWTSHA256 = fmt.Sprintf("%064x", uint64(i*50+j)*0xC2B2AE3D27D4EB4F+7)
				if err := tx.CreateRow(r); err != nil {
					return err
				}
				if err := tx.SetObject(ledger.EvidenceKey(id), ledger.Location{Store: "s3", Bucket: "evidence", Key: "segments/1.seg", Offset: uint32(j) * 4000, Length: 4000, Uploaded: true}); err != nil {
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
}

// TestCompactionLeavesRoomInRandomKeyedBuckets: the compacted copy fills
// the pages of buckets keyed in order, and leaves a tenth of each page
// free in buckets keyed at random (row numbers by id, request JWTs), so
// the inserts that follow do not split a full page each. The outbox's
// sequence is carried over.
func TestCompactionLeavesRoomInRandomKeyedBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	writeRowsInSmallCommits(t, path)
	seq := sequence(t, path, "outbox")
	if err := bolt.CompactFile(path, 0); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"outbox", "row_data"} {
		if f := fill(t, path, b); f < 0.95 {
			t.Errorf("%s pages %.0f %% full after the compaction, want at least 95 %%", b, 100*f)
		}
	}
	for _, b := range []string{"by_time", "by_expiry", "object_records"} {
		if f := fill(t, path, b); f < 0.85 || f > 0.93 {
			t.Errorf("%s pages %.0f %% full after the compaction, want their writes' nine tenths", b, 100*f)
		}
	}
	for _, b := range []string{"row_seq", "request_jwts"} {
		if f := fill(t, path, b); f < 0.8 || f > 0.93 {
			t.Errorf("%s pages %.0f %% full after the compaction, want a tenth left free", b, 100*f)
		}
	}
	if got := sequence(t, path, "outbox"); got != seq || seq == 0 {
		t.Errorf("outbox sequence %d after the compaction, %d before", got, seq)
	}
}

// sequence returns bucket's sequence in the file at path.
func sequence(t *testing.T, path, bucket string) uint64 {
	t.Helper()
	var n uint64
	inBucket(t, path, bucket, func(b *bbolt.Bucket) { n = b.Sequence() })
	return n
}

// TestAppendOrderedBucketsFillTheirPages appends outbox entries and rows
// in small transactions: the outbox and the rows, keyed by growing
// numbers, fill their pages, and so do the expiry index and the evidence
// records, keyed by row number (to nine tenths); the time index packs its
// entries in runs (a few bytes each); the row numbers by id (random ids)
// keep bbolt's split at half a page.
func TestAppendOrderedBucketsFillTheirPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	writeRowsInSmallCommits(t, path)
	for _, b := range []string{"outbox", "row_data"} {
		if f := fill(t, path, b); f < 0.95 {
			t.Errorf("%s pages %.0f %% full, want at least 95 %%", b, 100*f)
		}
	}
	inBucket(t, path, "by_time", func(b *bbolt.Bucket) {
		if st := b.Stats(); st.KeyN > 5000/50 || st.LeafInuse > 6*5000 {
			t.Errorf("by_time holds 5,000 entries in %d keys and %d bytes, want runs of fifty or more at a few bytes an entry", st.KeyN, st.LeafInuse)
		}
	})
	for _, b := range []string{"by_expiry", "object_records"} {
		if f := fill(t, path, b); f < 0.85 {
			t.Errorf("%s pages %.0f %% full, want at least 85 %%", b, 100*f)
		}
	}
	if f := fill(t, path, "row_seq"); f > 0.85 {
		t.Errorf("row_seq pages %.0f %% full: random keys should keep bbolt's default split", 100*f)
	}
}

// TestLateReceiptsKeepTimeIndexPagesFilled: one receipt in five posted up
// to an hour late still leaves the time index's pages well filled; a
// split that filled the page whole would leave a page for each late key.
func TestLateReceiptsKeepTimeIndexPagesFilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 10, 7, 13, 0, 0, 0, time.UTC)
	n := 0
	for range 200 {
		err := s.Update(t.Context(), func(tx ledger.Tx) error {
			for range 50 {
				n++
				r := row(fmt.Sprintf("%064x", uint64(n)*0x9E3779B97F4A7C15+1))
				r.IssuedAt = at.Add(time.Duration(n) * time.Millisecond)
				if n%5 == 0 {
					r.IssuedAt = r.IssuedAt.Add(-time.Duration(n*7919%3600) * time.Second)
				}
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
	s.Close()
	if f := fill(t, path, "by_time"); f < 0.6 {
		t.Errorf("by_time pages %.0f %% full with late receipts, want at least 60 %%", 100*f)
	}
}
