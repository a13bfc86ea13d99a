package postgres

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
)

// Object implements ledger.References.
func (t *tx) Object(key string) (ledger.Location, error) {
	var loc ledger.Location
	body, err := t.read(readObject, "read object "+key, key)
	if err != nil {
		return loc, err
	}
	if body == nil {
		return loc, ledger.ErrNotFound
	}
	if err := json.Unmarshal(body, &loc); err != nil {
		return loc, fmt.Errorf("decode object %s: %w", key, err)
	}
	return loc, nil
}

// ObjectsUnder implements ledger.References: a range of the primary key
// (COLLATE "C" sorts by bytes).
func (t *tx) ObjectsUnder(prefix, after string, n int) ([]ledger.Location, error) {
	if err := t.see(tabObjects); err != nil {
		return nil, err
	}
	var out []ledger.Location
	// The range ends where keys stop starting with prefix, so that the
	// last page does not read on through every later key.
	end, ok := prefixEnd(prefix)
	if !ok {
		return nil, fmt.Errorf("objects under %q: the prefix must end in an ASCII character", prefix)
	}
	err := t.query("read objects under "+prefix, "SELECT key, body FROM objects WHERE key > $1 AND key < $4 AND starts_with(key, $2) ORDER BY key LIMIT $3",
		[]any{max(after, prefix), prefix, n, end}, func(r pgx.Rows) error {
			var key string
			var body []byte
			if err := r.Scan(&key, &body); err != nil {
				return err
			}
			var loc ledger.Location
			if err := json.Unmarshal(body, &loc); err != nil {
				return fmt.Errorf("decode object %s: %w", key, err)
			}
			loc.Key = key
			out = append(out, loc)
			return nil
		})
	return out, err
}

// prefixEnd is the least string, in byte order, above every string that
// starts with prefix: its last byte raised by one; false when that byte
// is not ASCII (raised, it would not be UTF-8).
func prefixEnd(prefix string) (string, bool) {
	if prefix == "" || prefix[len(prefix)-1] >= 0x7f {
		return "", false
	}
	return prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1), true
}

// SetObject implements ledger.References: a deferred write (group.go), so
// that an upload round's records go in one statement.
func (t *tx) SetObject(key string, loc ledger.Location) error {
	if !t.write {
		return errReadOnly
	}
	if err := t.see(tabObjects, key); err != nil {
		return err
	}
	body, err := json.Marshal(loc)
	if err != nil {
		return fmt.Errorf("encode object %s: %w", key, err)
	}
	d := t.deferred()
	d.objects = append(d.objects, objectWrite{key: key, body: body})
	return nil
}

// DeleteObject implements ledger.References.
func (t *tx) DeleteObject(key string) error {
	if err := t.see(tabObjects, key); err != nil {
		return err
	}
	return t.exec("DELETE FROM objects WHERE key = $1", key)
}

// Count implements ledger.References: one upsert that adds delta (never
// below zero) under the row's lock, then the counter is removed at zero.
func (t *tx) Count(kind ledger.RefKind, key string, delta int) (int, error) {
	if kind != ledger.RefHold && kind != ledger.RefSegment && kind != ledger.RefRepeatIncident {
		return 0, fmt.Errorf("%w: unknown reference kind %q", ledger.ErrInvalid, kind)
	}
	what := fmt.Sprintf("count %s %s", kind, key)
	var n int64
	if delta == 0 {
		_, err := t.queryRow(what, "SELECT n FROM ref_counts WHERE kind = $1 AND key = $2", []any{string(kind), key}, &n)
		return int(n), err
	}
	if !t.writing() {
		return 0, errReadOnly
	}
	_, err := t.queryRow(what, `
INSERT INTO ref_counts (kind, key, n) VALUES ($1, $2, greatest($3::bigint, 0))
ON CONFLICT (kind, key) DO UPDATE SET n = greatest(ref_counts.n + $3::bigint, 0)
RETURNING n`, []any{string(kind), key, int64(delta)}, &n)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		err = t.exec("DELETE FROM ref_counts WHERE kind = $1 AND key = $2 AND n = 0", string(kind), key)
	}
	return int(n), err
}

// SnapshotRetain implements ledger.References. It takes no lock: the
// ledger reads it after PutSnapshot, whose lock on the snapshot keeps a
// sweep from deleting it, and writers naming one snapshot must not wait
// for each other. Two that extend it at once both queue the extension
// (extending is idempotent) and the record keeps one of their values,
// never more than was queued.
func (t *tx) SnapshotRetain(id string) (time.Time, error) {
	if ns, ok := t.retain[id]; ok {
		if err := t.blocked(); err != nil || ns == nil {
			return time.Time{}, err
		}
		return fromNanos(*ns), nil
	}
	var ns int64
	found, err := t.queryRow("read retention of snapshot "+id, "SELECT until_ns FROM snapshot_retain WHERE id = $1", []any{id}, &ns)
	if err != nil || !found {
		return time.Time{}, err
	}
	return fromNanos(ns), nil
}

// SetSnapshotRetain implements ledger.References.
func (t *tx) SetSnapshotRetain(id string, at time.Time) error {
	ns := nanos(at)
	err := t.exec("INSERT INTO snapshot_retain (id, until_ns) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET until_ns = EXCLUDED.until_ns", id, ns)
	if err == nil {
		t.retain[id] = &ns // what a read in this transaction now finds
	}
	return err
}

// QueueDeletion implements ledger.References.
func (t *tx) QueueDeletion(loc ledger.Location) error {
	body, err := json.Marshal(loc)
	if err != nil {
		return fmt.Errorf("encode deletion of %s: %w", loc.Key, err)
	}
	return t.exec("INSERT INTO deletions (key, body) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body", loc.Key, body)
}

// Deletions implements ledger.References.
func (t *tx) Deletions(n int) ([]ledger.Location, error) {
	var out []ledger.Location
	err := t.query("read the deletion queue", "SELECT body FROM deletions ORDER BY key LIMIT $1", []any{n}, func(r pgx.Rows) error {
		var body []byte
		if err := r.Scan(&body); err != nil {
			return err
		}
		var loc ledger.Location
		if err := json.Unmarshal(body, &loc); err != nil {
			return fmt.Errorf("decode deletion: %w", err)
		}
		out = append(out, loc)
		return nil
	})
	return out, err
}

// Deleted implements ledger.References.
func (t *tx) Deleted(key string) error {
	return t.exec("DELETE FROM deletions WHERE key = $1", key)
}
