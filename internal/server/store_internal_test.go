package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/s3"
)

// TestStoreCommitDelay: store.commitDelay reaches the bbolt store: unset
// gives the store's default, 0s none, a duration itself.
func TestStoreCommitDelay(t *testing.T) {
	d := func(v time.Duration) *config.Duration { c := config.Duration(v); return &c }
	for _, tc := range []struct {
		name string
		set  *config.Duration
		want time.Duration
	}{
		{"unset", nil, bolt.DefaultCommitDelay},
		{"none", d(0), 0},
		{"5ms", d(5 * time.Millisecond), 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Store = config.Store{Kind: config.StoreBbolt, Path: filepath.Join(t.TempDir(), "ledger.db"), CommitDelay: tc.set}
			s, err := openStore(context.Background(), cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.(*bolt.Store).CommitDelay(); got != tc.want {
				t.Errorf("commit delay %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReferenceClocks: the sweep checks the host's clock against the S3
// evidence store's when evidence is on S3; a bbolt row store with a local
// evidence directory has no clock but the host's, and those of
// clock.references.
func TestReferenceClocks(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if got := referenceClocks(st, nil, nil); len(got) != 0 {
		t.Fatalf("bbolt and a local directory: %d reference clocks, want none", len(got))
	}
	evidence, err := s3.New(s3.Config{Endpoint: "127.0.0.1:1", Bucket: "evidence"})
	if err != nil {
		t.Fatal(err)
	}
	if got := referenceClocks(st, evidence, nil); len(got) != 1 || got[0].Name != "the S3 evidence store" || got[0].Now == nil {
		t.Fatalf("bbolt and S3: reference clocks %+v, want the S3 evidence store's", got)
	}
	if got := referenceClocks(st, nil, []string{"https://time.example.com/"}); len(got) != 1 || got[0].Name != "clock.references[0]" {
		t.Fatalf("bbolt, a local directory and clock.references: reference clocks %+v, want the reference's", got)
	}
}
