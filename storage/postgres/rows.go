package postgres

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// nanos is t in nanoseconds since the Unix epoch, clamped to what an
// int64 holds (times before 1970 count as 1970, as in storage/bolt).
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// fromNanos is the time nanos stored: zero for 0.
func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// retainNanos is a row's retain-until as stored: NULL when unset.
func retainNanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return nanos(t)
}

// decodeRow decodes a stored row body.
func decodeRow(body []byte) (*ledger.Row, error) {
	var r ledger.Row
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode row: %w", err)
	}
	return &r, nil
}

// Row implements ledger.Rows.
func (t *tx) Row(id string) (*ledger.Row, error) {
	body, err := t.read(readRow, "read row "+id, id)
	if err != nil {
		return nil, err
	}
	if body == nil {
		t.absentRows[id] = true
		return nil, ledger.ErrNotFound
	}
	if t.absentRows[id] {
		// Read as absent earlier in this member, present now: another
		// writer committed it in between, so the member runs again.
		t.rerun = true
	}
	return decodeRow(body)
}

// errRaced: a create found a key taken that the member had read as free;
// the member runs again and sees the winner's row.
var errRaced = errors.New("another writer stored it first")

// CreateRow implements ledger.Rows: the row, its target entries, its
// snapshot links and, when no row holds its request-JWT hash yet, the
// request-JWT entry, or the entries it takes over. It is a deferred write
// (group.go): it goes in one statement with the rows of other members,
// with the member's next round trip when it has written anything else,
// or at the end of the batch. An id already taken, or a race lost with
// another writer, is the error of that round trip (a later call of the
// member, or Update), and a lost race runs the member again.
func (t *tx) CreateRow(r *ledger.Row) error {
	if !t.write {
		return errReadOnly
	}
	id, sha := r.ID, r.RequestJWTSHA256
	// Another deferred row with this id: it goes first. (Rows with one
	// request-JWT hash may share a statement: the first one's entry is
	// written, as one statement after the other would.)
	if err := t.see(tabRows, id); err != nil {
		return err
	}
	body, err := r.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("encode row %s: %w", r.ID, err)
	}
	targets, snaps := rowKeys(r)
	// The member raced for the request JWT when it read every hash the
	// row is indexed under as unused or held by a row it takes the entry
	// from (Row.RequestJWTTakenFrom), or one of them naming a row it then
	// found gone (removed by a sweep meanwhile): a row it read one of as
	// used otherwise is a duplicate, which takes no entry from anyone;
	// nor does a row ledger.IndexesRequestJWT leaves out.
	twin := r.RequestJWTTwinSHA256
	gone := func(h string) bool { return h != "" && t.jwtRows[h] != "" && t.absentRows[t.jwtRows[h]] }
	free := func(h string) bool { return t.absentJWTs[h] || h != "" && r.RequestJWTTakenFrom[h] != "" }
	indexed := ledger.IndexesRequestJWT(r)
	raced := indexed && (free(sha) && (twin == "" || free(twin)) || gone(sha) || gone(twin))
	w := rowWrite{r: r, body: body, targets: targets, snaps: snaps, racedRow: t.absentRows[id], racedJWT: raced}
	// This member's own row answers the reads that found it absent.
	delete(t.absentRows, id)
	if indexed {
		delete(t.absentJWTs, sha)
		delete(t.absentJWTs, twin)
		delete(t.jwtRows, sha)
		delete(t.jwtRows, twin)
	}
	d := t.deferred()
	d.rows = append(d.rows, w)
	return nil
}

// rowKeys are the targets and JWKS snapshots row r is indexed and linked
// under, as text arrays (empty, never NULL).
func rowKeys(r *ledger.Row) (targets, snaps []string) {
	targets, snaps = r.Targets(), ledger.SnapshotsOf(r)
	if targets == nil {
		targets = []string{}
	}
	if snaps == nil {
		snaps = []string{}
	}
	return targets, snaps
}

// UpdateDispute implements ledger.Rows.
func (t *tx) UpdateDispute(id string, status ledger.DisputeStatus, events []ledger.DisputeEvent) error {
	r, err := t.Row(id)
	if err != nil {
		return err
	}
	r.Dispute, r.DisputeEvents = status, events
	return t.rewriteRow(r, "UPDATE ledger_rows SET body = $2 WHERE id = $1")
}

