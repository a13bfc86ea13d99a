package bolt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// Outbox buckets beside the outbox itself.
var (
	// bPlans holds segment plans by segment key.
	bPlans = []byte("segment_plans")
	// bOutboxFail holds the failure record of an outbox entry by its seq.
	bOutboxFail = []byte("outbox_failures")
	// bDead holds dead letters by the seq their entry had in the outbox.
	bDead = []byte("dead_letters")

	kDeadN = []byte("dead_n")
)

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func (t *tx) Enqueue(e ledger.OutboxEntry, at time.Time) error {
	b := t.b(bOutbox)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	e.Seq = seq
	if err := b.Put(seqKey(seq), encodeQueued(queued{OutboxEntry: e, QueuedAt: at.UTC()})); err != nil {
		return err
	}
	_, err = t.counter(kOutboxN, 1)
	return err
}

func (t *tx) Outbox(n int) ([]ledger.OutboxEntry, error) {
	var out []ledger.OutboxEntry
	c := t.b(bOutbox).Cursor()
	for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
		q, err := decodeQueued(v)
		if err != nil {
			return nil, err
		}
		out = append(out, q.OutboxEntry)
	}
	return out, nil
}

// OutboxOfKind implements ledger.KindOutbox.
func (t *tx) OutboxOfKind(kind string) ([]ledger.OutboxEntry, error) {
	var out []ledger.OutboxEntry
	c := t.b(bOutbox).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		q, err := decodeQueued(v)
		if err != nil {
			return nil, err
		}
		if q.Kind == kind {
			out = append(out, q.OutboxEntry)
		}
	}
	return out, nil
}

// Claim returns the first n entries: the file lock keeps one uploader, so
// no other holder can have claimed any.
func (t *tx) Claim(n int, _ string, _ time.Duration) ([]ledger.OutboxEntry, error) {
	return t.Outbox(n)
}

// HoldsClaim implements ledger.Outbox: one uploader, so the entries need
// only be queued.
func (t *tx) HoldsClaim(_ string, seqs []uint64) (bool, error) {
	for _, seq := range seqs {
		if t.get(bOutbox, seqKey(seq)) == nil {
			return false, nil
		}
	}
	return true, nil
}

// Queued implements ledger.Outbox.
func (t *tx) Queued(seqs []uint64) ([]uint64, error) {
	var out []uint64
	for _, seq := range seqs {
		if t.get(bOutbox, seqKey(seq)) != nil {
			out = append(out, seq)
		}
	}
	slices.Sort(out)
	return out, nil
}

// QueuedPuts implements ledger.Outbox: one pass over the outbox, an
// entry in the binary form decoded only where it holds one of the keys'
// bytes (an entry still in JSON, from before layout 8, always).
func (t *tx) QueuedPuts(keys []string) ([]ledger.OutboxEntry, error) {
	want := make(map[string]bool, len(keys))
	needles := make([][]byte, len(keys))
	for i, k := range keys {
		want[k], needles[i] = true, []byte(k)
	}
	var out []ledger.OutboxEntry
	c := t.b(bOutbox).Cursor()
	for k, v := c.First(); k != nil && len(want) > 0; k, v = c.Next() {
		if len(v) > 0 && v[0] == binaryMark && !slices.ContainsFunc(needles, func(n []byte) bool { return bytes.Contains(v, n) }) {
			continue
		}
		q, err := decodeQueued(v)
		if err != nil {
			return nil, err
		}
		if q.Op == "" && want[q.Key] {
			out = append(out, q.OutboxEntry)
			delete(want, q.Key)
		}
	}
	return out, nil
}

