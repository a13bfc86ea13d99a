package bolt

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// CheckIndexes implements ledger.Indexes, for fsck. It reads every
// record of row_data and every entry of the indexes in one read
// transaction: a record its id does not lead to (IndexUnnamedRecord,
// bRowSeq), a record its id leads to with no entry in the time index
// (IndexUnlistedRecord, ixTime) or with no entry for one of its values
// in the index of that value, which the lookups by it read
// (IndexMissingEntry, once an index and a row; one seek of the index for
// each), and each index whose entries lead to a record its id does not
// lead to (IndexOtherRecord, once an index and a row). An entry of a
// number with no record, which a removal can leave and compaction
// removes, is not reported: no read serves it.
func (t *tx) CheckIndexes(fn func(ledger.IndexFinding) error) error {
	var last uint64
	if v := t.get(bMeta, kRowSeqN); len(v) == 8 {
		last = binary.BigEndian.Uint64(v)
	}
	listed, good := newBitSet(last), newBitSet(last)
	if err := eachEntry(t.b(ixTime), func(_ []byte, p posting) error {
		listed.set(p.seq)
		return nil
	}); err != nil {
		return fmt.Errorf("check indexes: %s: %w", ixTime, err)
	}
	// other holds the id of each record its id does not lead to.
	other := map[uint64]string{}
	cursors := map[string]*bolt.Cursor{}
	c := t.b(bRowData).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			continue
		}
		n := binary.BigEndian.Uint64(k)
		r, err := decodeRow(t.c, k, v)
		if err != nil {
			return fmt.Errorf("check indexes: %w", err)
		}
		id := r.ID
		f := ledger.IndexFinding{RowID: id}
		if s := t.seqOf(id); s != nil && binary.BigEndian.Uint64(s) == n {
			good.set(n)
			if err := t.checkEntries(r, k, listed.has(n), cursors, fn); err != nil {
				return err
			}
			if listed.has(n) {
				continue
			}
			f.Index, f.Problem = string(ixTime), ledger.IndexUnlistedRecord
		} else {
			other[n] = id
			f.Index, f.Problem = string(bRowSeq), ledger.IndexUnnamedRecord
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	if len(other) == 0 {
		return nil
	}
	for _, name := range indexBuckets {
		reported := map[uint64]bool{}
		if err := eachEntry(t.b(name), func(_ []byte, p posting) error {
			id, ok := other[p.seq]
			if !ok || reported[p.seq] {
				return nil
			}
			reported[p.seq] = true
			return fn(ledger.IndexFinding{RowID: id, Index: string(name), Problem: ledger.IndexOtherRecord})
		}); err != nil {
			return err
		}
	}
	return nil
}

// checkEntries reports each index of row r's values (indexEntries) with
// no entry of it at number seq, once an index: the lookups through that
// index miss the row. The time index is checked here only for where its
// entry is (listed: CheckIndexes found one of the number), since a
// record with none at all is reported as unlisted. A row whose issue
// time is not an int64 of nanoseconds has its entries where this version
// keys them (the time clamped) or where versions before did (UnixNano's
// undefined answer, at least 0); a value holding U+FFFD may have been
// keyed by bytes that were not UTF-8, which the record no longer holds,
// and is not judged.
func (t *tx) checkEntries(r *ledger.Row, seq []byte, listed bool, cursors map[string]*bolt.Cursor, fn func(ledger.IndexFinding) error) error {
	at := []posting{indexPosting(r.IssuedAt, seq)}
	if !nanosDefined(r.IssuedAt) {
		at = append(at, posting{uint64(max(r.IssuedAt.UnixNano(), 0)), at[0].seq})
	}
	var reported []string
	for _, e := range indexEntries(r) {
		name := string(e.bucket)
		if name == string(ixTime) && !listed || slices.Contains(reported, name) {
			continue
		}
		c := cursors[name]
		if c == nil {
			c = t.b(e.bucket).Cursor()
			cursors[name] = c
		}
		found := false
		for _, p := range at {
			ok, err := hasEntry(c, indexPrefix(e.value), p)
			if err != nil {
				return fmt.Errorf("check indexes: %s of row %s: %w", name, r.ID, err)
			}
			found = found || ok
		}
		if found || strings.ContainsRune(e.value, utf8.RuneError) {
			continue
		}
		reported = append(reported, name)
		if err := fn(ledger.IndexFinding{RowID: r.ID, Index: name, Problem: ledger.IndexMissingEntry}); err != nil {
			return err
		}
	}
	return nil
}

// bitSet is a set of row numbers: a bit each up to the last number the
// store handed out, and a map for any number an edit put past it.
type bitSet struct {
	bits []uint64
	far  map[uint64]bool
}

func newBitSet(last uint64) *bitSet {
	return &bitSet{bits: make([]uint64, last/64+1), far: map[uint64]bool{}}
}

func (b *bitSet) set(n uint64) {
	if i := n / 64; i < uint64(len(b.bits)) {
		b.bits[i] |= 1 << (n % 64)
		return
	}
	b.far[n] = true
}

func (b *bitSet) has(n uint64) bool {
	if i := n / 64; i < uint64(len(b.bits)) {
		return b.bits[i]&(1<<(n%64)) != 0
	}
	return b.far[n]
}