// UpdateRetention implements ledger.Rows.
func (t *tx) UpdateRetention(id string, until time.Time) error {
	r, err := t.Row(id)
	if err != nil {
		return err
	}
	r.RetainUntil = until
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode row %s: %w", id, err)
	}
	return t.exec("UPDATE ledger_rows SET body = $2, retain_ns = $3 WHERE id = $1", id, body, retainNanos(until))
}

// rewriteRow stores r's new body with sql ($1 id, $2 body).
func (t *tx) rewriteRow(r *ledger.Row, sql string) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode row %s: %w", r.ID, err)
	}
	return t.exec(sql, r.ID, body)
}

// RowByRequestJWT implements ledger.Rows.
func (t *tx) RowByRequestJWT(sha string) (string, error) {
	v, err := t.read(readRequestJWT, "read request JWT index", sha)
	if err != nil {
		return "", err
	}
	id := string(v)
	if id == "" {
		t.absentJWTs[sha] = true
	} else {
		t.jwtRows[sha] = id
		if t.absentJWTs[sha] {
			t.rerun = true // another writer took it since this member looked
		}
	}
	return id, nil
}

// pageToken is a List position: the issue time and id of the last row
// returned, and a digest of the query's filters, so that a token is
// refused for another query.
type pageToken struct {
	issued int64
	id     string
}

// filterDigest is the first 8 bytes of the SHA-256 of q's filters.
func filterDigest(q ledger.Query) []byte {
	h := sha256.New()
	for _, f := range []string{q.Principal, q.GrantID, q.Target, q.Agent, strconv.Itoa(int(q.Status)), strconv.Itoa(int(q.Class)),
		strconv.FormatInt(nanos(q.Since), 10), strconv.FormatInt(nanos(q.Until), 10), strconv.FormatBool(q.Signed)} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[:8]
}

func (p pageToken) encode(q ledger.Query) string {
	b := binary.BigEndian.AppendUint64(filterDigest(q), uint64(p.issued))
	return base64.RawURLEncoding.EncodeToString(append(b, p.id...))
}

func decodePageToken(s string, q ledger.Query) (pageToken, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 16 || string(b[:8]) != string(filterDigest(q)) {
		return pageToken{}, fmt.Errorf("%w: pageToken does not belong to this query", ledger.ErrInvalid)
	}
	return pageToken{issued: int64(binary.BigEndian.Uint64(b[8:16])), id: string(b[16:])}, nil
}

