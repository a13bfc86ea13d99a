package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/pactledger/pactledger/ledger"
)

// Export is a read-only view of a store's file for copying it to another
// row store (`ledgerd migrate --from bbolt:PATH`): every kind of record,
// in the file's key order, decoded from the file's own encodings.
//
// It opens the file read-only under a shared lock: a running ledgerd
// holds the exclusive one, so OpenExport fails with ErrLocked while one
// serves the file, and no ledgerd can open it while the export is open.
// Nothing is written to the file, so Version stays the same from one
// export to the next as long as nothing else writes it.
type Export struct {
	db *bolt.DB
	c  *Codec
	// pending: the keys of bRowSeq and bReqJWT the file's records hold,
	// not yet written there (pending.go).
	pending *pendingIDs
}

// ExportKind names one kind of record an Export holds.
type ExportKind string

// The kinds of records, with the fields of Record each fills. Times are
// nanoseconds since the Unix epoch in N (0 when none was recorded).
const (
	// ExportRows: Name is the row id, Seq its number (its position in the
	// drill pool when ledger.Drillable holds for it), Body the stored row
	// (JSON), Row the decoded row.
	ExportRows ExportKind = "rows"
	// ExportRequestJWTs: Name is the request JWT's hex SHA-256, Ref the id
	// of the first row that used it.
	ExportRequestJWTs ExportKind = "request-JWT index"
	// ExportEvidence: Name is the row id, Body its evidence bundle.
	ExportEvidence ExportKind = "evidence bundles"
	// ExportTombstones: Name is the swept row's id, Body its tombstone (JSON).
	ExportTombstones ExportKind = "tombstones"
	// ExportSnapshots: Name is the snapshot id, Body the JWKS snapshot (JSON).
	ExportSnapshots ExportKind = "JWKS snapshots"
	// ExportSnapshotRetain: Name is the snapshot id, N its object's
	// retain-until.
	ExportSnapshotRetain ExportKind = "snapshot retain records"
	// ExportRevocations: Name is the grant id, Body the revocation (JSON).
	ExportRevocations ExportKind = "revocations"
	// ExportOutbox: Seq is the entry's sequence number, Body the stored
	// entry (JSON: the ledger.OutboxEntry fields and queuedAt), N when it
	// was queued.
	ExportOutbox ExportKind = "outbox entries"
	// ExportFailures: Seq is the outbox entry's, Body its failure record (JSON).
	ExportFailures ExportKind = "outbox failure records"
	// ExportDeadLetters: Seq is the entry's, Body the dead letter (JSON).
	ExportDeadLetters ExportKind = "dead letters"
	// ExportSegmentPlans: Name is the segment key, Body the plan (JSON).
	ExportSegmentPlans ExportKind = "segment plans"
	// ExportObjects: Name is the object key, Body its location (JSON).
	ExportObjects ExportKind = "object records"
	// ExportHolds: Name is the object key, N the open incidents holding it.
	ExportHolds ExportKind = "hold counts"
	// ExportSegmentRefs: Name is the segment key, N the rows packed in it.
	ExportSegmentRefs ExportKind = "segment reference counts"
	// ExportRepeatIncidents: Name is a receipt's first row id, N the
	// incidents its repeats opened.
	ExportRepeatIncidents ExportKind = "repeat incident counts"
	// ExportDeletions: Name is the object key, Body its location (JSON).
	ExportDeletions ExportKind = "deletion queue"
	// ExportDrills: Name is the drill id, Body the report (JSON).
	ExportDrills ExportKind = "drill reports"
	// ExportIncidents: Seq is the incident number, Body the record (JSON).
	ExportIncidents ExportKind = "incidents"
	// ExportAccess: Seq is the record's number, N when it was written,
	// Body the record.
	ExportAccess ExportKind = "access-log records"
	// ExportLogPending: Seq is the queue position, Ref the leaf's ref,
	// Body its bytes.
	ExportLogPending ExportKind = "queued log leaves"
	// ExportLogLeaves: Seq is the leaf index, Ref the leaf's ref, Body its
	// bytes.
	ExportLogLeaves ExportKind = "log leaves"
	// ExportLogIndex: Name is a leaf's ref, Seq its index.
	ExportLogIndex ExportKind = "log leaf index"
	// ExportLogHashes: Seq is the storage index, Body the hash.
	ExportLogHashes ExportKind = "log stored hashes"
	// ExportCheckpoints: Seq is the tree size, Body the signed checkpoint.
	ExportCheckpoints ExportKind = "log checkpoints"
)

