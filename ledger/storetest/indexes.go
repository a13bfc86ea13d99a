package storetest

import (
	"context"

	"github.com/pactledger/pactledger/ledger"
)

// IndexFindings returns what the store's CheckIndexes finds (fsck's
// check of its indexes against its rows), in the order it reports them.
func IndexFindings(ctx context.Context, s ledger.Store) ([]ledger.IndexFinding, error) {
	var out []ledger.IndexFinding
	err := s.View(ctx, func(tx ledger.Tx) error {
		return tx.CheckIndexes(func(f ledger.IndexFinding) error {
			out = append(out, f)
			return nil
		})
	})
	return out, err
}
