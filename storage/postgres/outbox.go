package postgres

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// scanEntry reads an outbox entry: its seq column and its stored body.
func scanEntry(r pgx.Rows) (ledger.OutboxEntry, error) {
	var e ledger.OutboxEntry
	var seq int64
	var body []byte
	if err := r.Scan(&seq, &body); err != nil {
		return e, err
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return e, fmt.Errorf("decode outbox entry %d: %w", seq, err)
	}
	e.Seq = uint64(seq)
	return e, nil
}

// Enqueue implements ledger.Outbox: the sequence assigns Seq when the
// entry is sent, a deferred write (group.go).
func (t *tx) Enqueue(e ledger.OutboxEntry, at time.Time) error {
	if !t.write {
		return errReadOnly
	}
	if err := t.blocked(); err != nil {
		return err
	}
	e.Seq = 0
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode outbox entry %s: %w", e.Key, err)
	}
	d := t.deferred()
	d.entries = append(d.entries, entryWrite{body: body, queued: nanos(at), opKey: OpKey(e)})
	return nil
}

// OpKey is the outbox.op_key of entry e: the object it operates on, ""
// for a put. Operations on one object are claimed in their order
// (claim).
func OpKey(e ledger.OutboxEntry) string {
	if e.Op == "" {
		return ""
	}
	return e.Key
}

// Outbox implements ledger.Outbox.
func (t *tx) Outbox(n int) ([]ledger.OutboxEntry, error) {
	return t.entries("read the outbox", "SELECT seq, body FROM outbox ORDER BY seq LIMIT $1", n)
}

// OutboxOfKind implements ledger.KindOutbox: the entries' bodies are
// their JSON, read by the database.
func (t *tx) OutboxOfKind(kind string) ([]ledger.OutboxEntry, error) {
	return t.entries("read the outbox's entries of kind "+kind,
		"SELECT seq, body FROM outbox WHERE position(convert_to('\"kind\":' || to_json($1::text)::text, 'UTF8') IN body) > 0"+
			" AND convert_from(body, 'UTF8')::jsonb ->> 'kind' = $1 ORDER BY seq", kind)
}