// ExportKinds lists every kind, in the order a copy takes them.
var ExportKinds = []ExportKind{
	ExportRows, ExportRequestJWTs, ExportEvidence, ExportTombstones, ExportSnapshots, ExportSnapshotRetain, ExportRevocations,
	ExportOutbox, ExportFailures, ExportDeadLetters, ExportSegmentPlans, ExportObjects, ExportHolds, ExportSegmentRefs,
	ExportRepeatIncidents, ExportDeletions, ExportDrills, ExportIncidents, ExportAccess, ExportLogPending, ExportLogLeaves,
	ExportLogIndex, ExportLogHashes, ExportCheckpoints,
}

// exportKey is how a kind's bucket is keyed.
type exportKey int

const (
	byName   exportKey = iota // a text key: Name
	bySeq                     // an 8-byte big-endian number: Seq
	byID                      // an id (idKey): Name
	byObject                  // an object key (objectKey): Name
	byRow                     // a row number: Name is the row's id
	byReqJWT                  // a request JWT's hash (reqKey): Name is filled from the row
)

// exportBuckets maps each kind to its bucket and key.
var exportBuckets = map[ExportKind]struct {
	bucket []byte
	key    exportKey
}{
	ExportRows: {bRowData, byRow}, ExportRequestJWTs: {bReqJWT, byReqJWT}, ExportEvidence: {bEvidence, byName},
	ExportTombstones: {bTombs, byName}, ExportSnapshots: {bJWKS, byName}, ExportSnapshotRetain: {bSnapKeep, byName},
	ExportRevocations: {bGrants, byName}, ExportOutbox: {bOutbox, bySeq}, ExportFailures: {bOutboxFail, bySeq},
	ExportDeadLetters: {bDead, bySeq}, ExportSegmentPlans: {bPlans, byName}, ExportObjects: {bObjects, byObject},
	ExportHolds: {bHolds, byName}, ExportSegmentRefs: {bSegments, byName}, ExportRepeatIncidents: {bRepeats, byName},
	ExportDeletions: {bDeletes, byName}, ExportDrills: {bDrills, byName}, ExportIncidents: {bIncident, bySeq},
	ExportAccess: {bAccess, bySeq}, ExportLogPending: {bLogPending, bySeq}, ExportLogLeaves: {bLogLeaves, bySeq},
	ExportLogIndex: {bLogIndex, byID}, ExportLogHashes: {bLogHashes, bySeq}, ExportCheckpoints: {bLogCPs, bySeq},
}

// Record is one record of an exported kind; which fields a kind fills is
// said on its constant.
type Record struct {
	// Key is the record's position in the file: Records continues after it.
	Key  []byte
	Name string
	Seq  uint64
	N    int64
	Ref  string
	Body []byte
	// Row is the decoded row (ExportRows only).
	Row *ledger.Row
}

// Counters are the last numbers the store handed out of each sequence:
// the next is larger.
type Counters struct {
	// Outbox numbers outbox entries (and so dead letters and failure records).
	Outbox uint64
	// Incident numbers incidents (INC-<n>).
	Incident uint64
	// Access numbers read-access records.
	Access uint64
	// Leaf numbers queued log leaves.
	Leaf uint64
	// Row numbers rows (and so their positions in the drill pool).
	Row uint64
}

// LogState is the head of the Merkle log: the tree size, its signed
// checkpoint, the size whose tiles are all published, and the
// integrator's record of a divergence of the published log.
type LogState struct {
	Size           int64
	Checkpoint     []byte
	TilesPublished int64
	// Pruned is how many leading leaves the file no longer holds: write-once
	// storage holds their tiles (ledger.LogPruner).
	Pruned int64
	// Diverged is the integrator's record that the log published to
	// write-once storage is not this file's (ledger.LogTx.LogDivergence),
	// nil when there is none.
	Diverged []byte
}

// OpenExport opens the store file at path read-only, waiting up to
// timeout (default 5 s) for the lock: an error wrapping ErrLocked means a
// ledgerd (or another writer) has the file open. It reads files of this
// version's layout only: a file of a newer one is an error wrapping
// ErrLayoutNew. A file marked as moved (MarkMoved) is read as before.
func OpenExport(path string, timeout time.Duration) (*Export, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db, err := openLocked(path, bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s read-only: %w", path, err)
	}
	var version uint64
	var dicts map[uint32][]byte
	var pending *pendingIDs
	var perr error
	verr := view(db, func(tx *bolt.Tx) error {
		version = fileLayout(tx)
		// A moved file's layout is in its mark of the move (moved.go):
		// it is read as before.
		if m, err := readMoved(tx); err == nil && m != nil && version == movedLayout {
			version = m.Layout
		}
		dicts = fileDicts(tx)
		pending, perr = readPending(tx)
		return nil
	})
	if verr != nil {
		db.Close()
		return nil, verr
	}
	if err := newerLayout(version); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if version != layout {
		db.Close()
		return nil, fmt.Errorf("open %s: the file has layout %d and this version reads layout %d: start this version's ledgerd on it once, which converts it, then copy it", path, version, layout)
	}
	if perr != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: reading the pending row numbers: %w", path, perr)
	}
	c, err := newCodec(dicts)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Export{db: db, c: c, pending: pending}, nil
}

