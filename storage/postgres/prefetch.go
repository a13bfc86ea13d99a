package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// prefetched holds what Prefetch read, by key: a nil body (or an empty
// row id) is a record read as absent; a key not in a map was not read.
// It answers reads until the member writes (tx.writing drops it).
type prefetched struct {
	rows  map[string][]byte
	tombs map[string][]byte
	jwts  map[string]string
	revs  map[string][]byte
}

// Prefetch implements ledger.Prefetcher: the rows, tombstones,
// request-JWT entries and revocation p names, in one round trip, read with
// the statements (and, in a write transaction, the locks) the single
// reads use.
func (t *tx) Prefetch(p ledger.Prefetch) error {
	if err := t.blocked(); err != nil {
		return err
	}
	pre := &prefetched{rows: map[string][]byte{}, tombs: map[string][]byte{}, jwts: map[string]string{}, revs: map[string][]byte{}}
	for _, id := range p.Rows {
		pre.rows[id] = nil
	}
	for _, id := range p.Tombstones {
		pre.tombs[id] = nil
	}
	for _, sha := range p.RequestJWTs {
		pre.jwts[sha] = ""
	}
	keyed := func(into func(k string, v []byte)) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			for rows.Next() {
				var k string
				var v []byte
				if err := rows.Scan(&k, &v); err != nil {
					return err
				}
				into(k, v)
			}
			return rows.Err()
		}
	}
	if len(p.Rows) > 0 {
		t.b.Queue("SELECT id, body FROM ledger_rows WHERE id = ANY($1)"+t.lock(), p.Rows).
			Query(keyed(func(k string, v []byte) { pre.rows[k] = v }))
	}
	if len(p.Tombstones) > 0 {
		t.b.Queue("SELECT id, body FROM tombstones WHERE id = ANY($1)", p.Tombstones).
			Query(keyed(func(k string, v []byte) { pre.tombs[k] = v }))
	}
	if len(p.RequestJWTs) > 0 {
		t.b.Queue("SELECT sha, row_id FROM request_jwts WHERE sha = ANY($1)", p.RequestJWTs).
			Query(keyed(func(k string, v []byte) { pre.jwts[k] = string(v) }))
	}
	if p.Grant != "" {
		pre.revs[p.Grant] = nil
		t.b.Queue("SELECT grant_id, body FROM revocations WHERE grant_id = $1"+t.lock(), p.Grant).
			Query(keyed(func(k string, v []byte) { pre.revs[k] = v }))
	}
	if err := t.flush("prefetch"); err != nil {
		return err
	}
	t.pre = pre
	return nil
}

// prefetchedRow answers a read of row id from the prefetch: its body (nil
// when absent) and whether it was prefetched.
func (t *tx) prefetchedRow(id string) ([]byte, bool) {
	if t.pre == nil {
		return nil, false
	}
	b, ok := t.pre.rows[id]
	return b, ok
}

// prefetchedTomb is prefetchedRow for tombstones.
func (t *tx) prefetchedTomb(id string) ([]byte, bool) {
	if t.pre == nil {
		return nil, false
	}
	b, ok := t.pre.tombs[id]
	return b, ok
}

// prefetchedJWT is prefetchedRow for request-JWT entries: the row id ("" when
// absent).
func (t *tx) prefetchedJWT(sha string) (string, bool) {
	if t.pre == nil {
		return "", false
	}
	id, ok := t.pre.jwts[sha]
	return id, ok
}

// prefetchedRevocation is prefetchedRow for a grant's revocation.
func (t *tx) prefetchedRevocation(grant string) ([]byte, bool) {
	if t.pre == nil {
		return nil, false
	}
	b, ok := t.pre.revs[grant]
	return b, ok
}

// writing drops what was prefetched (a write may change it) and reports
// whether the transaction may write. Every write goes through it.
func (t *tx) writing() bool {
	t.pre = nil
	return t.write
}
