package bolt

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pactledger/pactledger/ledger"
)

// Snapshot counts: how many stored rows name each JWKS snapshot.
// CreateRow counts a row in for each snapshot it names (ledger.SnapshotsOf)
// and RemoveRow counts it out, so SnapshotInUse is one read. The file has
// one writer at a time, so the answer holds until the transaction ends.
//
// bSnapCounts: the snapshot's number (4 bytes, from bSnapNums) -> the
// count (8 bytes). A deployment names a handful of key sets, so the bucket
// is one page however many rows there are (layout 5; layout 4 kept one
// key per row and snapshot, 63 bytes a row, in bSnapLinks).
var (
	bSnapCounts = []byte("snapshot_counts")
	// bSnapNums: a snapshot id (idKey) -> its number, handed out by
	// kSnapNumN at its first link and kept.
	bSnapNums = []byte("snapshot_numbers")
	kSnapNumN = []byte("snapshot_number_n")
	// bSnapLinks: layout 4's links, the snapshot's number then the row's
	// number; counted into bSnapCounts and deleted by the conversion.
	bSnapLinks = []byte("snapshot_links")
)

func init() { allBuckets = append(allBuckets, bSnapCounts, bSnapNums) }

// snapshotNumber returns the number of snapshot id, nil if it has none;
// with assign, it hands one out when it has none.
func (t *tx) snapshotNumber(id string, assign bool) ([]byte, error) {
	k := idKey(id)
	if v := t.get(bSnapNums, k); len(v) == 4 {
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

// linkSnapshots counts r in for each snapshot it names.
func (t *tx) linkSnapshots(r *ledger.Row) error {
	for _, s := range ledger.SnapshotsOf(r) {
		num, err := t.snapshotNumber(s, true)
		if err != nil {
			return err
		}
		if err := t.addSnapshotCount(num, 1); err != nil {
			return fmt.Errorf("snapshot %s: %w", s, err)
		}
	}
	return nil
}

// unlinkSnapshots counts r out; r is the stored row, as
// for the rest of RemoveRow.
func (t *tx) unlinkSnapshots(r *ledger.Row) error {
	for _, s := range ledger.SnapshotsOf(r) {
		num, err := t.snapshotNumber(s, false)
		if err != nil {
			return err
		}
		if num == nil {
			return fmt.Errorf("snapshot %s: row %s names it, but it was never counted", s, r.ID)
		}
		if err := t.addSnapshotCount(num, -1); err != nil {
			return fmt.Errorf("snapshot %s: %w", s, err)
		}
	}
	return nil
}

// addSnapshotCount adds delta to the count of snapshot number num. A
// count never goes below zero: that would be a row counted out that was
// never counted in, and SnapshotInUse would then answer no too early.
func (t *tx) addSnapshotCount(num []byte, delta int64) error {
	b := t.b(bSnapCounts)
	var n uint64
	if v := b.Get(num); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if delta < 0 && n < uint64(-delta) {
		return fmt.Errorf("%d rows name it, fewer than the %d counted out", n, -delta)
	}
	n = uint64(int64(n) + delta)
	if n == 0 {
		return b.Delete(num)
	}
	return b.Put(num, u64(n))
}

// SnapshotInUse implements ledger.Rows.
func (t *tx) SnapshotInUse(id string) (bool, error) {
	num, err := t.snapshotNumber(id, false)
	if err != nil || num == nil {
		return false, err
	}
	return t.get(bSnapCounts, num) != nil, nil
}
