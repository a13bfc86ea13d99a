package postgres

import (
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// Multi-row writes. The writes every receipt makes (its row with targets,
// snapshot links and request-JWT entry; its queued leaf; its evidence
// bundle; its outbox entries) and the uploader's records of where objects
// are held are not sent when the member makes them but kept as its
// deferred writes. A member that wrote nothing else ends
// without sending them: they join the group, and the group's writes go
// together, one statement a table for all its members, when the batch
// ends or when a later member reads what they wrote. A member that wrote
// anything at once (a new snapshot, a counter, a drill...) sends its
// deferred writes with it, under its own savepoint, as before.
//
// A group is sent under a savepoint of its own. When a member's row was
// taken (by a member of another transaction: inside one transaction a
// later member sees the earlier ones' writes, see tx.see), the group is
// rolled back, the loser gets its error or runs again, and the others are
// sent again without it. When a statement fails, the group is rolled back
// and each member's writes are sent alone, under a savepoint each, so that
// one member's bad write fails only that member.

// table names what deferred writes touch, for tx.see.
type table int

const (
	tabRows     table = iota // ledger_rows with a row's targets and snapshot links; key: row id
	tabJWTs                  // request_jwts; key: request-JWT hash
	tabEvidence              // evidence; key: row id
	tabOutbox                // outbox; entries have no key until sent (their seq)
	tabLeaves                // log_pending; likewise
	tabObjects               // objects; key: object key
)

// writes are one member's deferred writes.
type writes struct {
	rows     []rowWrite
	leaves   []leafWrite
	evidence []evidenceWrite
	entries  []entryWrite
	objects  []objectWrite
}

// rowWrite is a deferred CreateRow: the row, its body and keys, and
// whether the member read its id (racedRow) or its request-JWT hash
// (racedJWT) as absent, so that finding them taken means it lost a race.
type rowWrite struct {
	r                  *ledger.Row
	body               []byte
	targets, snaps     []string
	racedRow, racedJWT bool
}

type leafWrite struct {
	ref  string
	data []byte
}

type evidenceWrite struct {
	rowID  string
	bundle []byte
}

type entryWrite struct {
	body   []byte
	queued int64
	opKey  string // the object the entry operates on; "" for a put
}

type objectWrite struct {
	key  string
	body []byte
}

func (w *writes) empty() bool {
	return w == nil || len(w.rows)+len(w.leaves)+len(w.evidence)+len(w.entries)+len(w.objects) == 0
}

// touches reports whether w writes to tbl under one of keys (under any
// key when keys is empty).
func (w *writes) touches(tbl table, keys []string) bool {
	if w == nil {
		return false
	}
	switch tbl {
	case tabOutbox:
		return len(w.entries) > 0
	case tabLeaves:
		return len(w.leaves) > 0
	case tabObjects:
		return slices.ContainsFunc(w.objects, func(o objectWrite) bool { return len(keys) == 0 || slices.Contains(keys, o.key) })
	case tabEvidence:
		return slices.ContainsFunc(w.evidence, func(e evidenceWrite) bool { return len(keys) == 0 || slices.Contains(keys, e.rowID) })
	case tabRows:
		return slices.ContainsFunc(w.rows, func(r rowWrite) bool { return len(keys) == 0 || slices.Contains(keys, r.r.ID) })
	default:
		return slices.ContainsFunc(w.rows, func(r rowWrite) bool {
			sha, twin := r.r.RequestJWTSHA256, r.r.RequestJWTTwinSHA256
			return sha != "" && (len(keys) == 0 || slices.Contains(keys, sha) || twin != "" && slices.Contains(keys, twin))
		})
	}
}

// member is one Update call of a batch: its request, where its result
// goes, how often its fn ran, and its deferred writes while it waits in
// the group.
type member struct {
	r    *request
	err  *error
	runs int
	w    *writes
}

// created is what a rows statement stored: the row ids it created, and of
// those the ones whose request-JWT entry it wrote.
type created struct {
	rows, indexed map[string]bool
}

// outcome is the result of member w's rows given what the statement
// created: nil, or its error and whether it lost a race and runs again.
func (c created) outcome(w *writes) (error, bool) {
	for _, rw := range w.rows {
		id := rw.r.ID
		switch {
		case !c.rows[id] && rw.racedRow:
			return fmt.Errorf("create row %s: %w", id, errRaced), true
		case !c.rows[id]:
			return fmt.Errorf("create row %s: a row with that id already exists", id), false
		case !c.indexed[id] && rw.racedJWT:
			return fmt.Errorf("create row %s: request JWT %s: %w", id, rw.r.RequestJWTSHA256, errRaced), true
		}
	}
	return nil, false
}

// queueWrites queues the statements of ws (one a table, each member's
// writes in order, the members in order) with queue; done is told what the
// rows statement created once it answers.
func queueWrites(queue func(sql string, args ...any) *pgx.QueuedQuery, ws []*writes, done func(created) error) {
	var (
		ids, principals, grants, agents, shas []string
		twins, receiptKeys, unindexed         []string
		takers, taken, takenFrom              []string
		statuses, classes                     []int16
		issued                                []int64
		retains                               []*int64
		bodies                                [][]byte
		pool, counts                          []bool
		targetRows, targets, snapRows, snaps  []string
		leafRefs                              []string
		leafData                              [][]byte
		evRows                                []string
		evBundles                             [][]byte
		entryBodies                           [][]byte
		entryQueued                           []int64
		entryKeys                             []string
		objectKeys                            []string
		objectBodies                          [][]byte
	)
	for _, w := range ws {
		for _, rw := range w.rows {
			r := rw.r
			ids, principals, grants, agents = append(ids, r.ID), append(principals, r.Principal), append(grants, r.GrantID), append(agents, r.Agent.Platform)
			statuses, classes, issued = append(statuses, int16(r.Status)), append(classes, int16(r.Class)), append(issued, nanos(r.IssuedAt))
			var retain *int64
			if !r.RetainUntil.IsZero() {
				ns := nanos(r.RetainUntil)
				retain = &ns
			}
			retains, shas, bodies = append(retains, retain), append(shas, r.RequestJWTSHA256), append(bodies, rw.body)
			// A duplicate takes no twin's entry: a row stored before the
			// twin was indexed (or moved from bbolt) holds the hash posted
			// only, and the twin's entry must stay free for no row rather
			// than name the duplicate.
			twin := ""
			if ledger.IndexesRequestJWT(r) && r.Verifier.DuplicateOf == "" {
				twin = r.RequestJWTTwinSHA256
			}
			if r.RequestJWTSHA256 != "" && !ledger.IndexesRequestJWT(r) {
				unindexed = append(unindexed, r.ID)
			}
			if ledger.IndexesRequestJWT(r) && r.Verifier.DuplicateOf == "" {
				for _, h := range []string{r.RequestJWTSHA256, twin} {
					if from := r.RequestJWTTakenFrom[h]; h != "" && from != "" {
						takers, taken, takenFrom = append(takers, r.ID), append(taken, h), append(takenFrom, from)
					}
				}
			}
			twins = append(twins, twin)
			receiptKeys = append(receiptKeys, receiptKey(r))
			pool, counts = append(pool, ledger.Drillable(r)), append(counts, r.ReceiptVerified())
			for _, x := range rw.targets {
				targetRows, targets = append(targetRows, r.ID), append(targets, x)
			}
			for _, x := range rw.snaps {
				snapRows, snaps = append(snapRows, r.ID), append(snaps, x)
			}
		}
		for _, l := range w.leaves {
			leafRefs, leafData = append(leafRefs, l.ref), append(leafData, l.data)
		}
		for _, e := range w.evidence {
			evRows, evBundles = append(evRows, e.rowID), append(evBundles, e.bundle)
		}
		for _, e := range w.entries {
			entryBodies, entryQueued, entryKeys = append(entryBodies, e.body), append(entryQueued, e.queued), append(entryKeys, e.opKey)
		}
		for _, o := range w.objects {
			objectKeys, objectBodies = append(objectKeys, o.key), append(objectBodies, o.body)
		}
	}
	if len(ids) > 0 {
		queue(createRowsSQL, ids, principals, grants, agents, statuses, classes, issued, retains, shas, bodies,
			nonNil(targetRows), nonNil(targets), nonNil(snapRows), nonNil(snaps), pool, twins, receiptKeys, nonNil(unindexed),
			nonNil(takers), nonNil(taken), nonNil(takenFrom), counts).Query(func(rows pgx.Rows) error {
			c := created{rows: map[string]bool{}, indexed: map[string]bool{}}
			for rows.Next() {
				var id string
				var indexed bool
				if err := rows.Scan(&id, &indexed); err != nil {
					return fmt.Errorf("create rows: %w", err)
				}
				c.rows[id], c.indexed[id] = true, indexed
			}
			if err := rows.Err(); err != nil {
				return err
			}
			return done(c)
		})
	}
	if len(leafRefs) > 0 {
		queue(`
INSERT INTO log_pending (seq, ref, data)
SELECT nextval('leaf_seq'), ref, data FROM unnest($1::text[], $2::bytea[]) WITH ORDINALITY AS u (ref, data, n) ORDER BY n`, leafRefs, leafData)
	}
	if len(evRows) > 0 {
		queue(`
INSERT INTO evidence (row_id, bundle) SELECT row_id, bundle FROM unnest($1::text[], $2::bytea[]) AS u (row_id, bundle)
ON CONFLICT (row_id) DO UPDATE SET bundle = EXCLUDED.bundle`, evRows, evBundles)
	}
	if len(entryBodies) > 0 {
		queue(`
INSERT INTO outbox (seq, body, queued_ns, op_key)
SELECT nextval('outbox_seq'), body, queued_ns, op_key FROM unnest($1::bytea[], $2::bigint[], $3::text[]) WITH ORDINALITY AS u (body, queued_ns, op_key, n) ORDER BY n`, entryBodies, entryQueued, entryKeys)
	}
	if len(objectKeys) > 0 {
		queue(`
INSERT INTO objects (key, body) SELECT key, body FROM unnest($1::text[], $2::bytea[]) AS u (key, body)
ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body`, objectKeys, objectBodies)
	}
}

// createRowsSQL creates rows with their targets, snapshot links and, where
// no row holds them yet, their request-JWT entries: under the hash of the
// request JWT and under its twin's (ledger.Row.RequestJWTTwinSHA256), for
// every row but those listed in $18 (ledger.IndexesRequestJWT); a
// row whose id is taken, or whose receipt key (receiptKey) another row
// holds, is skipped with all of its keys. The entries go
// in the order of their hashes, so that two statements writing a hash
// and its twin the other way round wait on each other instead of
// deadlocking; of two rows of the statement with one hash, the earlier
// member's holds it. The entries a row takes over
// (ledger.Row.RequestJWTTakenFrom: the row $19, the hash $20, the row
// the entry was read naming $21) are not inserted but made to name it,
// each only while it still names the row read. One that another writer
// took first is left to it (that writer read, and locked, the row the
// entry named before this one did, and committed): this row lost a race.
// A row that can count toward its grant's countMax
// (ledger.Row.ReceiptVerified) has counts set ($22). It returns each
// created row's id and whether all its request-JWT entries were written
// or taken over.
const createRowsSQL = `
WITH r AS (
	INSERT INTO ledger_rows (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body, pool_seq, request_jwt_twin, receipt_key, counts)
	SELECT id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body,
		CASE WHEN pool THEN nextval('ledger_rows_pool_seq') END, twin, receipt_key, counts
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::smallint[], $7::bigint[], $8::bigint[], $9::text[], $10::bytea[], $15::boolean[], $16::text[], $17::text[], $22::boolean[])
		AS u (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body, pool, twin, receipt_key, counts)
	ON CONFLICT DO NOTHING
	RETURNING id, issued_ns, request_jwt, request_jwt_twin
), t AS (
	INSERT INTO row_targets (target, issued_ns, row_id)
	SELECT x.target, r.issued_ns, r.id FROM r JOIN unnest($11::text[], $12::text[]) AS x (row_id, target) ON x.row_id = r.id
), s AS (
	INSERT INTO row_snapshots (snapshot_id, row_id)
	SELECT x.snapshot_id, r.id FROM r JOIN unnest($13::text[], $14::text[]) AS x (row_id, snapshot_id) ON x.row_id = r.id
), x AS (
	SELECT * FROM unnest($19::text[], $20::text[], $21::text[]) AS x (row_id, sha, old)
), j AS (
	INSERT INTO request_jwts (sha, row_id)
	SELECT k.sha, r.id FROM r
	JOIN unnest($1::text[]) WITH ORDINALITY AS o (id, n) ON o.id = r.id
	CROSS JOIN LATERAL (VALUES (r.request_jwt), (r.request_jwt_twin)) AS k (sha)
	WHERE r.request_jwt <> '' AND k.sha <> '' AND r.id <> ALL($18::text[])
		AND NOT EXISTS (SELECT FROM x WHERE x.row_id = r.id AND x.sha = k.sha)
	ORDER BY k.sha, o.n
	ON CONFLICT (sha) DO NOTHING
	RETURNING row_id
), u AS (
	UPDATE request_jwts AS q SET row_id = x.row_id FROM x
	WHERE q.sha = x.sha AND q.row_id = x.old AND x.row_id IN (SELECT id FROM r)
	RETURNING q.row_id
)
SELECT r.id, (SELECT count(*) FROM j WHERE j.row_id = r.id) + (SELECT count(*) FROM u WHERE u.row_id = r.id) =
	(CASE WHEN r.request_jwt = '' OR r.id = ANY($18::text[]) THEN 0 WHEN r.request_jwt_twin = '' THEN 1 ELSE 2 END) FROM r`

// receiptKey is the key a receipt's first row holds in ledger_rows (the
// smaller of the hashes of the receipt's two encodings, or its id when it
// has no twin): none (”) for a duplicate, or a row of no receipt.
func receiptKey(r *ledger.Row) string {
	if r.Kind != ledger.KindReceipt || r.Verifier.DuplicateOf != "" {
		return ""
	}
	if twin := r.ReceiptTwinSHA256; twin != "" && twin < r.ID {
		return twin
	}
	return r.ID
}

// nonNil is s, or an empty slice for nil (an empty array, not NULL).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// deferred returns the current member's deferred writes.
func (t *tx) deferred() *writes {
	if t.own == nil {
		t.own = &writes{}
	}
	return t.own
}

// see makes the deferred writes to tbl under keys (any key when keys is
// empty) visible to what the current member does next. Its own are
// queued (it now writes under its savepoint). The group's are sent at
// once when the member has not sent anything yet; otherwise the member
// is rolled back, the group sent, and the member runs again (restart).
func (t *tx) see(tbl table, keys ...string) error {
	if err := t.blocked(); err != nil {
		return err
	}
	if slices.ContainsFunc(t.group, func(m *member) bool { return m.w.touches(tbl, keys) }) {
		if t.spQueued {
			if err := t.flush("write"); err != nil {
				return err
			}
			t.restart = true
			t.err = errRestart
			return t.err
		}
		t.settle()
		if err := t.blocked(); err != nil {
			return err
		}
	}
	if t.own.touches(tbl, keys) {
		t.sendOwn()
	}
	return nil
}

// errRestart: the member met writes of the group after it began; it runs
// again once they are sent.
var errRestart = errors.New("the write must run again after the writes before it")

// sendOwn queues the current member's deferred writes: from now on it
// writes under its savepoint, and its deferred writes go with it when it
// ends. A row taken is the error of the round trip that sends it.
func (t *tx) sendOwn() {
	w := t.own
	t.own = nil
	t.wrote = true
	t.pre = nil
	if w.empty() {
		return
	}
	queueWrites(t.push, []*writes{w}, func(c created) error {
		err, rerun := c.outcome(w)
		if rerun {
			t.rerun = true
		}
		return err
	})
}

// settle sends the group's writes under a savepoint of their own (see
// the comment at the top of this file), until every member of the group
// is stored, failed, or waits to run again (t.again).
func (t *tx) settle() {
	for len(t.group) > 0 && t.fatal == nil {
		ms := t.group
		ws := make([]*writes, len(ms))
		for i, m := range ms {
			ws[i] = m.w
		}
		// What is queued (the release of the member before) goes first.
		b := t.b
		t.b = &pgx.Batch{}
		b.Queue("SAVEPOINT g")
		var got created
		queueWrites(b.Queue, ws, func(c created) error { got = c; return nil })
		if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
			if t.fatalErr("write", err) {
				return
			}
			// A statement failed: each member's writes alone.
			if !t.rollbackTo("g") {
				return
			}
			t.group = nil
			for _, m := range ms {
				if t.alone(m); t.fatal != nil {
					return
				}
			}
			return
		}
		var kept []*member
		lost := false
		for _, m := range ms {
			err, rerun := got.outcome(m.w)
			if err == nil {
				kept = append(kept, m)
				continue
			}
			lost = true
			t.lose(m, err, rerun)
		}
		if !lost {
			t.b.Queue("RELEASE SAVEPOINT g")
			t.group = nil
			return
		}
		if !t.rollbackTo("g") {
			return
		}
		t.group = kept
	}
}

