package bolt

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// prev moves c to the key before from, the key c is on, and returns it:
// nil when from is the bucket's first key. It is c.Prev made right for a
// write transaction. bbolt (1.5) rebalances a bucket's tree only when the
// transaction commits, so a leaf whose keys the transaction deleted stays
// in the tree, empty, until then; Prev returns nil when it steps back
// into such a leaf, as it does at the bucket's start, though keys may lie
// before it (Next, First and Last step over empty leaves). A nil from
// Prev with a key before from still in the bucket is such a leaf: Prev
// called again steps on back from it, past each empty leaf, to the key.
func prev(c *bolt.Cursor, from []byte) (k, v []byte) {
	if k, v = c.Prev(); k != nil {
		return k, v
	}
	first, _ := c.Bucket().Cursor().First()
	if first == nil || bytes.Compare(first, from) >= 0 {
		return nil, nil
	}
	// Each Prev leaves at least one leaf behind, so the bucket's pages
	// bound the steps; the bound only guards against a bbolt that moves
	// otherwise.
	tx := c.Bucket().Tx()
	for range tx.Size()/int64(tx.DB().Info().PageSize) + 1 {
		if k, v = c.Prev(); k != nil {
			return k, v
		}
	}
	return nil, nil
}
