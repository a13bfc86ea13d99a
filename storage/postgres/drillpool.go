package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// DrillPool implements ledger.Rows: the pool is the rows with a pool_seq
// (migration 00003), counted over its partial index.
func (t *tx) DrillPool() (int, uint64, uint64, error) {
	if err := t.see(tabRows); err != nil {
		return 0, 0, 0, err
	}
	var n, first, last int64
	_, err := t.queryRow("count the drill pool", `
SELECT count(*), coalesce(min(pool_seq), 0), coalesce(max(pool_seq), 0) FROM ledger_rows WHERE pool_seq IS NOT NULL`, nil, &n, &first, &last)
	return int(n), uint64(first), uint64(last), err
}

// DrillPoolRows implements ledger.Rows.
func (t *tx) DrillPoolRows(positions []uint64) (map[uint64]*ledger.Row, error) {
	out := make(map[uint64]*ledger.Row)
	if len(positions) == 0 {
		return out, nil
	}
	if err := t.see(tabRows); err != nil {
		return nil, err
	}
	err := t.query("read drill pool rows", "SELECT pool_seq, body FROM ledger_rows WHERE pool_seq = ANY($1::bigint[])", []any{bigints(positions)}, func(r pgx.Rows) error {
		var p int64
		var body []byte
		if err := r.Scan(&p, &body); err != nil {
			return err
		}
		row, err := decodeRow(body)
		if err != nil {
			return err
		}
		out[uint64(p)] = row
		return nil
	})
	return out, err
}

// DrillPoolPositions implements ledger.Rows.
func (t *tx) DrillPoolPositions(fn func(uint64)) error {
	if err := t.see(tabRows); err != nil {
		return err
	}
	return t.query("walk the drill pool", "SELECT pool_seq FROM ledger_rows WHERE pool_seq IS NOT NULL ORDER BY pool_seq", nil, func(r pgx.Rows) error {
		var p int64
		if err := r.Scan(&p); err != nil {
			return err
		}
		fn(uint64(p))
		return nil
	})
}

// DrillPoolMembers implements ledger.Rows.
func (t *tx) DrillPoolMembers(ids []string) (map[string]uint64, error) {
	out := make(map[string]uint64)
	if len(ids) == 0 {
		return out, nil
	}
	if err := t.see(tabRows, ids...); err != nil {
		return nil, err
	}
	err := t.query("read drill pool members", "SELECT id, pool_seq FROM ledger_rows WHERE id = ANY($1::text[]) AND pool_seq IS NOT NULL", []any{ids}, func(r pgx.Rows) error {
		var id string
		var p int64
		if err := r.Scan(&id, &p); err != nil {
			return err
		}
		out[id] = uint64(p)
		return nil
	})
	return out, err
}
