package move

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/postgres"
)

// dest is a table a kind's records are copied into, with the columns
// copied; where, when set, selects the kind's rows of a table several
// kinds share.
type dest struct {
	table string
	cols  []string
	where string
}

// kind says where one kind of bbolt record goes in the PostgreSQL schema
// and how: rows returns, for each of dests, the table rows the record
// becomes (values of the Go types pgx reads the columns back as: string
// for text, []byte for bytea, int64 for bigint, int16 for smallint, nil
// for NULL), so that what is written is also what verification expects.
type kind struct {
	name  bolt.ExportKind
	dests []dest
	rows  func(r bolt.Record) ([][][]any, error)
}

// one is a record that becomes one row of a kind's one table.
func one(vals ...any) [][][]any { return [][][]any{{vals}} }

// keyBody is a kind stored as (text key, bytea body) in table.
func keyBody(name bolt.ExportKind, table, keyCol, bodyCol string) kind {
	return kind{name: name, dests: []dest{{table: table, cols: []string{keyCol, bodyCol}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(r.Name, r.Body), nil }}
}

// seqBody is a kind stored as (bigint seq, bytea body) in table.
func seqBody(name bolt.ExportKind, table string) kind {
	return kind{name: name, dests: []dest{{table: table, cols: []string{"seq", "body"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(int64(r.Seq), r.Body), nil }}
}

// refCount is a reference counter kind, stored in ref_counts under rk.
func refCount(name bolt.ExportKind, rk ledger.RefKind) kind {
	return kind{name: name, dests: []dest{{table: "ref_counts", cols: []string{"kind", "key", "n"}, where: "kind = '" + string(rk) + "'"}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(string(rk), r.Name, r.N), nil }}
}

// kinds is every kind of record, in copy order, with where it goes. It
// follows the schema of storage/postgres version schemaVersion and the
// encodings its store writes (storage/postgres rows.go, outbox.go).
var kinds = []kind{
	{name: bolt.ExportRows, dests: []dest{
		{table: "ledger_rows", cols: []string{"id", "principal", "grant_id", "agent", "status", "class", "issued_ns", "retain_ns", "request_jwt", "body", "pool_seq", "counts"}},
		{table: "row_targets", cols: []string{"target", "issued_ns", "row_id"}},
		{table: "row_snapshots", cols: []string{"snapshot_id", "row_id"}},
	}, rows: rowRows},
	{name: bolt.ExportRequestJWTs, dests: []dest{{table: "request_jwts", cols: []string{"sha", "row_id"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(r.Name, r.Ref), nil }},
	keyBody(bolt.ExportEvidence, "evidence", "row_id", "bundle"),
	keyBody(bolt.ExportTombstones, "tombstones", "id", "body"),
	keyBody(bolt.ExportSnapshots, "snapshots", "id", "body"),
	{name: bolt.ExportSnapshotRetain, dests: []dest{{table: "snapshot_retain", cols: []string{"id", "until_ns"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(r.Name, max(r.N, 0)), nil }},
	keyBody(bolt.ExportRevocations, "revocations", "grant_id", "body"),
	{name: bolt.ExportOutbox, dests: []dest{{table: "outbox", cols: []string{"seq", "body", "queued_ns", "op_key"}}}, rows: outboxRows},
	seqBody(bolt.ExportFailures, "outbox_failures"),
	seqBody(bolt.ExportDeadLetters, "dead_letters"),
	keyBody(bolt.ExportSegmentPlans, "segment_plans", "key", "body"),
	keyBody(bolt.ExportObjects, "objects", "key", "body"),
	refCount(bolt.ExportHolds, ledger.RefHold),
	refCount(bolt.ExportSegmentRefs, ledger.RefSegment),
	refCount(bolt.ExportRepeatIncidents, ledger.RefRepeatIncident),
	keyBody(bolt.ExportDeletions, "deletions", "key", "body"),
	keyBody(bolt.ExportDrills, "drills", "id", "body"),
	seqBody(bolt.ExportIncidents, "incidents"),
	{name: bolt.ExportAccess, dests: []dest{{table: "access_log", cols: []string{"seq", "at_ns", "body"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(int64(r.Seq), max(r.N, 0), r.Body), nil }},
	{name: bolt.ExportLogPending, dests: []dest{{table: "log_pending", cols: []string{"seq", "ref", "data"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(int64(r.Seq), r.Ref, r.Body), nil }},
	{name: bolt.ExportLogLeaves, dests: []dest{{table: "log_leaves", cols: []string{"idx", "ref", "data"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(int64(r.Seq), r.Ref, r.Body), nil }},
	{name: bolt.ExportLogIndex, dests: []dest{{table: "log_index", cols: []string{"ref", "idx"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(r.Name, int64(r.Seq)), nil }},
	{name: bolt.ExportLogHashes, dests: []dest{{table: "log_hashes", cols: []string{"idx", "hash"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(int64(r.Seq), r.Body), nil }},
	{name: bolt.ExportCheckpoints, dests: []dest{{table: "log_checkpoints", cols: []string{"size", "checkpoint"}}},
		rows: func(r bolt.Record) ([][][]any, error) { return one(int64(r.Seq), r.Body), nil }},
}

// dataTables are the schema's tables that hold ledger data: a move needs
// them empty to begin. (The lease table is left out: a ledgerd started by
// mistake on the empty database may have taken leases, which is harmless.)
var dataTables = []string{
	"ledger_rows", "row_targets", "row_snapshots", "request_jwts", "evidence", "tombstones", "snapshots", "snapshot_retain", "revocations",
	"outbox", "outbox_failures", "dead_letters", "segment_plans", "objects", "ref_counts", "deletions", "drills",
	"incidents", "access_log", "log_pending", "log_leaves", "log_index", "log_hashes", "log_checkpoints", "log_state",
}

// rowRows is a row as storage/postgres stores it: the row with the columns
// List filters on, one row_targets entry per distinct target, and one
// row_snapshots link per JWKS snapshot it names; a row of the drill pool
// has its position, and a row that can count toward its grant's countMax
// is marked (counts).
func rowRows(r bolt.Record) ([][][]any, error) {
	row := r.Row
	if row == nil || row.ID != r.Name {
		return nil, fmt.Errorf("row %s: stored under another id", r.Name)
	}
	issued := nanos(row.IssuedAt)
	var retain any
	if !row.RetainUntil.IsZero() {
		retain = nanos(row.RetainUntil)
	}
	// A row of the drill pool keeps its number as its position there (the
	// pool's sequence is set past the file's last number).
	var pool any
	if ledger.Drillable(row) {
		pool = int64(r.Seq)
	}
	main := []any{row.ID, row.Principal, row.GrantID, row.Agent.Platform, int16(row.Status), int16(row.Class), issued, retain, row.RequestJWTSHA256, r.Body, pool, row.ReceiptVerified()}
	var targets [][]any
	for _, t := range row.Targets() {
		targets = append(targets, []any{t, issued, row.ID})
	}
	var snaps [][]any
	for _, s := range ledger.SnapshotsOf(row) {
		snaps = append(snaps, []any{s, row.ID})
	}
	return [][][]any{{main}, targets, snaps}, nil
}

// outboxRows is an outbox entry as storage/postgres stores it: the entry
// without its Seq (the column holds it) and when it was queued. No claim.
func outboxRows(r bolt.Record) ([][][]any, error) {
	var e ledger.OutboxEntry
	if err := json.Unmarshal(r.Body, &e); err != nil {
		return nil, fmt.Errorf("decode outbox entry %d: %w", r.Seq, err)
	}
	e.Seq = 0
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode outbox entry %d: %w", r.Seq, err)
	}
	return one(int64(r.Seq), body, max(r.N, 0), postgres.OpKey(e)), nil
}

// nanos is t in nanoseconds since the Unix epoch, clamped to what an int64
// holds, as storage/postgres stores times.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}
