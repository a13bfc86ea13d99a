package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pactledger/pactledger/ledger"
)

// Snapshot links: which rows name which JWKS snapshot. CreateRow writes a
// link for each snapshot a row names (ledger.SnapshotsOf) and RemoveRow
// deletes them, so SnapshotInUse is one cursor seek. The file has one
// writer at a time, so the answer holds until the transaction ends.
//
// bSnapLinks holds one key per link: the snapshot's number (4 bytes, from
// bSnapNums), then the row's number. A deployment names a handful of key
// sets, so a number is far shorter than the 32-byte id every row would
// otherwise repeat twice.
var (
	bSnapLinks = []byte("snapshot_links")
	// bSnapNums: a snapshot id (idKey) -> its number, handed out by
	// kSnapNumN at its first link and kept.
	bSnapNums = []byte("snapshot_numbers")
	kSnapNumN = []byte("snapshot_number_n")
)

func init() { allBuckets = append(allBuckets, bSnapLinks, bSnapNums) }

// snapshotNumber returns the number of snapshot id, nil if it has none;
// with assign, it hands one out when it has none.
func (t *tx) snapshotNumber(id string, assign bool) ([]byte, error) {
	k := idKey(id)
	if v := t.b(bSnapNums).Get(k); len(v) == 4 {
		return append([]byte(nil), v...), nil
	}
	if !assign {
		return nil, nil
	}
	n, err := t.counter(kSnapNumN, 1)
	if err != nil {
		return nil, err
	}
	if n > math.MaxUint32 {
		return nil, fmt.Errorf("snapshot %s: no snapshot number left", id)
	}
	num := binary.BigEndian.AppendUint32(nil, uint32(n))
	return num, t.b(bSnapNums).Put(k, num)
}

// linkSnapshots writes the links of r, row number seq.
func (t *tx) linkSnapshots(r *ledger.Row, seq []byte) error {
	for _, s := range ledger.SnapshotsOf(r) {
		num, err := t.snapshotNumber(s, true)
		if err != nil {
			return err
		}
		if err := t.b(bSnapLinks).Put(append(num, seq...), nil); err != nil {
			return err
		}
	}
	return nil
}

// unlinkSnapshots deletes the links of r, row number seq.
func (t *tx) unlinkSnapshots(r *ledger.Row, seq []byte) error {
	for _, s := range ledger.SnapshotsOf(r) {
		num, err := t.snapshotNumber(s, false)
		if err != nil {
			return err
		}
		if num == nil {
			continue // never linked
		}
		if err := t.b(bSnapLinks).Delete(append(num, seq...)); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotInUse implements ledger.Rows.
func (t *tx) SnapshotInUse(id string) (bool, error) {
	num, err := t.snapshotNumber(id, false)
	if err != nil || num == nil {
		return false, err
	}
	k, _ := t.b(bSnapLinks).Cursor().Seek(num)
	return k != nil && bytes.HasPrefix(k, num), nil
}
