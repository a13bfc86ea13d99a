package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// Leftovers are entries that name a row number the file does not store.
// A row's entries are written and removed in the transaction that writes
// or removes the row, so none should exist; before prev (cursor.go), a
// transaction that removed every entry of a leaf could miss a later row's
// entry that was not its run's first, and leave it (docs/design/023,
// "Stepping back after deletes"). A listing that reaches one fails
// ("indexed but not stored").

// leftoverBatch bounds the entries one transaction of DropLeftovers
// removes.
const leftoverBatch = 10_000

// Leftovers is what DropLeftovers did.
type Leftovers struct {
	// Removed counts the entries removed, by bucket.
	Removed map[string]int
	// Moved counts the removed rows' leaf indexes moved to the log's
	// index by id; Kept those left where they were, their row's id not
	// known or in doubt.
	Moved, Kept int
}

// Total is the number of entries removed.
func (l Leftovers) Total() int {
	n := 0
	for _, c := range l.Removed {
		n += c
	}
	return n
}

// leftover is one entry to remove: a run index's entry under its prefix,
// or an id bucket's key. A row leaf index's entry moves to the log's
// index by id first (logKey: the removed row's id key), as the removal
// would have moved it.
type leftover struct {
	bucket []byte
	prefix []byte
	p      posting
	key    []byte
	logKey []byte
}

// scanCheck is how many entries the scan reads between two looks at its
// context.
const scanCheck = 1 << 14

// DropLeftovers removes the index entries, row numbers by id and request
// JWT entries that name a row the file does not store, and says how many
// it removed from each bucket. A removed row's leaf index left among the
// rows' (bRowLeaves) was the one record of where its leaf is: it moves
// to the log's index by the row's id (leafOwner), where the removal would
// have put it; one whose id is not known or in doubt stays where it is,
// where only a stored row's number would read it, so that it fails no
// reader, and a later pass decides the same. DropLeftovers reads the file in
// one transaction and removes what it found in others, so it is for a
// file no ledger is writing to (ledgerd compact runs it with ledgerd
// stopped).
func (s *Store) DropLeftovers(ctx context.Context) (Leftovers, error) {
	var found []leftover
	keptLeaves := 0
	pending := snapshotIDs(s.pending)
	if err := view(s.db, func(btx *bolt.Tx) error {
		pending.snapshot(btx)
		stored, err := storedNumbers(ctx, btx)
		if err != nil {
			return err
		}
		for _, name := range indexBuckets {
			if err := runLeftovers(ctx, btx.Bucket(name), name, func(p posting) uint64 { return p.seq }, stored, &found); err != nil {
				return err
			}
		}
		// A removed row's id, from the row number by id left with it.
		var idLeft []leftover
		ids := map[uint64][]byte{}
		doubt := map[uint64]bool{} // numbers two ids were left under
		for _, name := range [][]byte{bRowSeq, bReqJWT} {
			n := 0
			for k, v := range idEntries(btx.Bucket(name), idWidth(name), nil) {
				if n++; n%scanCheck == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				if len(v) >= 8 && stored.has(binary.BigEndian.Uint64(v)) {
					continue
				}
				l := leftover{bucket: name, key: append([]byte(nil), k...)}
				if len(v) >= 8 && bytes.Equal(name, bRowSeq) {
					n := binary.BigEndian.Uint64(v)
					if _, two := ids[n]; two {
						doubt[n] = true
					}
					ids[n] = l.key
				}
				idLeft = append(idLeft, l)
			}
		}
		// A row's leaf index: the entry's "time" is the row's number,
		// its "number" the leaf's index.
		var leaves []leftover
		if err := runLeftovers(ctx, btx.Bucket(bRowLeaves), bRowLeaves, func(p posting) uint64 { return p.time }, stored, &leaves); err != nil {
			return err
		}
		// Moved first: a crash between two batches then never leaves a
		// row's leaf index without its id. Of several that would move to
		// one id, the row numbered last moves, as removals one after the
		// other would have left it; the others then find the log's index
		// naming another leaf, on this pass and every later one.
		t := &tx{tx: btx, c: s.codec.Load(), ids: pending}
		owners := map[string]posting{} // id -> the leaf index that moves
		for i, l := range leaves {
			fromRow := ids[l.p.time]
			if doubt[l.p.time] {
				fromRow = nil
			}
			if id := leafOwner(t, l.p, fromRow, stored); id != nil {
				leaves[i].logKey = id
				if o, ok := owners[string(id)]; !ok || o.less(l.p) {
					owners[string(id)] = l.p
				}
			}
		}
		var moves []leftover
		for _, l := range leaves {
			if l.logKey != nil && owners[string(l.logKey)] == l.p {
				moves = append(moves, l)
			} else {
				keptLeaves++
			}
		}
		found = append(append(moves, found...), idLeft...)
		return ctx.Err()
	}); err != nil {
		return Leftovers{}, fmt.Errorf("leftover entries: %w", err)
	}
	dropped := Leftovers{Removed: map[string]int{}, Kept: keptLeaves}
	for len(found) > 0 {
		batch := found[:min(len(found), leftoverBatch)]
		found = found[len(batch):]
		n := make([]int, len(batch))
		if err := s.Update(ctx, func(ltx ledger.Tx) error {
			t := ltx.(*tx)
			for i, l := range batch {
				n[i] = 0
				switch {
				case l.key != nil:
					ok, err := idDelete(t.b(l.bucket), idWidth(l.bucket), l.key)
					if err != nil {
						return err
					}
					if ok {
						n[i] = 1
					}
					continue
				case l.logKey != nil:
					if err := t.b(bLogIndex).Put(l.logKey, u64(l.p.seq)); err != nil {
						return err
					}
				}
				if err := deleteEntry(t.b(l.bucket), l.prefix, l.p); err != nil {
					return err
				}
				n[i] = 1
			}
			return nil
		}); err != nil {
			return dropped, fmt.Errorf("drop leftover entries: %w", err)
		}
		for i, l := range batch {
			if l.logKey != nil {
				dropped.Moved += n[i]
			} else {
				dropped.Removed[string(l.bucket)] += n[i]
			}
		}
	}
	return dropped, nil
}

