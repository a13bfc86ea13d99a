package bolt

import (
	"bytes"

	"github.com/pactledger/pactledger/ledger"
)

// Snapshot links: which rows name which JWKS snapshot. CreateRow writes a
// link for each snapshot a row names (ledger.SnapshotsOf) and RemoveRow
// deletes them, so SnapshotInUse is one cursor seek. The file has one
// writer at a time, so the answer holds until the transaction ends.
//
// bSnapLinks holds one key per link: the snapshot id (idKey), then the
// row's number.
var bSnapLinks = []byte("snapshot_links")

func init() { allBuckets = append(allBuckets, bSnapLinks) }

// linkPrefix is the start of every link key of snapshot id.
func linkPrefix(id string) []byte {
	k := idKey(id)
	if len(k) != 32 {
		k = append(k, 0) // text: its end, so a longer id is not under it
	}
	return k
}

func linkKey(snapshot string, seq []byte) []byte {
	return append(linkPrefix(snapshot), seq...)
}

// linkSnapshots writes the links of r, row number seq.
func (t *tx) linkSnapshots(r *ledger.Row, seq []byte) error {
	for _, s := range ledger.SnapshotsOf(r) {
		if err := t.b(bSnapLinks).Put(linkKey(s, seq), nil); err != nil {
			return err
		}
	}
	return nil
}

// unlinkSnapshots deletes the links of r, row number seq.
func (t *tx) unlinkSnapshots(r *ledger.Row, seq []byte) error {
	for _, s := range ledger.SnapshotsOf(r) {
		if err := t.b(bSnapLinks).Delete(linkKey(s, seq)); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotInUse implements ledger.Rows.
func (t *tx) SnapshotInUse(id string) (bool, error) {
	prefix := linkPrefix(id)
	k, _ := t.b(bSnapLinks).Cursor().Seek(prefix)
	return k != nil && len(k) == len(prefix)+8 && bytes.HasPrefix(k, prefix), nil
}