// List implements ledger.Rows: newest first (issue time, then id, both
// descending), each filter an equality the indexes serve, the target
// filter through row_targets. A query by one filter (with or without a
// time window) reads an index entry a row it returns. A query by several
// reads at most q.ReadBound() entries of one filter's index (listSQL) and
// checks the others on their rows. Either way a call counts the entries
// up to and including the last one it passed over for its page: its last
// row when the page filled, else the last entry within the bound; the
// next page continues after that entry, and a token comes back only when
// an entry follows it.
func (t *tx) List(q ledger.Query) ([]*ledger.Row, string, error) {
	if err := q.CheckSigned(); err != nil {
		return nil, "", err
	}
	if q.PageSize <= 0 {
		return nil, "", nil
	}
	var after *pageToken
	if q.PageToken != "" {
		p, err := decodePageToken(q.PageToken, q)
		if err != nil {
			return nil, "", err
		}
		after = &p
	}
	if err := t.see(tabRows); err != nil {
		return nil, "", err
	}
	sql, args, bounded := listSQL(q, after)
	bound := q.ReadBound()
	pageSize := q.PageSize
	if !bounded {
		// Every entry read is a row of the page.
		pageSize = min(pageSize, bound)
	}
	var rows []*ledger.Row
	var last, edge pageToken
	// lastAt is the scan position of the last row kept (1 the first
	// entry); scanned how many entries the scan found, up to bound+1.
	var lastAt, scanned int64
	more, used := false, 0
	err := t.query("list rows", sql, args, func(r pgx.Rows) error {
		var body []byte
		var pos pageToken
		var kind, n int64
		if err := r.Scan(&kind, &body, &pos.issued, &pos.id, &n); err != nil {
			return err
		}
		if kind == 1 {
			// The entry at the bound (or the last one, when fewer), and
			// how many the scan found.
			edge, scanned = pos, n
			return nil
		}
		if len(rows) == pageSize {
			more = true
			return nil
		}
		row, err := decodeRow(body)
		if err != nil {
			return err
		}
		if !q.Fits(&used, len(rows), row) {
			more = true
			return nil
		}
		last, lastAt = pos, n
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if !bounded {
		q.CountRead(len(rows))
		if more {
			return rows, last.encode(q), nil
		}
		return rows, "", nil
	}
	if more || len(rows) == pageSize {
		// The page ended at its last row: entries follow it when the
		// scan found any beyond.
		q.CountRead(int(lastAt))
		if more || scanned > lastAt {
			return rows, last.encode(q), nil
		}
		return rows, "", nil
	}
	// The page ran to the bound or the last entry: the next page
	// continues after the entry at the bound when one follows.
	q.CountRead(int(min(scanned, int64(bound))))
	if scanned > int64(bound) {
		return rows, edge.encode(q), nil
	}
	return rows, "", nil
}

// listSQL builds List's query: every filter q sets, the page position,
// newest first. Each row comes as (0, body, issued_ns, id, n).
//
// A query with one equality filter (or none) is answered from that
// filter's index, whose every entry in the time window is a row of the
// page: one row more than a page tells whether one follows (n is 0). A
// query with several is bounded (the bool it returns): a materialized
// scan reads at most q.ReadBound()+1 entries of one filter's index (the
// target's, else the grant's, principal's, agent's, status's, class's,
// as bbolt chooses), newest first from the page position, numbering
// them; the page is the rows among the first q.ReadBound() that the
// other filters keep, at most a page of them, each with its number n;
// and one more row, (1, NULL, issued_ns, id, n), gives how many entries
// the scan found (n, up to the bound and one) and the position of the
// one at the bound (or the last, when fewer; 0 and "" when none): the
// entry one past the bound is read only to know that one follows, and
// its row never. Each entry's row is read by its id (a lateral subquery
// the planner keeps as it is, OFFSET 0), never through another filter's
// index, which may hold any number of rows too. No composite index could
// serve every pair of filters, and any writer can post rows that one
// filter keeps and another does not. Signed narrows the grant's filter
// to its rows that can count (counts), which a partial index serves; with
// a target, it is checked on the rows as the grant is.
func listSQL(q ledger.Query, after *pageToken) (string, []any, bool) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	type filter struct {
		col string
		val any
	}
	var filters []filter
	for _, f := range []struct {
		col string
		val any
		set bool
	}{
		{"grant_id", q.GrantID, q.GrantID != ""},
		{"principal", q.Principal, q.Principal != ""},
		{"agent", q.Agent, q.Agent != ""},
		{"status", int16(q.Status), q.Status != 0},
		{"class", int16(q.Class), q.Class != 0},
	} {
		if f.set {
			filters = append(filters, filter{f.col, f.val})
		}
	}
	// The scan: the driving filter's index in the time window, after the
	// page position.
	var where []string
	from, issued, id := "ledger_rows r", "r.issued_ns", "r.id"
	if q.Target != "" {
		from, issued, id = "row_targets x", "x.issued_ns", "x.row_id"
		where = append(where, "x.target = "+arg(q.Target))
	} else if len(filters) > 0 {
		where = append(where, "r."+filters[0].col+" = "+arg(filters[0].val))
		if q.Signed {
			// The grant's rows that can count, from the partial index of
			// them (ledger_rows_counts_by_grant): the grant is the first
			// filter.
			where = append(where, "r.counts")
		}
		filters = filters[1:]
	}
	if !q.Since.IsZero() {
		where = append(where, issued+" >= "+arg(nanos(q.Since)))
	}
	if !q.Until.IsZero() {
		where = append(where, issued+" < "+arg(nanos(q.Until)))
	}
	if after != nil {
		where = append(where, "("+issued+", "+id+") < ("+arg(after.issued)+"::bigint, "+arg(after.id)+"::text)")
	}
	cond := func(w []string) string {
		if len(w) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(w, " AND ")
	}
	order := " ORDER BY " + issued + " DESC, " + id + " DESC"
	if len(filters) == 0 {
		// Every entry the index yields is a row of the page.
		sql := "SELECT 0::bigint, r.body, " + issued + ", " + id + ", 0::bigint FROM " + from
		if q.Target != "" {
			sql += " JOIN ledger_rows r ON r.id = x.row_id"
		}
		sql += cond(where) + order + " LIMIT " + arg(min(q.PageSize, q.ReadBound())+1)
		return sql, args, false
	}
	var rest []string
	for _, f := range filters {
		rest = append(rest, "r."+f.col+" = "+arg(f.val))
	}
	if q.Signed && q.Target != "" {
		rest = append(rest, "r.counts")
	}
	bound := arg(q.ReadBound())
	scan := "SELECT " + issued + " AS issued_ns, " + id + " AS id, row_number() OVER (" + strings.TrimPrefix(order, " ") + " ROWS UNBOUNDED PRECEDING) AS n FROM " + from +
		cond(where) + order + " LIMIT " + bound + " + 1"
	sql := "WITH s AS MATERIALIZED (" + scan + "),\n" +
		"page AS (SELECT r.body, s.issued_ns, s.id, s.n FROM s CROSS JOIN LATERAL (SELECT r.body FROM ledger_rows r WHERE r.id = s.id AND " +
		strings.Join(rest, " AND ") + " OFFSET 0) r WHERE s.n <= " + bound +
		" ORDER BY s.n LIMIT " + arg(q.PageSize) + "),\n" +
		"edge AS (SELECT coalesce(s.issued_ns, 0) AS issued_ns, coalesce(s.id, '') AS id, c.n FROM (SELECT count(*) AS n FROM s) c LEFT JOIN s ON s.n = least(c.n, " + bound + "))\n" +
		"SELECT 0::bigint AS kind, body, issued_ns, id, n FROM page UNION ALL SELECT 1, NULL, issued_ns, id, n FROM edge\n" +
		"ORDER BY 1, 5"
	return sql, args, true
}

// RowAfter implements ledger.Rows.
func (t *tx) RowAfter(key string) (*ledger.Row, error) {
	if err := t.see(tabRows); err != nil {
		return nil, err
	}
	var body []byte
	found, err := t.queryRow("read row after "+key, `
(SELECT body, 0 AS wrap, id FROM ledger_rows WHERE id >= $1 ORDER BY id LIMIT 1)
UNION ALL
(SELECT body, 1 AS wrap, id FROM ledger_rows ORDER BY id LIMIT 1)
ORDER BY wrap LIMIT 1`, []any{key}, &body, new(int), new(string))
	if err != nil || !found {
		return nil, err
	}
	return decodeRow(body)
}

// RowsByID implements ledger.Rows.
func (t *tx) RowsByID(after string, n int) ([]*ledger.Row, string, error) {
	if n <= 0 {
		return nil, "", nil
	}
	if err := t.see(tabRows); err != nil {
		return nil, "", err
	}
	var out []*ledger.Row
	more := false
	err := t.query("read rows by id", "SELECT body FROM ledger_rows WHERE id > $1 ORDER BY id LIMIT $2", []any{after, n + 1}, func(r pgx.Rows) error {
		if len(out) == n {
			more = true
			return nil
		}
		var body []byte
		if err := r.Scan(&body); err != nil {
			return err
		}
		row, err := decodeRow(body)
		if err != nil {
			return err
		}
		out = append(out, row)
		return nil
	})
	if err != nil || !more {
		return out, "", err
	}
	return out, out[len(out)-1].ID, nil
}

// Expired implements ledger.Rows. A position is the hex of the
// retain-until (8 bytes, big-endian nanoseconds) and id of the last row
// returned.
func (t *tx) Expired(now time.Time, after string, n int) ([]*ledger.Row, string, error) {
	if n <= 0 {
		return nil, "", nil
	}
	var from int64 = -1
	fromID := ""
	if after != "" {
		pos, err := hex.DecodeString(after)
		if err != nil || len(pos) < 8 {
			return nil, "", fmt.Errorf("%w: bad sweep position", ledger.ErrInvalid)
		}
		from, fromID = int64(binary.BigEndian.Uint64(pos)), string(pos[8:])
	}
	if err := t.see(tabRows); err != nil {
		return nil, "", err
	}
	var out []*ledger.Row
	var lastRetain int64
	more := false
	err := t.query("read expired rows", `
SELECT body, retain_ns FROM ledger_rows
WHERE retain_ns IS NOT NULL AND retain_ns <= $1 AND (retain_ns, id) > ($2::bigint, $3::text)
ORDER BY retain_ns, id LIMIT $4`, []any{nanos(now), from, fromID, n + 1}, func(r pgx.Rows) error {
		if len(out) == n {
			more = true
			return nil
		}
		var body []byte
		if err := r.Scan(&body, &lastRetain); err != nil {
			return err
		}
		row, err := decodeRow(body)
		if err != nil {
			return err
		}
		out = append(out, row)
		return nil
	})
	if err != nil || !more {
		return out, "", err
	}
	pos := binary.BigEndian.AppendUint64(nil, uint64(lastRetain))
	return out, hex.EncodeToString(append(pos, out[len(out)-1].ID...)), nil
}

// RemoveRow implements ledger.Rows.
func (t *tx) RemoveRow(r *ledger.Row, tomb ledger.Tombstone) error {
	body, err := json.Marshal(tomb)
	if err != nil {
		return fmt.Errorf("encode tombstone %s: %w", r.ID, err)
	}
	targets, snaps := rowKeys(r)
	if err := t.see(tabRows, r.ID); err != nil {
		return err
	}
	if err := t.see(tabEvidence, r.ID); err != nil {
		return err
	}
	if r.RequestJWTSHA256 != "" {
		if err := t.see(tabJWTs, r.RequestJWTSHA256); err != nil {
			return err
		}
	}
	if !t.writing() {
		return errReadOnly
	}
	if err := t.blocked(); err != nil {
		return err
	}
	// The row's request-JWT entries: under its hash, and under its twin's
	// where the row was indexed under both (createRowsSQL). The tombstone
	// only for a row removed; none removed is the member's error at the
	// next round trip, as bbolt's is at once.
	t.push(`
WITH r AS (DELETE FROM ledger_rows WHERE id = $1 RETURNING request_jwt_twin),
x AS (DELETE FROM row_targets WHERE target = ANY($2::text[]) AND issued_ns = $3 AND row_id = $1),
s AS (DELETE FROM row_snapshots WHERE snapshot_id = ANY($6::text[]) AND row_id = $1),
j AS (DELETE FROM request_jwts WHERE (sha = $4 OR sha IN (SELECT request_jwt_twin FROM r WHERE request_jwt_twin <> '')) AND row_id = $1),
e AS (DELETE FROM evidence WHERE row_id = $1)
INSERT INTO tombstones (id, body) SELECT $1, $5::bytea FROM r
ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body
RETURNING id`, r.ID, targets, nanos(r.IssuedAt), r.RequestJWTSHA256, body, snaps).Query(func(rows pgx.Rows) error {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return fmt.Errorf("remove row %s: %w", r.ID, ledger.ErrNotFound)
		}
		return nil
	})
	return nil
}

