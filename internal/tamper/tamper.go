// Package tamper edits a bbolt row store behind the ledger's back, as a
// hostile operator with the file could: the edits the Merkle log's audit
// and fsck must catch. For tests only.
package tamper

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
)

// The row store's buckets (storage/bolt, layout 9); a row's number by its
// id is read and written through storage/bolt, which keeps it in runs.
var (
	rowData  = []byte("row_data")
	meta     = []byte("meta")
	rowSeqN  = []byte("row_seq_n")
	evidence = []byte("evidence")
	pool     = []byte("drill_pool")
)

// Apply applies edits, each in a transaction of its own, to the closed
// bbolt file at path, as an operator who holds the file can, and closes
// it.
func Apply(path string, edits ...func(tx *bbolt.Tx) error) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	for _, e := range edits {
		if err := db.Update(e); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

// seqOf returns the number of row id.
func seqOf(tx *bbolt.Tx, id string) ([]byte, error) {
	seq := bolt.RowNumber(tx, id)
	if seq == nil {
		return nil, fmt.Errorf("no row %s", id)
	}
	return seq, nil
}

// rowOf returns the number and the decoded row of row id.
func rowOf(tx *bbolt.Tx, id string) ([]byte, *ledger.Row, error) {
	seq, err := seqOf(tx, id)
	if err != nil {
		return nil, nil, err
	}
	r, err := readRow(tx, seq)
	return seq, r, err
}

// readRow decodes row number seq.
func readRow(tx *bbolt.Tx, seq []byte) (*ledger.Row, error) {
	c, err := bolt.FileCodec(tx)
	if err != nil {
		return nil, err
	}
	raw, err := c.Decode(tx.Bucket(rowData).Get(seq))
	if err != nil {
		return nil, err
	}
	var r ledger.Row
	return &r, json.Unmarshal(raw, &r)
}

// putRow stores r as row number seq.
func putRow(tx *bbolt.Tx, seq []byte, r *ledger.Row) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	c, err := bolt.FileCodec(tx)
	if err != nil {
		return err
	}
	return tx.Bucket(rowData).Put(seq, c.Encode(v))
}

// newSeq hands out the next row number, as the store would.
func newSeq(tx *bbolt.Tx) ([]byte, error) {
	n := uint64(0)
	if v := tx.Bucket(meta).Get(rowSeqN); len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	seq := binary.BigEndian.AppendUint64(nil, n+1)
	return seq, tx.Bucket(meta).Put(rowSeqN, seq)
}

// DropRow deletes a row and its index entries, as an operator hiding a row
// would; its leaf stays in the log.
func DropRow(id string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, err := seqOf(tx, id)
		if err != nil {
			return err
		}
		if err := bolt.UnlinkRowLeaf(tx, id, seq); err != nil {
			return err
		}
		if err := bolt.DeleteRowNumber(tx, id); err != nil {
			return err
		}
		if err := tx.Bucket(rowData).Delete(seq); err != nil {
			return err
		}
		if err := bolt.SetPoolBit(tx, seq, false); err != nil {
			return err
		}
		return bolt.DropIndexEntries(tx, seq)
	}
}

// ForgeRow inserts a row that was never written through the ledger: a
// copy of row id under another id, with its evidence and index entries.
func ForgeRow(id, forged string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, r, err := rowOf(tx, id)
		if err != nil {
			return err
		}
		r.ID, r.ReceiptID = forged, "sha256:"+forged
		fseq, err := newSeq(tx)
		if err != nil {
			return err
		}
		if err := putRow(tx, fseq, r); err != nil {
			return err
		}
		if err := bolt.SetRowNumber(tx, forged, fseq); err != nil {
			return err
		}
		if bolt.PoolHas(tx, seq) {
			if err := bolt.SetPoolBit(tx, fseq, true); err != nil {
				return err
			}
		}
		if ev := tx.Bucket(evidence).Get(seq); ev != nil {
			if err := tx.Bucket(evidence).Put(fseq, append([]byte(nil), ev...)); err != nil {
				return err
			}
		}
		return bolt.CopyIndexEntries(tx, seq, fseq)
	}
}

// EditRow rewrites one stored row, indexes untouched. The result is put
// under the row's id after fn: an fn that changes the id inserts a copy.
func EditRow(id string, fn func(r *ledger.Row)) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, r, err := rowOf(tx, id)
		if err != nil {
			return err
		}
		fn(r)
		if r.ID != id {
			if seq, err = newSeq(tx); err != nil {
				return err
			}
			if err := bolt.SetRowNumber(tx, r.ID, seq); err != nil {
				return err
			}
		}
		return putRow(tx, seq, r)
	}
}

// EditLeaf rewrites the stored bytes of log leaf index (its ref and
// data together, as the store keeps them) with fn.
func EditLeaf(index uint64, fn func(stored []byte) []byte) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("log_leaves"))
		k := binary.BigEndian.AppendUint64(nil, index)
		c, err := bolt.FileCodec(tx)
		if err != nil {
			return err
		}
		v, err := c.Decode(b.Get(k))
		if err != nil {
			return err
		}
		// Written back as this layout stores a leaf: as it is.
		return b.Put(k, fn(append([]byte(nil), v...)))
	}
}

// DropIncident deletes the record of incident id, as an operator hiding
// an incident would; its row, and any leaf of its closure, stay.
func DropIncident(id string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, err := ledger.IncidentSeq(id)
		if err != nil {
			return err
		}
		return tx.Bucket([]byte("incidents")).Delete(binary.BigEndian.AppendUint64(nil, seq))
	}
}

