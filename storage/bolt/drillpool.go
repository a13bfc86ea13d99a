package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// The drill pool (bDrillPool) is a bitmap of row numbers: a row's position
// in the pool is its number, and the bucket holds one entry per poolChunk
// numbers, keyed by number / poolChunk (8 bytes, growing), whose value has
// bit number % poolChunk set (least significant bit first) when the row
// is in the pool. An entry with no bit set is deleted. A row costs an
// eighth of a byte, and the pool of a million rows is 245 entries.
const poolChunk = 4096

func poolKey(n uint64) ([]byte, int) { return seqKey(n / poolChunk), int(n % poolChunk) }

// setPoolBit puts row number n in the pool (on) or takes it out.
func setPoolBit(b *bolt.Bucket, n uint64, on bool) error {
	k, bit := poolKey(n)
	v := b.Get(k)
	if v == nil && !on {
		return nil
	}
	buf := make([]byte, poolChunk/8)
	copy(buf, v)
	if on {
		buf[bit/8] |= 1 << (bit % 8)
	} else {
		buf[bit/8] &^= 1 << (bit % 8)
	}
	for _, x := range buf {
		if x != 0 {
			return b.Put(k, buf)
		}
	}
	return b.Delete(k)
}

// poolHas reports whether row number n is in the pool.
func poolHas(b *bolt.Bucket, n uint64) bool {
	k, bit := poolKey(n)
	v := b.Get(k)
	return len(v) == poolChunk/8 && v[bit/8]&(1<<(bit%8)) != 0
}

// SetPoolBit puts the row numbered seq (8 bytes) in the drill pool or
// takes it out, in a transaction on the file (for tools that edit a file).
func SetPoolBit(btx *bolt.Tx, seq []byte, on bool) error {
	return setPoolBit(btx.Bucket(bDrillPool), binary.BigEndian.Uint64(seq), on)
}

// PoolHas reports whether the row numbered seq (8 bytes) is in the drill
// pool, in a transaction on the file.
func PoolHas(btx *bolt.Tx, seq []byte) bool {
	return poolHas(btx.Bucket(bDrillPool), binary.BigEndian.Uint64(seq))
}

// forEachPoolBit calls fn with each number in the pool, in order.
func forEachPoolBit(b *bolt.Bucket, fn func(n uint64) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || len(v) != poolChunk/8 {
			return fmt.Errorf("drill pool: entry %x of %d bytes", k, len(v))
		}
		base := binary.BigEndian.Uint64(k) * poolChunk
		for i, x := range v {
			for x != 0 {
				j := bits.TrailingZeros8(x)
				x &^= 1 << j
				if err := fn(base + uint64(i*8+j)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// DrillPool implements ledger.Rows: a count of the bits of a few hundred
// entries at a million rows.
func (t *tx) DrillPool() (int, uint64, uint64, error) {
	n := 0
	var first, last uint64
	c := t.b(bDrillPool).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 || len(v) != poolChunk/8 {
			return 0, 0, 0, fmt.Errorf("drill pool: entry %x of %d bytes", k, len(v))
		}
		base := binary.BigEndian.Uint64(k) * poolChunk
		for i, x := range v {
			if x == 0 {
				continue
			}
			if n == 0 {
				first = base + uint64(i*8+bits.TrailingZeros8(x))
			}
			n += bits.OnesCount8(x)
			last = base + uint64(i*8+7-bits.LeadingZeros8(x))
		}
	}
	return n, first, last, nil
}

// DrillPoolRows implements ledger.Rows. A row is served only as a read
// by its id would serve it; otherwise the answer wraps
// ledger.ErrStoreEdited, naming the row.
func (t *tx) DrillPoolRows(positions []uint64) (map[uint64]*ledger.Row, error) {
	pool := t.b(bDrillPool)
	out := make(map[uint64]*ledger.Row)
	for _, p := range positions {
		if _, ok := out[p]; ok || !poolHas(pool, p) {
			continue
		}
		seq := seqKey(p)
		r, err := t.rowAt(seq)
		if err != nil {
			return nil, fmt.Errorf("drill pool: %w", err)
		}
		// As a read by id: the record the row's id leads to, listed by the
		// time index (an edited copy put in the pool is not drilled).
		if own := t.seqOf(r.ID); !bytes.Equal(own, seq) {
			return nil, fmt.Errorf("the row store's drill pool leads to a record of row %s that its id does not lead to (%w; run ledgerctl fsck)", r.ID, ledger.ErrStoreEdited)
		}
		if err := t.checkListed(r.ID, r, seq); err != nil {
			return nil, err
		}
		out[p] = r
	}
	return out, nil
}

// DrillPoolPositions implements ledger.Rows.
func (t *tx) DrillPoolPositions(fn func(uint64)) error {
	return forEachPoolBit(t.b(bDrillPool), func(n uint64) error {
		fn(n)
		return nil
	})
}

// DrillPoolMembers implements ledger.Rows: a row's position is its
// number, looked up by its id.
func (t *tx) DrillPoolMembers(ids []string) (map[string]uint64, error) {
	pool := t.b(bDrillPool)
	out := make(map[string]uint64)
	for _, id := range ids {
		seq := t.seqOf(id)
		if len(seq) != 8 {
			continue
		}
		if n := binary.BigEndian.Uint64(seq); poolHas(pool, n) {
			out[id] = n
		}
	}
	return out, nil
}
