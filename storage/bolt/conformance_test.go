package bolt_test

import (
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/bolt"
)

// TestConformance runs the row store conformance suite against bbolt.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dir string) (ledger.Store, func() error) {
		s, err := bolt.Open(filepath.Join(dir, "ledger.db"), bolt.Config{})
		if err != nil {
			t.Fatalf("open store in %s: %v", dir, err)
		}
		return s, s.Close
	}, storetest.Options{
		SingleUploader: true,
		EarlierRequestJWTEntry: func(t *testing.T, dir, sha, id string) {
			rawUpdate(t, filepath.Join(dir, "ledger.db"), func(tx *bbolt.Tx) error { return bolt.SetRequestJWTRow(tx, sha, id) })
		},
	})
}