// EditIncident rewrites the record of incident id with fn.
func EditIncident(id string, fn func(inc *ledger.IncidentRecord)) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, err := ledger.IncidentSeq(id)
		if err != nil {
			return err
		}
		b := tx.Bucket([]byte("incidents"))
		k := binary.BigEndian.AppendUint64(nil, seq)
		var inc ledger.IncidentRecord
		if err := json.Unmarshal(b.Get(k), &inc); err != nil {
			return err
		}
		fn(&inc)
		v, err := json.Marshal(inc)
		if err != nil {
			return err
		}
		return b.Put(k, v)
	}
}

// PutIncident writes an incident record the ledger never opened, as an
// operator making up an incident would.
func PutIncident(inc ledger.IncidentRecord) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, err := ledger.IncidentSeq(inc.ID)
		if err != nil {
			return err
		}
		v, err := json.Marshal(inc)
		if err != nil {
			return err
		}
		return tx.Bucket([]byte("incidents")).Put(binary.BigEndian.AppendUint64(nil, seq), v)
	}
}

// access is the bucket of read-access records (storage/bolt): by sequence
// number, the write time (Unix nanoseconds, big-endian) then the body.
var access = []byte("access_log")

// DropAccess removes access record seq.
func DropAccess(seq uint64) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		k := binary.BigEndian.AppendUint64(nil, seq)
		if tx.Bucket(access).Get(k) == nil {
			return fmt.Errorf("no access record %d", seq)
		}
		return tx.Bucket(access).Delete(k)
	}
}

// EditAccess rewrites the body of access record seq with fn; its write
// time stays.
func EditAccess(seq uint64, fn func(body []byte) []byte) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		k := binary.BigEndian.AppendUint64(nil, seq)
		v := tx.Bucket(access).Get(k)
		if len(v) < 8 {
			return fmt.Errorf("no access record %d", seq)
		}
		return tx.Bucket(access).Put(k, append(append([]byte(nil), v[:8]...), fn(append([]byte(nil), v[8:]...))...))
	}
}

// ForgetLeafIndex removes the row store's record of where the leaf of
// ref (a row's id, or another leaf's ref such as "dispute/<row>/0") is in
// the log, its leaf left in place: the ledger then takes a second leaf
// queued for ref as the first, as a ledger whose row store an operator
// edited would.
func ForgetLeafIndex(ref string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error { return bolt.ForgetLeafIndex(tx, ref) }
}

// DropFromDrillPool takes row id out of the monthly drill's pool, the row
// left as it is: an operator keeping a row from ever being sampled.
func DropFromDrillPool(id string) func(tx *bbolt.Tx) error {
	return setPool(id, false)
}

// AddToDrillPool puts row id in the monthly drill's pool, whatever the
// row is.
func AddToDrillPool(id string) func(tx *bbolt.Tx) error {
	return setPool(id, true)
}

func setPool(id string, on bool) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, err := seqOf(tx, id)
		if err != nil {
			return err
		}
		return bolt.SetPoolBit(tx, seq, on)
	}
}

// EmptyDrillPool empties the monthly drill's pool, every row left as it
// is: the drill then finds nothing to sample.
func EmptyDrillPool() func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(pool); err != nil {
			return err
		}
		_, err := tx.CreateBucket(pool)
		return err
	}
}

// grants is the row store's bucket of revocations, by grant id.
var grants = []byte("grants")

// DropRevocation deletes the revocation of grant, as a restore of the row
// store to before it, or an operator undoing it, would.
func DropRevocation(grant string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b := tx.Bucket(grants)
		if b.Get([]byte(grant)) == nil {
			return fmt.Errorf("no revocation of grant %s", grant)
		}
		return b.Delete([]byte(grant))
	}
}

// EditRevocation rewrites the revocation of grant with fn.
func EditRevocation(grant string, fn func(r *ledger.Revocation)) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		b := tx.Bucket(grants)
		v := b.Get([]byte(grant))
		if v == nil {
			return fmt.Errorf("no revocation of grant %s", grant)
		}
		var r ledger.Revocation
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		fn(&r)
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return b.Put([]byte(grant), v)
	}
}

// IndexCopy writes a copy of row id, rewritten by fn (nil for none),
// under a new number and moves the row's entries in the indexes named
// (bucket names such as "by_target"; every index but the expiry index
// when none is) to the copy. Row id's number still leads to its record:
// a read by id serves the record, a listing through those indexes the
// copy. EditRow after it edits the record only.
func IndexCopy(id string, fn func(r *ledger.Row), indexes ...string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, r, err := rowOf(tx, id)
		if err != nil {
			return err
		}
		if fn != nil {
			fn(r)
		}
		cseq, err := newSeq(tx)
		if err != nil {
			return err
		}
		if err := putRow(tx, cseq, r); err != nil {
			return err
		}
		return bolt.MoveIndexEntries(tx, seq, cseq, indexes...)
	}
}

// Unindex deletes the index entries of row id from the indexes named
// (bucket names such as "by_principal"), or from every one when none is,
// the row left stored and found by its id: a row no listing through
// those indexes shows.
func Unindex(id string, indexes ...string) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		seq, err := seqOf(tx, id)
		if err != nil {
			return err
		}
		return bolt.DropIndexEntries(tx, seq, indexes...)
	}
}

// ForgetPublished clears the row store's record of how far the log's
// tiles were published, as whoever holds the file could: the ledger then
// takes an evidence store without its log for one it never published to.
func ForgetPublished() func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		return tx.Bucket(meta).Delete([]byte("log_tiles_published"))
	}
}
