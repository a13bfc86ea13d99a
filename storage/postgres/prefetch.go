package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// pointRead is a read of one column of at most one row by its primary key
// ($1), which Prefetch can make ahead.
type pointRead int

const (
	readRow pointRead = iota
	readTombstone
	readRequestJWT
	readRevocation
	readEvidence
	readObject
	pointReads
)

// sql is the statement of read r; in a write transaction, rows and
// revocations are locked as the write they lead to needs.
func (t *tx) sql(r pointRead) string {
	switch r {
	case readRow:
		return "SELECT body FROM ledger_rows WHERE id = $1" + t.lock()
	case readTombstone:
		return "SELECT body FROM tombstones WHERE id = $1"
	case readRequestJWT:
		return "SELECT row_id FROM request_jwts WHERE sha = $1"
	case readRevocation:
		return "SELECT body FROM revocations WHERE grant_id = $1" + t.lock()
	case readObject:
		return "SELECT body FROM objects WHERE key = $1"
	default:
		return "SELECT bundle FROM evidence WHERE row_id = $1"
	}
}

// deferredIn names the table of deferred writes read r reads, if any.
func deferredIn(r pointRead) (table, bool) {
	switch r {
	case readRow:
		return tabRows, true
	case readRequestJWT:
		return tabJWTs, true
	case readEvidence:
		return tabEvidence, true
	case readObject:
		return tabObjects, true
	}
	return 0, false
}

// prefetched holds what Prefetch read, by kind of read and key: a nil value
// is a record read as absent; a key not held was not read. It answers
// reads until the member writes (tx.writing drops it).
type prefetched [pointReads]map[string][]byte

// Prefetch implements ledger.Prefetcher: the rows, tombstones,
// request-JWT entries, revocation and evidence bundles p names, in one
// round trip, with the statements (and, in a write transaction, the locks)
// of the single reads. Each is a primary-key read of its own: an "= ANY"
// over all the keys was read by a sequential scan while a young table's
// statistics were stale.
func (t *tx) Prefetch(p ledger.Prefetch) error {
	if err := t.blocked(); err != nil {
		return err
	}
	for tbl, keys := range map[table][]string{tabRows: p.Rows, tabJWTs: p.RequestJWTs, tabEvidence: p.Evidence, tabObjects: p.Objects} {
		if len(keys) == 0 {
			continue
		}
		if err := t.see(tbl, keys...); err != nil {
			return err
		}
	}
	var pre prefetched
	ahead := func(r pointRead, keys ...string) {
		if pre[r] == nil {
			pre[r] = map[string][]byte{}
		}
		for _, k := range keys {
			pre[r][k] = nil
			t.push(t.sql(r), k).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var v []byte
					if err := rows.Scan(&v); err != nil {
						return err
					}
					pre[r][k] = v
				}
				return rows.Err()
			})
		}
	}
	ahead(readRow, p.Rows...)
	ahead(readTombstone, p.Tombstones...)
	ahead(readRequestJWT, p.RequestJWTs...)
	if p.Grant != "" {
		ahead(readRevocation, p.Grant)
	}
	ahead(readEvidence, p.Evidence...)
	ahead(readObject, p.Objects...)
	if err := t.flush("prefetch"); err != nil {
		return err
	}
	t.pre = &pre
	return nil
}

// read makes point read r of key: from what Prefetch read when it holds
// the key, else with a round trip. It returns the value, nil when there is
// no such row.
func (t *tx) read(r pointRead, what, key string) ([]byte, error) {
	if tbl, ok := deferredIn(r); ok {
		if err := t.see(tbl, key); err != nil {
			return nil, err
		}
	}
	if t.pre != nil {
		if v, ok := t.pre[r][key]; ok {
			return v, t.blocked()
		}
	}
	var v []byte
	_, err := t.queryRow(what, t.sql(r), []any{key}, &v)
	return v, err
}

// writing drops what was prefetched (a write may change it) and reports
// whether the transaction may write. Every write goes through it.
func (t *tx) writing() bool {
	t.pre = nil
	t.wrote = true
	return t.write
}
