package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/storage/bolt"
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
