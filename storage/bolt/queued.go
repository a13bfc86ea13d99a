package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// queued is an outbox entry as stored: the entry and when it was queued
// (the store's clock; zero for entries written before it was recorded).
type queued struct {
	ledger.OutboxEntry
	QueuedAt time.Time `json:"queuedAt,omitzero"`
}

// Flags of an outbox entry, in the order encodeQueued passes them to
// flagBits.
const (
	flagSegment = 1 << iota
	flagHold
	flagEntryRetain
	flagQueuedAt
	flagEntrySHA
	queuedFlags = flagSegment | flagHold | flagEntryRetain | flagQueuedAt | flagEntrySHA
)

// encodeQueued is q's outbox entry in the binary form of layout 8
// (location.go): flags, seq, kind, ref, key, op, retain-until (when
// flagEntryRetain), queued-at (when flagQueuedAt), the SHA-256 of the
// object's bytes (when flagEntrySHA).
func encodeQueued(q queued) []byte {
	flags := flagBits(q.Segment, q.Hold, !q.RetainUntil.IsZero(), !q.QueuedAt.IsZero(), q.SHA256 != "")
	v := make([]byte, 0, 2+6*binary.MaxVarintLen64+len(q.Kind)+len(q.Ref)+len(q.Key)+len(q.Op)+len(q.SHA256)+4*binary.MaxVarintLen64)
	v = appendStrings(binary.AppendUvarint(append(v, binaryMark, flags), q.Seq), q.Kind, q.Ref, q.Key, q.Op)
	if flags&flagEntryRetain != 0 {
		v = appendTime(v, q.RetainUntil)
	}
	if flags&flagQueuedAt != 0 {
		v = appendTime(v, q.QueuedAt)
	}
	if flags&flagEntrySHA != 0 {
		v = appendStrings(v, q.SHA256)
	}
	return v
}

var errQueued = errors.New("not an outbox entry")

// parseQueued reads an entry encodeQueued wrote.
func parseQueued(v []byte) (queued, error) {
	var q queued
	flags, r, ok := header(v, queuedFlags)
	if !ok {
		return q, errQueued
	}
	q.Seq = r.uvarint(math.MaxUint64)
	q.Kind, q.Ref, q.Key, q.Op = r.str(), r.str(), r.str(), r.str()
	if flags&flagEntryRetain != 0 {
		q.RetainUntil = r.time()
	}
	if flags&flagQueuedAt != 0 {
		q.QueuedAt = r.time()
	}
	if flags&flagEntrySHA != 0 {
		q.SHA256 = r.str()
	}
	if !r.end() {
		return queued{}, errQueued
	}
	q.Segment, q.Hold = flags&flagSegment != 0, flags&flagHold != 0
	return q, nil
}

// decodeQueued reads outbox entry v, in either form (JSON before layout
// 8).
func decodeQueued(v []byte) (queued, error) {
	var q queued
	var err error
	if len(v) > 0 && v[0] == binaryMark {
		q, err = parseQueued(v)
	} else {
		err = json.Unmarshal(v, &q)
	}
	if err != nil {
		return q, fmt.Errorf("decode outbox entry: %w", err)
	}
	return q, nil
}