// leafOwner is the id key of the removed row whose leaf index p is (its
// "time" the row's number, its "number" the leaf's index), or nil when
// that is not known or in doubt. The leaf's ref says it, when the file
// still holds the leaf (the log's own record, and the same on every
// pass); else fromRow, the id the row's number by id was left under (nil:
// none was). The id must name no stored row (a stored row's leaf index
// is kept by its number), and the log's index by it no other leaf.
func leafOwner(t *tx, p posting, fromRow []byte, stored numbers) []byte {
	id := fromRow
	if ref, _, err := t.Leaf(int64(p.seq)); err == nil {
		id = idKey(ref)
	}
	if id == nil {
		return nil
	}
	if v := t.idValue(bRowSeq, id); len(v) >= 8 && stored.has(binary.BigEndian.Uint64(v)) {
		return nil
	}
	if v := t.get(bLogIndex, id); v != nil && (len(v) != 8 || binary.BigEndian.Uint64(v) != p.seq) {
		return nil
	}
	return id
}

// numbers is a set of row numbers.
type numbers []uint64

func (n numbers) has(seq uint64) bool {
	return seq/64 < uint64(len(n)) && n[seq/64]&(1<<(seq%64)) != 0
}

// storedNumbers returns the numbers of the rows the file stores.
func storedNumbers(ctx context.Context, btx *bolt.Tx) (numbers, error) {
	set := make(numbers, metaUint(btx.Bucket(bMeta), kRowSeqN)/64+1)
	c := btx.Bucket(bRowData).Cursor()
	n := 0
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if n++; n%scanCheck == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if len(k) != 8 {
			return nil, fmt.Errorf("row key %x is not a row number", k)
		}
		seq := binary.BigEndian.Uint64(k)
		if seq/64 >= uint64(len(set)) {
			set = append(set, make(numbers, seq/64+1-uint64(len(set)))...)
		}
		set[seq/64] |= 1 << (seq % 64)
	}
	return set, nil
}

// runLeftovers adds to found the entries of run index b whose row number
// (number of the entry) is not stored.
func runLeftovers(ctx context.Context, b *bolt.Bucket, name []byte, number func(posting) uint64, stored numbers, found *[]leftover) error {
	n := 0
	err := eachEntry(b, func(prefix []byte, p posting) error {
		if n++; n%scanCheck == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if !stored.has(number(p)) {
			*found = append(*found, leftover{bucket: name, prefix: append([]byte(nil), prefix...), p: p})
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return err
}
