package bolt

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// bAccess holds read-access records by sequence number; each value is the
// write time (Unix nanoseconds, big-endian) followed by the body.
var bAccess = []byte("access_log")

func init() {
	allBuckets = append(allBuckets, bAccess)
}

// AppendAccess implements ledger.Reports.
func (t *tx) AppendAccess(at time.Time, body []byte) (uint64, error) {
	b := t.b(bAccess)
	seq, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	v := binary.BigEndian.AppendUint64(nil, unixNanos(at))
	return seq, b.Put(seqKey(seq), append(v, body...))
}

// LastAccessSeq implements ledger.AccessNumbers: the bucket's sequence,
// which a write that fails hands back with the rest of the write.
func (t *tx) LastAccessSeq() (uint64, bool, error) {
	return t.b(bAccess).Sequence(), true, nil
}

// decodeAccess splits a stored access record.
func decodeAccess(k, v []byte) (ledger.AccessEntry, error) {
	if len(k) != 8 || len(v) < 8 {
		return ledger.AccessEntry{}, fmt.Errorf("access record %x is corrupt", k)
	}
	return ledger.AccessEntry{
		Seq:  binary.BigEndian.Uint64(k),
		At:   time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(),
		Body: append([]byte(nil), v[8:]...),
	}, nil
}

// AccessLog implements ledger.Reports.
func (t *tx) AccessLog(after uint64, n int) ([]ledger.AccessEntry, error) {
	var out []ledger.AccessEntry
	c := t.b(bAccess).Cursor()
	for k, v := c.Seek(seqKey(after + 1)); k != nil && len(out) < n; k, v = c.Next() {
		e, err := decodeAccess(k, v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// PruneAccess implements ledger.Reports. Records are written in time
// order, so the oldest come first and pruning stops at the first record
// written at or after before; the records of keep's spans are passed
// over.
func (t *tx) PruneAccess(before time.Time, keep []ledger.AccessSpan, n int) (int, error) {
	c := t.b(bAccess).Cursor()
	removed := 0
	for k, v := c.First(); k != nil && removed < n; {
		e, err := decodeAccess(k, v)
		if err != nil {
			return removed, err
		}
		if !e.At.Before(before) {
			break
		}
		for len(keep) > 0 && keep[0].Last < e.Seq {
			keep = keep[1:]
		}
		if len(keep) > 0 && keep[0].First <= e.Seq {
			if keep[0].Last == math.MaxUint64 {
				break
			}
			k, v = c.Seek(seqKey(keep[0].Last + 1))
			continue
		}
		if err := c.Delete(); err != nil {
			return removed, err
		}
		removed++
		k, v = c.Seek(seqKey(e.Seq + 1))
	}
	return removed, nil
}
