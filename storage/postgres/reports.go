package postgres

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// PutDrill implements ledger.Reports.
func (t *tx) PutDrill(id string, body []byte) error {
	return t.exec("INSERT INTO drills (id, body) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING", id, body)
}

// Drill implements ledger.Reports.
func (t *tx) Drill(id string) ([]byte, error) {
	var body []byte
	found, err := t.queryRow("read drill "+id, "SELECT body FROM drills WHERE id = $1", []any{id}, &body)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ledger.ErrNotFound
	}
	return body, nil
}

// Drills implements ledger.Reports: newest id first; the page token is the
// last id returned.
func (t *tx) Drills(n int, pageToken string) ([][]byte, string, error) {
	if n <= 0 {
		return nil, "", nil
	}
	sql, args := "SELECT id, body FROM drills ORDER BY id DESC LIMIT $1", []any{n + 1}
	if pageToken != "" {
		before, err := base64.RawURLEncoding.DecodeString(pageToken)
		if err != nil || len(before) == 0 {
			return nil, "", fmt.Errorf("%w: bad pageToken", ledger.ErrInvalid)
		}
		sql, args = "SELECT id, body FROM drills WHERE id < $2 ORDER BY id DESC LIMIT $1", []any{n + 1, string(before)}
	}
	var out [][]byte
	var last string
	more := false
	err := t.query("read drills", sql, args, func(r pgx.Rows) error {
		if len(out) == n {
			more = true
			return nil
		}
		var body []byte
		if err := r.Scan(&last, &body); err != nil {
			return err
		}
		out = append(out, body)
		return nil
	})
	if err != nil || !more {
		return out, "", err
	}
	return out, base64.RawURLEncoding.EncodeToString([]byte(last)), nil
}

// NextIncidentSeq implements ledger.Reports.
func (t *tx) NextIncidentSeq() (uint64, error) {
	if !t.writing() {
		return 0, errReadOnly
	}
	var n int64
	_, err := t.queryRow("allocate an incident number", "SELECT nextval('incident_seq')", nil, &n)
	return uint64(n), err
}

// PutIncident implements ledger.Reports.
func (t *tx) PutIncident(seq uint64, inc ledger.IncidentRecord) error {
	body, err := json.Marshal(inc)
	if err != nil {
		return fmt.Errorf("encode incident %d: %w", seq, err)
	}
	return t.exec("INSERT INTO incidents (seq, body) VALUES ($1, $2) ON CONFLICT (seq) DO UPDATE SET body = EXCLUDED.body", int64(seq), body)
}

// Incident implements ledger.Reports.
func (t *tx) Incident(seq uint64) (*ledger.IncidentRecord, error) {
	var body []byte
	found, err := t.queryRow(fmt.Sprint("read incident ", seq), "SELECT body FROM incidents WHERE seq = $1"+t.lock(), []any{int64(seq)}, &body)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ledger.ErrNotFound
	}
	var inc ledger.IncidentRecord
	if err := json.Unmarshal(body, &inc); err != nil {
		return nil, fmt.Errorf("decode incident %d: %w", seq, err)
	}
	return &inc, nil
}

// Incidents implements ledger.Reports.
func (t *tx) Incidents(n int, before uint64) ([]*ledger.IncidentRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	sql, args := "SELECT seq, body FROM incidents ORDER BY seq DESC LIMIT $1", []any{n}
	// Every number is below one past the column's range: from the newest.
	if before != 0 && before <= math.MaxInt64 {
		sql, args = "SELECT seq, body FROM incidents WHERE seq < $2 ORDER BY seq DESC LIMIT $1", []any{n, int64(before)}
	}
	var out []*ledger.IncidentRecord
	err := t.query("read incidents", sql, args, func(r pgx.Rows) error {
		var seq int64
		var body []byte
		if err := r.Scan(&seq, &body); err != nil {
			return err
		}
		var inc ledger.IncidentRecord
		if err := json.Unmarshal(body, &inc); err != nil {
			return fmt.Errorf("decode incident %d: %w", seq, err)
		}
		out = append(out, &inc)
		return nil
	})
	return out, err
}

// AppendAccess implements ledger.Reports.
func (t *tx) AppendAccess(at time.Time, body []byte) (uint64, error) {
	if !t.writing() {
		return 0, errReadOnly
	}
	var seq int64
	_, err := t.queryRow("append to the access log", "INSERT INTO access_log (seq, at_ns, body) VALUES (nextval('access_seq'), $1, $2) RETURNING seq",
		[]any{nanos(at), body}, &seq)
	return uint64(seq), err
}

// LastAccessSeq implements ledger.AccessNumbers: access_seq's last value.
// A sequence skips the numbers a rolled-back write took, and stands past
// those of writes this transaction does not see.
func (t *tx) LastAccessSeq() (uint64, bool, error) {
	var last int64
	var called bool
	if _, err := t.queryRow("read the access log's sequence", "SELECT last_value, is_called FROM access_seq", nil, &last, &called); err != nil || !called {
		return 0, false, err
	}
	return uint64(last), false, nil
}

// AccessLog implements ledger.Reports.
func (t *tx) AccessLog(after uint64, n int) ([]ledger.AccessEntry, error) {
	var out []ledger.AccessEntry
	err := t.query("read the access log", "SELECT seq, at_ns, body FROM access_log WHERE seq > $1 ORDER BY seq LIMIT $2", []any{int64(after), n}, func(r pgx.Rows) error {
		var seq, at int64
		var body []byte
		if err := r.Scan(&seq, &at, &body); err != nil {
			return err
		}
		out = append(out, ledger.AccessEntry{Seq: uint64(seq), At: fromNanos(at), Body: body})
		return nil
	})
	return out, err
}

// PruneAccess implements ledger.Reports.
func (t *tx) PruneAccess(before time.Time, keep []ledger.AccessSpan, n int) (int, error) {
	if !t.writing() {
		return 0, errReadOnly
	}
	firsts, lasts := make([]int64, len(keep)), make([]int64, len(keep))
	for i, k := range keep {
		firsts[i], lasts[i] = clampSeq(k.First), clampSeq(k.Last)
	}
	var removed int
	_, err := t.queryRow("prune the access log", `
WITH d AS (
	DELETE FROM access_log WHERE seq IN (
		SELECT seq FROM access_log a WHERE at_ns < $1
		AND NOT EXISTS (SELECT 1 FROM unnest($3::bigint[], $4::bigint[]) AS k(first, last) WHERE a.seq BETWEEN k.first AND k.last)
		ORDER BY seq LIMIT $2)
	RETURNING 1
)
SELECT count(*) FROM d`, []any{nanos(before), n, firsts, lasts}, &removed)
	return removed, err
}

// clampSeq is an access record number as a bigint: numbers past its
// range (which the table's numbers never reach) are its largest.
func clampSeq(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}
