package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/pactledger/pactledger/ledger"
)

// DrillPool implements ledger.Rows. The count walks the pool's pages (not
// its keys): a few thousand page headers at a million rows.
func (t *tx) DrillPool() (int, uint64, uint64, error) {
	b := t.b(bDrillPool)
	n := b.Stats().KeyN
	if n == 0 {
		return 0, 0, 0, nil
	}
	c := b.Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	if len(first) != 8 || len(last) != 8 {
		return 0, 0, 0, fmt.Errorf("drill pool: key of %d bytes", max(len(first), len(last)))
	}
	return n, binary.BigEndian.Uint64(first), binary.BigEndian.Uint64(last), nil
}

// DrillPoolRows implements ledger.Rows.
func (t *tx) DrillPoolRows(positions []uint64) (map[uint64]*ledger.Row, error) {
	pool := t.b(bDrillPool).Cursor()
	out := make(map[uint64]*ledger.Row)
	for _, p := range positions {
		seq := seqKey(p)
		if _, ok := out[p]; ok {
			continue
		}
		// Seek, not Get: the pool's values are empty.
		if k, _ := pool.Seek(seq); !bytes.Equal(k, seq) {
			continue
		}
		r, err := t.rowAt(seq)
		if err != nil {
			return nil, fmt.Errorf("drill pool: %w", err)
		}
		out[p] = r
	}
	return out, nil
}

// DrillPoolPositions implements ledger.Rows.
func (t *tx) DrillPoolPositions(fn func(uint64)) error {
	c := t.b(bDrillPool).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != 8 {
			return fmt.Errorf("drill pool: key of %d bytes", len(k))
		}
		fn(binary.BigEndian.Uint64(k))
	}
	return nil
}