// ClaimEntries implements ledger.Outbox: one uploader, so those still
// queued.
func (t *tx) ClaimEntries(seqs []uint64, _ string, _ time.Duration) ([]ledger.OutboxEntry, error) {
	var out []ledger.OutboxEntry
	for _, seq := range seqs {
		v := t.get(bOutbox, seqKey(seq))
		if v == nil {
			continue
		}
		q, err := decodeQueued(v)
		if err != nil {
			return nil, err
		}
		out = append(out, q.OutboxEntry)
	}
	slices.SortFunc(out, func(a, b ledger.OutboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

func (t *tx) Dequeue(seq uint64) (bool, error) {
	k := seqKey(seq)
	if t.get(bOutbox, k) == nil {
		return false, nil
	}
	if err := t.b(bOutbox).Delete(k); err != nil {
		return false, err
	}
	if err := t.b(bOutboxFail).Delete(k); err != nil {
		return false, err
	}
	_, err := t.counter(kOutboxN, -1)
	return true, err
}

func (t *tx) SetObject(key string, loc ledger.Location) error {
	return t.b(bObjects).Put(t.objectKey(key), encodeLocation(loc))
}

func (t *tx) DeleteObject(key string) error { return t.b(bObjects).Delete(t.objectKey(key)) }

// ObjectsUnder implements ledger.References. Keys other than a row's
// evidence or a snapshot's are stored as their text, so the records under
// such a prefix are one run of the bucket.
func (t *tx) ObjectsUnder(prefix, after string, n int) ([]ledger.Location, error) {
	start := []byte(prefix)
	if after >= prefix {
		start = append([]byte(after), 0)
	}
	var out []ledger.Location
	c := t.cursor(bObjects)
	for k, v := c.Seek(start); k != nil && len(out) < n && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
		if len(k) > 0 && k[0] < 0x20 {
			break // a key of objectKinds or a stored row's: not under a text prefix
		}
		loc, err := decodeLocation(t.c, string(k), v)
		if err != nil {
			return nil, err
		}
		loc.Key = string(k)
		out = append(out, loc)
	}
	return out, nil
}

func (t *tx) Object(key string) (ledger.Location, error) {
	var loc ledger.Location
	v := t.get(bObjects, t.objectKey(key))
	if v == nil {
		return loc, ledger.ErrNotFound
	}
	return decodeLocation(t.c, key, v)
}

// objectKinds are the object keys that name an id: a row's evidence
// (ledger.EvidenceKey) and a JWKS snapshot (ledger.SnapshotKey).
var objectKinds = []struct{ prefix, suffix string }{{"rows/", ".json"}, {"jwks/", ".json"}}

// objectKey is the key of object record key: for a key of objectKinds,
// the kind's number (1, 2) and the id's 32 bytes; any other key is its
// text (which never starts with a byte below 0x20).
func objectKey(key string) []byte {
	for i, k := range objectKinds {
		if rest, ok := strings.CutPrefix(key, k.prefix); ok {
			if id, ok := strings.CutSuffix(rest, k.suffix); ok && isHexID(id) {
				return append([]byte{byte(i + 1)}, idKey(id)...)
			}
		}
	}
	return []byte(key)
}

// kindRowObject starts the key of a stored row's evidence record: the
// kind, then the row's number (layout 4: the uploader appends these).
const kindRowObject = 3

// rowObjectKey is the key of the record of row number seq's evidence.
func rowObjectKey(seq []byte) []byte { return append([]byte{kindRowObject}, seq...) }

// objectKey is the key of object record key in this file: a stored row's
// evidence by the row's number (rowObjectKey), any other by the package
// function objectKey (the evidence of a row swept from the store by the
// row's id).
func (t *tx) objectKey(key string) []byte {
	if rest, ok := strings.CutPrefix(key, objectKinds[0].prefix); ok {
		if id, ok := strings.CutSuffix(rest, objectKinds[0].suffix); ok && isHexID(id) {
			if seq := t.seqOf(id); seq != nil {
				return rowObjectKey(seq)
			}
		}
	}
	return objectKey(key)
}

// isEvidenceRecord reports whether k is the key of the record of a row's
// evidence: by the row's number, or by its id.
func isEvidenceRecord(k []byte) bool {
	return (len(k) == 33 && k[0] == 1) || (len(k) == 9 && k[0] == kindRowObject)
}

// firstEvidenceRecord returns the first record of a row's evidence in
// bucket b, or nil: stored rows' records follow the snapshots'.
func firstEvidenceRecord(b *bolt.Bucket) []byte {
	c := b.Cursor()
	if k, v := c.Seek([]byte{kindRowObject}); isEvidenceRecord(k) {
		return v
	}
	if k, v := c.First(); isEvidenceRecord(k) {
		return v
	}
	return nil
}

// objectName is the object key objectKey made k from.
func objectName(k []byte) string {
	if len(k) == 33 && k[0] >= 1 && int(k[0]) <= len(objectKinds) {
		kind := objectKinds[k[0]-1]
		return kind.prefix + idString(k[1:]) + kind.suffix
	}
	return string(k)
}

func (t *tx) OutboxDepth() (int, error) { return t.outboxDepth(), nil }

// outboxDepth is the count of entries in the outbox, kept with them.
func (t *tx) outboxDepth() int {
	v := t.get(bMeta, kOutboxN)
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

func (t *tx) OldestQueued() (time.Time, error) {
	_, v := t.b(bOutbox).Cursor().First()
	if v == nil {
		return time.Time{}, nil
	}
	q, err := decodeQueued(v)
	return q.QueuedAt, err
}

func (t *tx) PlanSegment(p ledger.SegmentPlan) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return t.b(bPlans).Put([]byte(p.Key), v)
}

func (t *tx) SegmentPlans() ([]ledger.SegmentPlan, error) {
	var out []ledger.SegmentPlan
	err := t.b(bPlans).ForEach(func(k, v []byte) error {
		var p ledger.SegmentPlan
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("decode segment plan %s: %w", k, err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

func (t *tx) DropSegmentPlan(key string) error { return t.b(bPlans).Delete([]byte(key)) }

func (t *tx) Failure(seq uint64) (ledger.OutboxFailure, error) {
	var f ledger.OutboxFailure
	v := t.get(bOutboxFail, seqKey(seq))
	if v == nil {
		return f, nil
	}
	if err := json.Unmarshal(v, &f); err != nil {
		return f, fmt.Errorf("decode outbox failure %d: %w", seq, err)
	}
	return f, nil
}

func (t *tx) SetFailure(seq uint64, f ledger.OutboxFailure) error {
	v, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return t.b(bOutboxFail).Put(seqKey(seq), v)
}

func (t *tx) PutDeadLetter(d ledger.DeadLetter) error {
	k := seqKey(d.Entry.Seq)
	isNew := t.get(bDead, k) == nil
	v, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := t.b(bDead).Put(k, v); err != nil {
		return err
	}
	if !isNew {
		return nil
	}
	_, err = t.counter(kDeadN, 1)
	return err
}

func (t *tx) DeadLetters(after uint64, n int) ([]ledger.DeadLetter, error) {
	var out []ledger.DeadLetter
	c := t.b(bDead).Cursor()
	for k, v := c.Seek(seqKey(after + 1)); k != nil && len(out) < n; k, v = c.Next() {
		var d ledger.DeadLetter
		if err := json.Unmarshal(v, &d); err != nil {
			return nil, fmt.Errorf("decode dead letter: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

func (t *tx) DeadLetterCount() (int, error) {
	v := t.get(bMeta, kDeadN)
	if len(v) != 8 {
		return 0, nil
	}
	return int(binary.BigEndian.Uint64(v)), nil
}

func (t *tx) RemoveDeadLetter(seq uint64) error {
	k := seqKey(seq)
	if t.get(bDead, k) == nil {
		return nil
	}
	if err := t.b(bDead).Delete(k); err != nil {
		return err
	}
	_, err := t.counter(kDeadN, -1)
	return err
}