// alone sends member m's deferred writes under a savepoint of their own.
func (t *tx) alone(m *member) {
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT a")
	var got created
	queueWrites(b.Queue, []*writes{m.w}, func(c created) error { got = c; return nil })
	err := t.conn.SendBatch(t.ctx, b).Close()
	rerun := false
	switch {
	case err != nil && t.fatalErr("write", err):
		return
	case err != nil:
		err = fmt.Errorf("write: %w", err)
	default:
		err, rerun = got.outcome(m.w)
	}
	if err == nil {
		t.b.Queue("RELEASE SAVEPOINT a")
		return
	}
	if t.rollbackTo("a") {
		t.lose(m, err, rerun)
	}
}

// lose records that member m's deferred writes failed with err: it runs
// again when it lost a race (rerun) and may, else err is its result.
func (t *tx) lose(m *member, err error, rerun bool) {
	m.w = nil
	switch {
	case rerun && m.runs < maxMemberRuns:
		t.again = append(t.again, m)
	case rerun:
		*m.err = fmt.Errorf("gave up after %d runs, each losing a race with another writer: %w", m.runs, err)
	default:
		*m.err = err
	}
}

// fatalErr records err, from a round trip, as the end of the transaction
// when it is: a failed connection, or a conflict that runs the batch
// again.
func (t *tx) fatalErr(what string, err error) bool {
	switch {
	case unavailable(err, t.conn):
		t.fatal = unavailableErr(what, err)
	case rerunBatch(err):
		t.fatal = fmt.Errorf("%w: %s: %w", errBatch, what, err)
	default:
		return false
	}
	return true
}

// rollbackTo rolls back to savepoint sp and releases it, with the simple
// protocol (valid in an aborted transaction); what was queued is dropped.
// A failure ends the transaction.
func (t *tx) rollbackTo(sp string) bool {
	t.b = &pgx.Batch{}
	t.seqLeaves = nil
	if _, err := t.conn.PgConn().Exec(t.ctx, "ROLLBACK TO SAVEPOINT "+sp+"; RELEASE SAVEPOINT "+sp).ReadAll(); err != nil {
		if unavailable(err, t.conn) {
			t.fatal = unavailableErr("roll back a failed write", err)
		} else {
			t.fatal = fmt.Errorf("%w: %w", errMemberRollback, err)
		}
		return false
	}
	return true
}