// Tombstone implements ledger.Rows.
func (t *tx) Tombstone(id string) (*ledger.Tombstone, error) {
	body, err := t.read(readTombstone, "read tombstone "+id, id)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return nil, ledger.ErrNotFound
	}
	var tomb ledger.Tombstone
	if err := json.Unmarshal(body, &tomb); err != nil {
		return nil, fmt.Errorf("decode tombstone %s: %w", id, err)
	}
	return &tomb, nil
}

// PutEvidence implements ledger.Rows: a deferred write (group.go).
func (t *tx) PutEvidence(rowID string, bundle []byte) error {
	if !t.write {
		return errReadOnly
	}
	if err := t.see(tabEvidence, rowID); err != nil {
		return err
	}
	d := t.deferred()
	d.evidence = append(d.evidence, evidenceWrite{rowID: rowID, bundle: bundle})
	return nil
}

// Evidence implements ledger.Rows.
func (t *tx) Evidence(rowID string) ([]byte, error) {
	bundle, err := t.read(readEvidence, "read evidence "+rowID, rowID)
	if err != nil {
		return nil, err
	}
	if bundle == nil {
		return nil, ledger.ErrNotFound
	}
	return bundle, nil
}

// PutSnapshot implements ledger.Rows. A snapshot already stored is locked
// FOR SHARE, which writers naming it take at once without waiting for each
// other, and which a sweep's SnapshotInUse (FOR UPDATE) waits for; when a
// sweep deleted it meanwhile, the lock finds nothing and the snapshot is
// stored again and reported new. An absent one is inserted; when another
// transaction inserted it first, the insert waits for that one to end and
// the statement runs again to lock what it committed.
func (t *tx) PutSnapshot(s verifier.Snapshot) (bool, error) {
	if !t.write {
		return false, errReadOnly
	}
	if err := t.blocked(); err != nil {
		return false, err
	}
	// Locked already in this transaction: it stays until the end.
	if t.locked[s.ID] {
		return false, nil
	}
	if retain, ok := t.held[s.ID]; ok {
		t.locked[s.ID], t.retain[s.ID] = true, retain
		return false, nil
	}
	body, err := json.Marshal(s)
	if err != nil {
		return false, fmt.Errorf("encode snapshot %s: %w", s.ID, err)
	}
	for run := 1; ; run++ {
		var locked, inserted bool
		var retain *int64
		_, err := t.queryRow("store snapshot "+s.ID, `
WITH l AS (SELECT id FROM snapshots WHERE id = $1 FOR SHARE),
i AS (
	INSERT INTO snapshots (id, body) SELECT $1, $2 WHERE NOT EXISTS (SELECT FROM l)
	ON CONFLICT (id) DO NOTHING
	RETURNING id
)
SELECT EXISTS (SELECT FROM l), EXISTS (SELECT FROM i), (SELECT until_ns FROM snapshot_retain WHERE id = $1)`, []any{s.ID, body}, &locked, &inserted, &retain)
		switch {
		case err != nil:
			return false, err
		case locked || inserted:
			// The ledger asks for its retain-until next: read with it.
			t.retain[s.ID], t.locked[s.ID] = retain, true
			if inserted {
				t.wrote = true
			}
			return inserted, nil
		case run == maxSnapshotRuns:
			return false, fmt.Errorf("store snapshot %s: still inserted and deleted by others after %d runs", s.ID, run)
		}
	}
}