// Close releases the file.
func (e *Export) Close() error { return e.db.Close() }

// tx is a store transaction over btx, a transaction on the file.
func (e *Export) tx(btx *bolt.Tx) *tx {
	return &tx{tx: btx, c: e.c, ids: allIDs(e.pending)}
}

// Path returns the file's path.
func (e *Export) Path() string { return e.db.Path() }

// Version returns the id of the last write transaction committed to the
// file: any write changes it.
func (e *Export) Version() (uint64, error) {
	var v uint64
	err := view(e.db, func(tx *bolt.Tx) error {
		v = uint64(tx.ID())
		return nil
	})
	return v, err
}

// Records returns up to n records of kind whose key sorts after after
// (nil: from the first), in key order. Fewer than n means the kind ends
// there. A kind the file has no bucket for (an older file) has none.
func (e *Export) Records(kind ExportKind, after []byte, n int) ([]Record, error) {
	spec, ok := exportBuckets[kind]
	if !ok {
		return nil, fmt.Errorf("%w: no exported kind %q", ledger.ErrInvalid, kind)
	}
	if kind == ExportLogIndex {
		return e.logIndexRecords(after, n)
	}
	var out []Record
	err := view(e.db, func(btx *bolt.Tx) error {
		b := btx.Bucket(spec.bucket)
		if b == nil {
			return nil
		}
		t := e.tx(btx)
		for k, v := range t.entriesAfter(spec.bucket, after) {
			if len(out) == n {
				break
			}
			r, err := exportRecord(e.c, kind, spec.key, k, v)
			if err == nil {
				err = nameByRow(t, kind, k, v, &r)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// nameByRow fills in what a record keyed or valued by a row's number
// names by the row's id: a request JWT's hash (Name: since layout 7 its
// key holds part of it) and its first row (Ref), and since
// layout 4 a stored row's evidence bundle and evidence record (Name).
func nameByRow(t *tx, kind ExportKind, k, v []byte, r *Record) error {
	var seq []byte
	switch {
	case kind == ExportRequestJWTs:
		seq = v
	case kind == ExportEvidence && len(k) == 8:
		seq = k
	case kind == ExportObjects && len(k) == 9 && k[0] == kindRowObject:
		seq = k[1:]
	default:
		return nil
	}
	row, err := t.rowAt(seq)
	if err != nil {
		return err
	}
	switch kind {
	case ExportRequestJWTs:
		r.Name, r.Ref = row.RequestJWTSHA256, row.ID
	case ExportEvidence:
		r.Name = row.ID
	case ExportObjects:
		r.Name = ledger.EvidenceKey(row.ID)
	}
	return nil
}

// exportRecord decodes one key and value of kind (both are copied).
func exportRecord(c *Codec, kind ExportKind, key exportKey, k, v []byte) (Record, error) {
	r := Record{Key: append([]byte(nil), k...)}
	switch key {
	case byName:
		r.Name = string(k)
	case byID:
		r.Name = idString(k)
	case byObject:
		r.Name = objectName(k)
	case bySeq, byRow:
		if len(k) != 8 {
			return r, fmt.Errorf("key %x is not a number", k)
		}
		r.Seq = binary.BigEndian.Uint64(k)
	}
	switch kind {
	case ExportRows:
		body, err := c.Decode(v)
		if err != nil {
			return r, fmt.Errorf("decode row %x: %w", k, err)
		}
		r.Body = append([]byte(nil), body...)
		r.Row = new(ledger.Row)
		if err := json.Unmarshal(body, r.Row); err != nil {
			return r, fmt.Errorf("decode row %x: %w", k, err)
		}
		r.Name = r.Row.ID
	case ExportObjects:
		body, err := recordJSON(c, r.Name, v)
		if err != nil {
			return r, err
		}
		r.Body = body
	case ExportEvidence:
		b, err := decompressBundle(v)
		if err != nil {
			return r, fmt.Errorf("evidence of %s: %w", k, err)
		}
		r.Body = append([]byte(nil), b...)
	case ExportSnapshotRetain, ExportHolds, ExportSegmentRefs, ExportRepeatIncidents:
		if len(v) != 8 {
			return r, fmt.Errorf("%s: value of %d bytes, want 8", k, len(v))
		}
		r.N = int64(binary.BigEndian.Uint64(v))
	case ExportOutbox:
		q, err := decodeQueued(v)
		if err != nil {
			return r, fmt.Errorf("outbox entry %d: %w", r.Seq, err)
		}
		if !q.QueuedAt.IsZero() {
			r.N = q.QueuedAt.UnixNano()
		}
		// As JSON, the form of layouts before 8.
		if r.Body, err = json.Marshal(q); err != nil {
			return r, fmt.Errorf("outbox entry %d: %w", r.Seq, err)
		}
	case ExportAccess:
		a, err := decodeAccess(k, v)
		if err != nil {
			return r, err
		}
		r.N, r.Body = a.At.UnixNano(), a.Body
	case ExportLogPending, ExportLogLeaves:
		ref, data, err := decodeLeaf(c, v)
		if err != nil {
			return r, fmt.Errorf("leaf %x: %w", k, err)
		}
		r.Ref, r.Body = ref, data
	default:
		r.Body = append([]byte(nil), v...)
	}
	return r, nil
}

// logIndexRecords is Records for ExportLogIndex: a stored row's leaf
// index is kept by its number in bRowLeaves (beside the number in bRowSeq
// before layout 4), any other ref's in bLogIndex; records follow the rows
// by id, then the other refs. A record's Key is 1 or 2 for the bucket, then its key.
func (e *Export) logIndexRecords(after []byte, n int) ([]Record, error) {
	var out []Record
	err := view(e.db, func(btx *bolt.Tx) error {
		for _, part := range []struct {
			mark   byte
			bucket []byte
		}{{1, bRowSeq}, {2, bLogIndex}} {
			if len(after) > 0 && after[0] > part.mark {
				continue
			}
			var from []byte
			if len(after) > 0 && after[0] == part.mark {
				from = after[1:]
			}
			for k, v := range e.tx(btx).entriesAfter(part.bucket, from) {
				if len(out) == n {
					break
				}
				if part.mark == 1 && len(v) == 8 {
					var err error
					if v, err = rowLeaf(btx.Bucket(bRowLeaves), v); err != nil {
						return fmt.Errorf("%s: leaf index of %x: %w", ExportLogIndex, k, err)
					}
				}
				if part.mark == 1 && len(v) != 16 && len(v) != 8 {
					continue // a row without a leaf yet
				}
				if len(v) < 8 {
					return fmt.Errorf("%s: leaf index of %x: %d bytes", ExportLogIndex, k, len(v))
				}
				out = append(out, Record{Key: append([]byte{part.mark}, k...), Name: idString(k), Seq: binary.BigEndian.Uint64(v[len(v)-8:])})
			}
		}
		return nil
	})
	return out, err
}

// Counters returns the last number each sequence handed out.
func (e *Export) Counters() (Counters, error) {
	var c Counters
	err := view(e.db, func(btx *bolt.Tx) error {
		if b := btx.Bucket(bOutbox); b != nil {
			c.Outbox = b.Sequence()
		}
		if b := btx.Bucket(bAccess); b != nil {
			c.Access = b.Sequence()
		}
		if m := btx.Bucket(bMeta); m != nil {
			c.Incident = metaUint(m, kIncidentSeq)
			c.Leaf = metaUint(m, kLogPendingN)
			c.Row = metaUint(m, kRowSeqN)
		}
		return nil
	})
	return c, err
}

// metaUint reads a counter of the meta bucket: 0 when absent.
func metaUint(m *bolt.Bucket, k []byte) uint64 {
	if v := m.Get(k); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// LogState returns the head of the Merkle log (all zero without one).
func (e *Export) LogState() (LogState, error) {
	var s LogState
	err := view(e.db, func(btx *bolt.Tx) error {
		m := btx.Bucket(bMeta)
		if m == nil {
			return nil
		}
		s.Size = int64(metaUint(m, kLogSize))
		if v := m.Get(kLogHead); v != nil {
			s.Checkpoint = append([]byte(nil), v...)
		}
		s.TilesPublished = int64(metaUint(m, kLogTiles))
		s.Pruned = int64(metaUint(m, kLogPruned))
		if v := m.Get(kLogDiverged); v != nil {
			s.Diverged = append([]byte(nil), v...)
		}
		return nil
	})
	return s, err
}
