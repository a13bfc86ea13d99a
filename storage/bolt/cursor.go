package bolt

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// bbolt (1.5) rebalances a bucket's tree only when the transaction
// commits, so a leaf whose keys a write transaction deleted stays in the
// tree, empty, until then. Seek, First and Next step over such leaves;
// Prev and Last do not always: prev and last below are the row store's
// ways back.

// prev moves c to the key before from, the key c is on, and returns it:
// nil when from is the bucket's first key. Prev returns nil when it steps
// back into an emptied leaf, as it does at the bucket's start, though
// keys may lie before it. A nil from Prev with a key before from still in
// the bucket is such a leaf: Prev called again steps on back from it,
// past each empty leaf, to the key.
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

// last moves c to the bucket's last key and returns it (nil when the
// bucket is empty). Last steps back over emptied leaves to the last key
// there is, but when the transaction emptied every leaf of a bucket that
// has more than one it never returns: stepping back from the first leaf
// starts again from it. A bucket with no key left is seen by First.
func last(c *bolt.Cursor) (k, v []byte) {
	if first, _ := c.First(); first == nil {
		return nil, nil
	}
	return c.Last()
}