// maxSnapshotRuns bounds how often PutSnapshot runs again: each run after
// the first follows another transaction's insert or delete of the
// snapshot, which are rare.
const maxSnapshotRuns = 8

// SnapshotInUse implements ledger.Rows. In a write transaction the
// snapshot's row is locked FOR UPDATE first, in a statement of its own, so
// that the probe that follows sees every writer that locked it FOR SHARE
// (PutSnapshot) before, and writers after wait for this transaction to
// end. The probe is one index lookup (row_snapshots' key starts with the
// snapshot).
func (t *tx) SnapshotInUse(id string) (bool, error) {
	if err := t.see(tabRows); err != nil {
		return false, err
	}
	if t.write {
		t.push("SELECT FROM snapshots WHERE id = $1 FOR UPDATE", id)
	}
	var used bool
	_, err := t.queryRow("is snapshot "+id+" in use", snapshotInUseSQL, []any{id}, &used)
	return used, err
}

// snapshotInUseSQL probes for any link to snapshot $1.
const snapshotInUseSQL = "SELECT EXISTS (SELECT FROM row_snapshots WHERE snapshot_id = $1)"

// Snapshot implements ledger.Rows.
func (t *tx) Snapshot(id string) (verifier.Snapshot, error) {
	var s verifier.Snapshot
	var body []byte
	found, err := t.queryRow("read snapshot "+id, "SELECT body FROM snapshots WHERE id = $1", []any{id}, &body)
	if err != nil {
		return s, err
	}
	if !found {
		return s, ledger.ErrNotFound
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("decode snapshot %s: %w", id, err)
	}
	return s, nil
}

