package bolt

import (
	"bytes"
	"fmt"
	"iter"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Layout 9 (docs/design/028): a row's number by its id (bRowSeq) and the
// first row of a request JWT by its hash (bReqJWT) are kept in runs.
//
// Both buckets are keyed at random, so every row put a key into a leaf
// page no other row of its batch touched, and bbolt read that page into a
// node of every entry on it (about a hundred) to add one, then wrote it
// back. A run packs the entries whose keys follow one another under one
// key, as the indexes' runs do (runs.go): a page holds a few runs, so the
// page a row touches makes a node of a few entries.
//
// A run's key is its first entry's key (its head); its value is the
// head's row number (8 bytes), then each later entry's key and number, in
// key order. Only keys of the bucket's own length are run (an id's 32
// bytes, a request JWT's 16-byte short key: its width); a run holds the
// keys of that width from its head up to the next head of that width. Any
// other key (a text id, a request JWT's whole hash kept because another
// holds its short key) keeps a value of its own and is never run. A value
// of 8 bytes is a run of one, which is how every earlier layout kept an
// entry: a file of layout 8 reads as it is, and its entries are run as
// rows are added after them.

// maxIDRunBytes bounds a run's key and value together: a put rewrites at
// most this, and a page holds several runs.
const maxIDRunBytes = 480

// idWidth is the key length bucket name's runs are made of.
func idWidth(name []byte) int {
	if bytes.Equal(name, bReqJWT) {
		return reqKeyLen
	}
	return 32
}

// idRunAt returns the run of width w that holds k if k is there: the run of
// the last head of that width at or before k (nil when there is none).
func idRunAt(c *bolt.Cursor, w int, k []byte) (head, v []byte) {
	head, v = c.Seek(k)
	if head != nil && bytes.Equal(head, k) && len(head) == w {
		return head, v
	}
	if head == nil {
		head, v = last(c)
	} else {
		head, v = prev(c, head)
	}
	for head != nil && len(head) != w {
		head, v = prev(c, head)
	}
	return head, v
}

// runEntries returns the entries after the head in run value v of width
// w, and whether v is a run: a value of another length (one written
// before layout 4 kept more than the number) is its key's alone.
func runEntries(v []byte, w int) ([]byte, bool) {
	if len(v) < 8 || (len(v)-8)%(w+8) != 0 {
		return nil, false
	}
	return v[8:], true
}

// idGet returns the value bucket b keeps for k: its row number for a key
// of width w, whether it heads a run or is in one; the value as it is for
// any other key; nil when k is not there.
func idGet(b *bolt.Bucket, w int, k []byte) []byte {
	return idGetAt(b.Cursor(), w, k)
}

// idGetAt is idGet with a cursor on the bucket, which it moves.
func idGetAt(c *bolt.Cursor, w int, k []byte) []byte {
	if len(k) != w {
		return seekExact(c, k)
	}
	head, v := idRunAt(c, w, k)
	if head == nil {
		return nil
	}
	entries, ok := runEntries(v, w)
	if bytes.Equal(head, k) {
		if ok {
			return v[:8]
		}
		return v
	}
	if i, found := searchEntries(entries, w, k); found {
		return entries[i*(w+8)+w : (i+1)*(w+8)]
	}
	return nil
}

// searchEntries returns the index of the entry keyed k among entries of
// key width w (each its key, then its 8-byte number, in key order), or
// the index it would take, and whether it is there.
func searchEntries(entries []byte, w int, k []byte) (int, bool) {
	n := len(entries) / (w + 8)
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch bytes.Compare(entries[m*(w+8):m*(w+8)+w], k) {
		case 0:
			return m, true
		case -1:
			lo = m + 1
		default:
			hi = m
		}
	}
	return lo, false
}

// idPut keeps number seq (8 bytes) for k in bucket b: a key of width w
// goes into the run that would hold it (a new run when none does), which
// is split in two when it grows past maxIDRunBytes; any other key gets a
// value of its own.
func idPut(b *bolt.Bucket, w int, k, seq []byte) error {
	return idPutAt(b.Cursor(), w, k, seq)
}

// idPutAt is idPut with a cursor on the bucket, which it moves.
func idPutAt(c *bolt.Cursor, w int, k, seq []byte) error {
	b := c.Bucket()
	if len(k) != w {
		return b.Put(k, seq)
	}
	head, v := idRunAt(c, w, k)
	_, ok := runEntries(v, w)
	if head == nil || !ok {
		// No run holds k's place (or the head's value is of another
		// form, which k then replaces or follows): k starts a run.
		return b.Put(k, append([]byte(nil), seq...))
	}
	// The run as records of key and number, the head's first.
	run := make([]byte, 0, len(head)+len(v)+w+8)
	run = append(append(run, head...), v...)
	i, found := searchEntries(run, w, k)
	if found {
		copy(run[i*(w+8)+w:], seq)
	} else {
		run = slices.Insert(run, i*(w+8), append(append(make([]byte, 0, w+8), k...), seq...)...)
	}
	if len(run) <= maxIDRunBytes {
		return b.Put(run[:w], run[w:])
	}
	half := len(run) / (w + 8) / 2 * (w + 8)
	if err := b.Put(run[:w], run[w:half]); err != nil {
		return err
	}
	return b.Put(run[half:half+w], run[half+w:])
}

