package bolt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// Snapshot links: which rows name which JWKS snapshot. CreateRow writes a
// link for each snapshot a row names (ledger.SnapshotsOf) and RemoveRow
// deletes them, so SnapshotInUse is one cursor seek. The file has one
// writer at a time, so the answer holds until the transaction ends.
//
// Files written before links existed kept a counter per snapshot in
// snapshot_refs instead. Open links their rows once (openSnapshotLinks)
// and empties that bucket, which is no longer written.
var (
	// bSnapLinks holds one key per link: snapshot id, 0x00, row id.
	bSnapLinks = []byte("snapshot_rows")
	// kSnapLinks in bMeta marks a file whose links are complete.
	kSnapLinks = []byte("snapshot_links")
)

// linkPrefix is the start of every link key of snapshot id.
func linkPrefix(id string) []byte {
	return append([]byte(id), 0)
}

func linkKey(snapshot, row string) []byte {
	return append(linkPrefix(snapshot), row...)
}

// linkSnapshots writes r's links.
func (t *tx) linkSnapshots(r *ledger.Row) error {
	for _, s := range ledger.SnapshotsOf(r) {
		if err := t.b(bSnapLinks).Put(linkKey(s, r.ID), nil); err != nil {
			return err
		}
	}
	return nil
}

// unlinkSnapshots deletes r's links.
func (t *tx) unlinkSnapshots(r *ledger.Row) error {
	for _, s := range ledger.SnapshotsOf(r) {
		if err := t.b(bSnapLinks).Delete(linkKey(s, r.ID)); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotInUse implements ledger.Rows.
func (t *tx) SnapshotInUse(id string) (bool, error) {
	prefix := linkPrefix(id)
	k, _ := t.b(bSnapLinks).Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix), nil
}

// openSnapshotLinks makes sure the file has its snapshot links: in a file
// without the mark (new, or written before links existed) it creates the
// bucket, links every stored row, empties snapshot_refs and sets the mark,
// in one transaction, and logs how many rows it linked.
func openSnapshotLinks(db *bolt.DB) error {
	n := 0
	err := db.Update(func(btx *bolt.Tx) error {
		if btx.Bucket(bMeta).Get(kSnapLinks) != nil {
			return nil
		}
		links, err := btx.CreateBucketIfNotExists(bSnapLinks)
		if err != nil {
			return err
		}
		n = 0
		err = btx.Bucket(bRows).ForEach(func(k, v []byte) error {
			var r ledger.Row
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode row %s: %w", k, err)
			}
			n++
			for _, s := range ledger.SnapshotsOf(&r) {
				if err := links.Put(linkKey(s, string(k)), nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("link rows to their JWKS snapshots: %w", err)
		}
		if btx.Bucket(bSnapRefs) != nil {
			if err := btx.DeleteBucket(bSnapRefs); err != nil {
				return err
			}
		}
		if _, err := btx.CreateBucket(bSnapRefs); err != nil {
			return err
		}
		return btx.Bucket(bMeta).Put(kSnapLinks, []byte{1})
	})
	if err != nil {
		return err
	}
	if n > 0 {
		slog.Default().Info("row store (bbolt): linked the stored rows to their JWKS snapshots once; snapshot reference counters are no longer kept",
			slog.String("path", db.Path()), slog.Int("rows", n))
	}
	return nil
}