// DeleteSnapshot implements ledger.Rows.
func (t *tx) DeleteSnapshot(id string) error {
	delete(t.retain, id)
	delete(t.locked, id)
	delete(t.held, id)
	return t.exec("WITH k AS (DELETE FROM snapshot_retain WHERE id = $1) DELETE FROM snapshots WHERE id = $1", id)
}

// Revocation implements ledger.Rows.
func (t *tx) Revocation(grant string) (*ledger.Revocation, error) {
	body, err := t.read(readRevocation, "read revocation of "+grant, grant)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return nil, nil
	}
	var r ledger.Revocation
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode revocation of %s: %w", grant, err)
	}
	return &r, nil
}

// Revocations implements ledger.RevocationLister, in grant id order.
func (t *tx) Revocations(fn func(grant string, r *ledger.Revocation) error) error {
	return t.query("list revocations", "SELECT grant_id, body FROM revocations ORDER BY grant_id", nil, revocationRows(fn))
}

// RevocationsAfter implements ledger.RevocationLister.
func (t *tx) RevocationsAfter(after string, limit int, fn func(grant string, r *ledger.Revocation) error) error {
	return t.query("list revocations", "SELECT grant_id, body FROM revocations WHERE grant_id > $1 ORDER BY grant_id LIMIT $2", []any{after, limit}, revocationRows(fn))
}