// idDelete removes k from bucket b, and reports whether it was there. A
// run whose head goes is kept under its next entry's key.
func idDelete(b *bolt.Bucket, w int, k []byte) (bool, error) {
	if len(k) != w {
		found := b.Get(k) != nil
		return found, b.Delete(k)
	}
	head, v := idRunAt(b.Cursor(), w, k)
	if head == nil {
		return false, nil
	}
	if _, ok := runEntries(v, w); !ok {
		if !bytes.Equal(head, k) {
			return false, nil
		}
		return true, b.Delete(k)
	}
	run := append(append(make([]byte, 0, len(head)+len(v)), head...), v...)
	i, found := searchEntries(run, w, k)
	if !found {
		return false, nil
	}
	run = slices.Delete(run, i*(w+8), (i+1)*(w+8))
	if i > 0 {
		return true, b.Put(run[:w], run[w:])
	}
	if err := b.Delete(k); err != nil {
		return true, err
	}
	if len(run) == 0 {
		return true, nil
	}
	return true, b.Put(run[:w], run[w:])
}

// idEntries yields bucket b's keys at or after from (all when from is
// nil), with runs of width w opened, in key order: each key with its row
// number, or with its value as it is for a key of another width.
func idEntries(b *bolt.Bucket, w int, from []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		c := b.Cursor()
		var k, v []byte
		if from != nil {
			k, v = idRunAt(c, w, from)
		}
		if k == nil {
			k, v = c.First()
		}
		at := func(k []byte) bool { return from == nil || bytes.Compare(k, from) >= 0 }
		// pending holds the entries of the last run read that are not
		// yet yielded: keys of another width may sort among them.
		var pending []byte
		flush := func(before []byte) bool {
			for len(pending) > 0 && (before == nil || bytes.Compare(pending[:w], before) < 0) {
				if at(pending[:w]) && !yield(pending[:w], pending[w:w+8]) {
					return false
				}
				pending = pending[w+8:]
			}
			return true
		}
		for ; k != nil; k, v = c.Next() {
			if !flush(k) {
				return
			}
			val := v
			if len(k) == w {
				if entries, ok := runEntries(v, w); ok {
					val, pending = v[:8], entries
				}
			}
			if at(k) && !yield(k, val) {
				return
			}
		}
		flush(nil)
	}
}

// entriesAfter yields bucket name's keys after after (all of them when
// after is nil) in order, with their values; the runs of bRowSeq and
// bReqJWT opened into their entries (idruns.go).
func entriesAfter(b *bolt.Bucket, name, after []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		if bytes.Equal(name, bRowSeq) || bytes.Equal(name, bReqJWT) {
			for k, v := range skipKey(idEntries(b, idWidth(name), after), after) {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		c := b.Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for ; k != nil; k, v = c.Next() {
			if !yield(k, v) {
				return
			}
		}
	}
}

// skipKey yields seq's entries but the one keyed after (an entries' start
// at or after a key, made to start after it).
func skipKey(seq iter.Seq2[[]byte, []byte], after []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		for k, v := range seq {
			if after != nil && bytes.Equal(k, after) {
				continue
			}
			if !yield(k, v) {
				return
			}
		}
	}
}

// RowNumber returns the number of row id (a copy), nil when there is
// none, in a transaction on a file no store has open (for tools that edit
// a file); one that is pending is found among the records.
func RowNumber(btx *bolt.Tx, id string) []byte {
	v := idGet(btx.Bucket(bRowSeq), idWidth(bRowSeq), idKey(id))
	if len(v) < 8 {
		return pendingRowNumber(btx, idKey(id))
	}
	return append([]byte(nil), v[:8]...)
}

// SetRowNumber keeps number seq (8 bytes) for row id, in a write
// transaction on a file no store has open; the pending keys are written
// first (settlePending).
func SetRowNumber(btx *bolt.Tx, id string, seq []byte) error {
	if err := settlePending(btx); err != nil {
		return err
	}
	return idPut(btx.Bucket(bRowSeq), idWidth(bRowSeq), idKey(id), seq)
}

// SetRequestJWTRow keeps row id as the first that used the request JWT
// whose hex SHA-256 is sha, under the key a lookup reads first, in a
// write transaction on a file no store has open: in the row's record when
// its keys are pending, else in the bucket. It writes what CreateRow
// writes for a row it indexes, whatever the row: the entries an earlier
// version left.
func SetRequestJWTRow(btx *bolt.Tx, sha, id string) error {
	rowKey, k := idKey(id), reqKey(sha)
	var pending []byte
	for r := range pendingRecords(btx.Bucket(bPending), 0) {
		if r.err == nil && bytes.Equal(r.rowKey, rowKey) {
			pending = seqKey(r.n)
		}
	}
	if pending != nil {
		return btx.Bucket(bPending).Put(pending, pendingRecord(rowKey, k))
	}
	seq := RowNumber(btx, id)
	if seq == nil {
		return fmt.Errorf("request JWT %s: no row %s", sha, id)
	}
	return idPut(btx.Bucket(bReqJWT), idWidth(bReqJWT), k, seq)
}

// DeleteRowNumber removes row id's number, in a write transaction on a
// file no store has open; the pending keys are written first.
func DeleteRowNumber(btx *bolt.Tx, id string) error {
	if err := settlePending(btx); err != nil {
		return err
	}
	_, err := idDelete(btx.Bucket(bRowSeq), idWidth(bRowSeq), idKey(id))
	return err
}

// RowNumbers yields each row's id key (IDString gives the id) and number
// in id order, in a transaction on a file no store has open, the pending
// ones among them.
func RowNumbers(btx *bolt.Tx) (iter.Seq2[[]byte, []byte], error) {
	p, err := readPending(btx)
	if err != nil {
		return nil, err
	}
	t := &tx{tx: btx, ids: allIDs(p)}
	return t.idEntries(bRowSeq, nil), nil
}
