package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// prefetched holds what Prefetch read, by key: a nil body (or an empty
// row id) is a record read as absent; a key not in a map was not read.
// It answers reads until the member writes (tx.writing drops it).
type prefetched struct {
	rows     map[string][]byte
	tombs    map[string][]byte
	jwts     map[string]string
	revs     map[string][]byte
	evidence map[string][]byte
}

// Prefetch implements ledger.Prefetcher: the rows, tombstones,
// request-JWT entries and revocation p names, in one round trip, read with
// the statements (and, in a write transaction, the locks) the single
// reads use.
func (t *tx) Prefetch(p ledger.Prefetch) error {
	if err := t.blocked(); err != nil {
		return err
	}
	pre := &prefetched{rows: map[string][]byte{}, tombs: map[string][]byte{}, jwts: map[string]string{}, revs: map[string][]byte{}, evidence: map[string][]byte{}}
	for _, id := range p.Rows {
		pre.rows[id] = nil
	}
	for _, id := range p.Tombstones {
		pre.tombs[id] = nil
	}
	for _, sha := range p.RequestJWTs {
		pre.jwts[sha] = ""
	}
	// One point read per key, all in one pipeline: each takes its
	// table's primary key whatever the planner knows of the table (an
	// "= ANY" over a young table's stale statistics is read by a
	// sequential scan).
	point := func(sql, key string, into func(v []byte)) {
		t.b.Queue(sql, key).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var v []byte
				if err := rows.Scan(&v); err != nil {
					return err
				}
				into(v)
			}
			return rows.Err()
		})
	}
	for _, id := range p.Rows {
		point("SELECT body FROM ledger_rows WHERE id = $1"+t.lock(), id, func(v []byte) { pre.rows[id] = v })
	}
	for _, id := range p.Tombstones {
		point("SELECT body FROM tombstones WHERE id = $1", id, func(v []byte) { pre.tombs[id] = v })
	}
	for _, sha := range p.RequestJWTs {
		point("SELECT row_id FROM request_jwts WHERE sha = $1", sha, func(v []byte) { pre.jwts[sha] = string(v) })
	}
	if p.Grant != "" {
		pre.revs[p.Grant] = nil
		point("SELECT body FROM revocations WHERE grant_id = $1"+t.lock(), p.Grant, func(v []byte) { pre.revs[p.Grant] = v })
	}
	for _, id := range p.Evidence {
		pre.evidence[id] = nil
		point("SELECT bundle FROM evidence WHERE row_id = $1", id, func(v []byte) { pre.evidence[id] = v })
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

// prefetchedEvidence is prefetchedRow for a row's evidence bundle.
func (t *tx) prefetchedEvidence(id string) ([]byte, bool) {
	if t.pre == nil {
		return nil, false
	}
	b, ok := t.pre.evidence[id]
	return b, ok
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