// entries runs a query of outbox entries (seq, body), lowest Seq first.
func (t *tx) entries(what, sql string, args ...any) ([]ledger.OutboxEntry, error) {
	if err := t.see(tabOutbox); err != nil {
		return nil, err
	}
	var out []ledger.OutboxEntry
	err := t.query(what, sql, args, func(r pgx.Rows) error {
		e, err := scanEntry(r)
		out = append(out, e)
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING gives no order.
	slices.SortFunc(out, func(a, b ledger.OutboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Claim implements ledger.Outbox: entries nobody else holds a live claim
// on, locked with SKIP LOCKED so that uploaders claiming at once never
// wait for or take each other's entries.
func (t *tx) Claim(n int, holder string, ttl time.Duration) ([]ledger.OutboxEntry, error) {
	return t.claim("ORDER BY seq LIMIT $1", n, holder, ttl)
}

// claim claims for holder for ttl the entries, of those nobody else
// holds a live claim on, that pick ($1) chooses. An operation on an
// object an earlier queued operation is also on waits until that one has
// left the outbox: operations on one object keep their order, though
// several uploaders claim at once (each orders only its own round).
func (t *tx) claim(pick string, arg any, holder string, ttl time.Duration) ([]ledger.OutboxEntry, error) {
	if err := t.see(tabOutbox); err != nil {
		return nil, err
	}
	if !t.writing() {
		return nil, errReadOnly
	}
	return t.entries("claim outbox entries", `
UPDATE outbox SET claimed_by = $2, claim_until = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE seq IN (
	SELECT seq FROM outbox AS o
	WHERE (claim_until IS NULL OR claim_until < clock_timestamp() OR claimed_by = $2)
		AND NOT (op_key <> '' AND EXISTS (SELECT 1 FROM outbox AS e WHERE e.op_key <> '' AND e.op_key = o.op_key AND e.seq < o.seq))
	`+pick+`
	FOR UPDATE SKIP LOCKED
)
RETURNING seq, body`, arg, holder, ttl.Microseconds())
}

// HoldsClaim implements ledger.Outbox. The entries holder still holds
// are locked (FOR UPDATE, in seq order) until the transaction ends:
// another holder's Claim skips them (SKIP LOCKED) even once the claim
// runs out, and one that claimed them first shows as their holder. The
// rows of entries the holder no longer holds are left unlocked.
func (t *tx) HoldsClaim(holder string, seqs []uint64) (bool, error) {
	if !t.writing() {
		return false, errReadOnly
	}
	if len(seqs) == 0 {
		return true, nil
	}
	if err := t.see(tabOutbox); err != nil {
		return false, err
	}
	var held int
	_, err := t.queryRow("check outbox claims", `
SELECT count(*) FROM (
	SELECT seq FROM outbox
	WHERE seq = ANY($1) AND claimed_by = $2 AND claim_until > clock_timestamp()
	ORDER BY seq
	FOR UPDATE
) AS held`, []any{bigints(seqs), holder}, &held)
	return err == nil && held == len(seqs), err
}

// bigints converts Seqs or positions for a bigint[] parameter.
func bigints(us []uint64) []int64 {
	out := make([]int64, len(us))
	for i, u := range us {
		out[i] = int64(u)
	}
	return out
}

// Queued implements ledger.Outbox.
func (t *tx) Queued(seqs []uint64) ([]uint64, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	if err := t.see(tabOutbox); err != nil {
		return nil, err
	}
	var out []uint64
	err := t.query("find queued outbox entries", "SELECT seq FROM outbox WHERE seq = ANY($1) ORDER BY seq", []any{bigints(seqs)}, func(r pgx.Rows) error {
		var seq int64
		err := r.Scan(&seq)
		out = append(out, uint64(seq))
		return err
	})
	return out, err
}

// QueuedPuts implements ledger.Outbox: one scan of the outbox, each
// entry's key read from its JSON (json, not jsonb, which would refuse a
// \u0000 anywhere in a body) and joined to the keys asked about.
func (t *tx) QueuedPuts(keys []string) ([]ledger.OutboxEntry, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if err := t.see(tabOutbox); err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	var out []ledger.OutboxEntry
	err := t.query("find queued puts", `
SELECT o.seq, o.body FROM outbox AS o
JOIN unnest($1::text[]) AS k(key) ON convert_from(o.body, 'UTF8')::json->>'key' = k.key
ORDER BY o.seq`, []any{keys}, func(r pgx.Rows) error {
		e, err := scanEntry(r)
		if err == nil && e.Op == "" && want[e.Key] {
			out = append(out, e)
			delete(want, e.Key)
		}
		return err
	})
	return out, err
}

// ClaimEntries implements ledger.Outbox, as Claim does for the lowest
// entries.
func (t *tx) ClaimEntries(seqs []uint64, holder string, ttl time.Duration) ([]ledger.OutboxEntry, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	return t.claim("AND seq = ANY($1) ORDER BY seq", bigints(seqs), holder, ttl)
}

// Dequeue implements ledger.Outbox.
func (t *tx) Dequeue(seq uint64) (bool, error) {
	if !t.writing() {
		return false, errReadOnly
	}
	return t.queryRow(fmt.Sprint("dequeue outbox entry ", seq), dequeueSQL, []any{int64(seq)}, new(bool))
}

// DequeueAll implements ledger.Dequeuer: one primary-key removal per
// entry, in order, all in one round trip.
func (t *tx) DequeueAll(seqs []uint64) ([]bool, error) {
	if !t.writing() {
		return nil, errReadOnly
	}
	if err := t.blocked(); err != nil {
		return nil, err
	}
	out := make([]bool, len(seqs))
	for i, seq := range seqs {
		t.push(dequeueSQL, int64(seq)).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				out[i] = true
			}
			return rows.Err()
		})
	}
	if err := t.flush("dequeue outbox entries"); err != nil {
		return nil, err
	}
	return out, nil
}

// dequeueSQL removes outbox entry $1 and its failure record, returning a
// row when the entry was queued.
const dequeueSQL = "WITH f AS (DELETE FROM outbox_failures WHERE seq = $1) DELETE FROM outbox WHERE seq = $1 RETURNING true"

// OutboxDepth implements ledger.Outbox.
func (t *tx) OutboxDepth() (int, error) {
	if err := t.see(tabOutbox); err != nil {
		return 0, err
	}
	var n int
	_, err := t.queryRow("count the outbox", "SELECT count(*) FROM outbox", nil, &n)
	return n, err
}

var _ ledger.OutboxEmptier = (*tx)(nil)

// OutboxEmpty implements ledger.OutboxEmptier: whether the outbox holds
// no entry, without counting them (OutboxDepth reads every one).
func (t *tx) OutboxEmpty() (bool, error) {
	if err := t.see(tabOutbox); err != nil {
		return false, err
	}
	var empty bool
	_, err := t.queryRow("see whether the outbox is empty", "SELECT NOT EXISTS (SELECT 1 FROM outbox)", nil, &empty)
	return empty, err
}

// OldestQueued implements ledger.Outbox.
func (t *tx) OldestQueued() (time.Time, error) {
	if err := t.see(tabOutbox); err != nil {
		return time.Time{}, err
	}
	var ns int64
	found, err := t.queryRow("read the oldest outbox entry", "SELECT queued_ns FROM outbox ORDER BY seq LIMIT 1", nil, &ns)
	if err != nil || !found {
		return time.Time{}, err
	}
	return fromNanos(ns), nil
}

// PlanSegment implements ledger.Outbox.
func (t *tx) PlanSegment(p ledger.SegmentPlan) error {
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode segment plan %s: %w", p.Key, err)
	}
	return t.exec("INSERT INTO segment_plans (key, body) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body", p.Key, body)
}

// SegmentPlans implements ledger.Outbox.
func (t *tx) SegmentPlans() ([]ledger.SegmentPlan, error) {
	var out []ledger.SegmentPlan
	err := t.query("read segment plans", "SELECT key, body FROM segment_plans ORDER BY key", nil, func(r pgx.Rows) error {
		var key string
		var body []byte
		if err := r.Scan(&key, &body); err != nil {
			return err
		}
		var p ledger.SegmentPlan
		if err := json.Unmarshal(body, &p); err != nil {
			return fmt.Errorf("decode segment plan %s: %w", key, err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// DropSegmentPlan implements ledger.Outbox.
func (t *tx) DropSegmentPlan(key string) error {
	return t.exec("DELETE FROM segment_plans WHERE key = $1", key)
}

// Failure implements ledger.Outbox.
func (t *tx) Failure(seq uint64) (ledger.OutboxFailure, error) {
	var f ledger.OutboxFailure
	var body []byte
	found, err := t.queryRow(fmt.Sprint("read failures of outbox entry ", seq), "SELECT body FROM outbox_failures WHERE seq = $1"+t.lock(), []any{int64(seq)}, &body)
	if err != nil || !found {
		return f, err
	}
	if err := json.Unmarshal(body, &f); err != nil {
		return f, fmt.Errorf("decode failures of outbox entry %d: %w", seq, err)
	}
	return f, nil
}

// SetFailure implements ledger.Outbox.
func (t *tx) SetFailure(seq uint64, f ledger.OutboxFailure) error {
	body, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode failures of outbox entry %d: %w", seq, err)
	}
	return t.exec("INSERT INTO outbox_failures (seq, body) VALUES ($1, $2) ON CONFLICT (seq) DO UPDATE SET body = EXCLUDED.body", int64(seq), body)
}

// PutDeadLetter implements ledger.Outbox.
func (t *tx) PutDeadLetter(d ledger.DeadLetter) error {
	body, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode dead letter %d: %w", d.Entry.Seq, err)
	}
	return t.exec("INSERT INTO dead_letters (seq, body) VALUES ($1, $2) ON CONFLICT (seq) DO UPDATE SET body = EXCLUDED.body", int64(d.Entry.Seq), body)
}

// DeadLetters implements ledger.Outbox.
func (t *tx) DeadLetters(after uint64, n int) ([]ledger.DeadLetter, error) {
	var out []ledger.DeadLetter
	err := t.query("read dead letters", "SELECT body FROM dead_letters WHERE seq > $1 ORDER BY seq LIMIT $2", []any{int64(after), n}, func(r pgx.Rows) error {
		var body []byte
		if err := r.Scan(&body); err != nil {
			return err
		}
		var d ledger.DeadLetter
		if err := json.Unmarshal(body, &d); err != nil {
			return fmt.Errorf("decode dead letter: %w", err)
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// DeadLetterCount implements ledger.Outbox.
func (t *tx) DeadLetterCount() (int, error) {
	var n int
	_, err := t.queryRow("count dead letters", "SELECT count(*) FROM dead_letters", nil, &n)
	return n, err
}

// RemoveDeadLetter implements ledger.Outbox.
func (t *tx) RemoveDeadLetter(seq uint64) error {
	return t.exec("DELETE FROM dead_letters WHERE seq = $1", int64(seq))
}