// revocationRows calls fn with each row's grant id and revocation.
func revocationRows(fn func(grant string, r *ledger.Revocation) error) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		var grant string
		var body []byte
		if err := rows.Scan(&grant, &body); err != nil {
			return err
		}
		var r ledger.Revocation
		if err := json.Unmarshal(body, &r); err != nil {
			return fmt.Errorf("decode revocation of %s: %w", grant, err)
		}
		return fn(grant, &r)
	}
}

// PutRevocation implements ledger.Rows.
func (t *tx) PutRevocation(grant string, r ledger.Revocation) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode revocation of %s: %w", grant, err)
	}
	return t.exec("INSERT INTO revocations (grant_id, body) VALUES ($1, $2) ON CONFLICT (grant_id) DO UPDATE SET body = EXCLUDED.body", grant, body)
}

// HoldGrants implements ledger.Rows by locking the grants' rows of
// grant_holds (their buckets, grantBucket) in bucket order until the
// transaction ends. A committer's transaction never waits for them: two
// groups that each held one grant and waited for the other's would
// deadlock, each with its members' rows, and a committer waiting holds up
// every write queued behind it. A member takes them only when they are
// free; one that finds any held elsewhere is undone and runs again once
// its group has committed, in a transaction of its own that waits
// (Store.waitAlone). There the statement goes with the next round trip,
// whose statements run once the locks are granted.
func (t *tx) HoldGrants(grants ...string) error {
	if !t.write {
		return errReadOnly
	}
	if err := t.blocked(); err != nil {
		return err
	}
	buckets := make([]int32, 0, len(grants))
	for _, g := range grants {
		buckets = append(buckets, grantBucket(g))
	}
	slices.Sort(buckets)
	buckets = slices.Compact(buckets)
	if len(buckets) == 0 {
		return nil
	}
	const hold = "SELECT count(*) FROM (SELECT bucket FROM grant_holds WHERE bucket = ANY($1) ORDER BY bucket FOR UPDATE%s) h"
	if t.mayWait {
		t.push(fmt.Sprintf(hold, ""), buckets).Query(func(rows pgx.Rows) error {
			var n int
			if rows.Next() {
				if err := rows.Scan(&n); err != nil {
					return err
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if n != len(buckets) {
				return fmt.Errorf("hold grants: grant_holds has %d of the %d rows asked for (migration 5 makes 0 to 65535): the schema is damaged", n, len(buckets))
			}
			return nil
		})
		return nil
	}
	var n int
	if _, err := t.queryRow("hold grants", fmt.Sprintf(hold, " SKIP LOCKED"), []any{buckets}, &n); err != nil {
		return err
	}
	if n != len(buckets) {
		// Held by another transaction (or missing: waiting, the member
		// then fails on it).
		t.heldElsewhere = true
		t.err = errAlone
		return t.err
	}
	return nil
}

// grantBucket is a grant's row of grant_holds: the first two bytes of the
// SHA-256 of the hold's name and the grant.
func grantBucket(grant string) int32 {
	h := sha256.Sum256([]byte("pactledger grant hold\x00" + grant))
	return int32(binary.BigEndian.Uint16(h[:2]))
}

// checkIndexesPage is how many rows CheckIndexes reads a round trip.
const checkIndexesPage = 1000

// CheckIndexes implements ledger.Indexes. The SQL indexes are over the
// rows' table and cannot lead to another row than the one they index,
// but what they index is kept beside each row's body, in columns of its
// own (principal, grant_id, agent, status, class, issued_ns, retain_ns,
// counts) and in row_targets: a read by id serves the body, a lookup
// reads the columns. An edit of a column or of row_targets hides a row
// from the lookups of its values, or shows it to another's, while a
// read by id shows it as it was. So each row's columns and targets are
// compared with its body, in pages of rows by id: a column or a target
// that differs is reported as IndexMissingEntry under its name, a body
// of another row's id as IndexOtherRecord.
func (t *tx) CheckIndexes(fn func(ledger.IndexFinding) error) error {
	type stored struct {
		id, principal, grant, agent string
		status, class               int16
		issued                      int64
		retain                      *int64
		counts                      bool
		body                        []byte
		targets                     []string
		targetTimes                 []int64
	}
	for after := ""; ; {
		var page []stored
		if err := t.query("check indexes", `
SELECT r.id, r.principal, r.grant_id, r.agent, r.status, r.class, r.issued_ns, r.retain_ns, r.counts, r.body,
	COALESCE((SELECT array_agg(x.target ORDER BY x.target, x.issued_ns) FROM row_targets x WHERE x.row_id = r.id), '{}'),
	COALESCE((SELECT array_agg(x.issued_ns ORDER BY x.target, x.issued_ns) FROM row_targets x WHERE x.row_id = r.id), '{}')
FROM ledger_rows r WHERE r.id > $1 ORDER BY r.id LIMIT $2`, []any{after, checkIndexesPage}, func(rows pgx.Rows) error {
			var x stored
			if err := rows.Scan(&x.id, &x.principal, &x.grant, &x.agent, &x.status, &x.class, &x.issued, &x.retain, &x.counts, &x.body, &x.targets, &x.targetTimes); err != nil {
				return err
			}
			page = append(page, x)
			return nil
		}); err != nil {
			return err
		}
		for _, x := range page {
			r, err := decodeRow(x.body)
			if err != nil {
				return fmt.Errorf("check indexes: row %s: %w", x.id, err)
			}
			if r.ID != x.id {
				if err := fn(ledger.IndexFinding{RowID: x.id, Index: "ledger_rows.id", Problem: ledger.IndexOtherRecord}); err != nil {
					return err
				}
				continue
			}
			targets := slices.Sorted(slices.Values(r.Targets()))
			sameTargets := slices.Equal(x.targets, targets) && !slices.ContainsFunc(x.targetTimes, func(ns int64) bool { return ns != nanos(r.IssuedAt) })
			for _, c := range []struct {
				name string
				same bool
			}{
				{"ledger_rows.principal", x.principal == r.Principal},
				{"ledger_rows.grant_id", x.grant == r.GrantID},
				{"ledger_rows.agent", x.agent == r.Agent.Platform},
				{"ledger_rows.status", x.status == int16(r.Status)},
				{"ledger_rows.class", x.class == int16(r.Class)},
				{"ledger_rows.issued_ns", x.issued == nanos(r.IssuedAt)},
				{"ledger_rows.retain_ns", equalRetain(x.retain, retainNanos(r.RetainUntil))},
				{"ledger_rows.counts", x.counts == r.ReceiptVerified()},
				{"row_targets", sameTargets},
			} {
				if c.same {
					continue
				}
				if err := fn(ledger.IndexFinding{RowID: r.ID, Index: c.name, Problem: ledger.IndexMissingEntry}); err != nil {
					return err
				}
			}
		}
		if len(page) < checkIndexesPage {
			return nil
		}
		after = page[len(page)-1].id
	}
}

// equalRetain reports whether a retain_ns column holds want (nil: none).
func equalRetain(have *int64, want any) bool {
	w, ok := want.(int64)
	if !ok {
		return have == nil
	}
	return have != nil && *have == w
}
