package bolt

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/pactledger/pactledger/ledger"
)

func (t *tx) Enqueue(e ledger.OutboxEntry) error {
	b := t.b(bOutbox)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	e.Seq = seq
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), v); err != nil {
		return err
	}
	_, err = t.counter(kOutboxN, 1)
	return err
}

func (t *tx) Outbox(n int) ([]ledger.OutboxEntry, error) {
	var out []ledger.OutboxEntry
	c := t.b(bOutbox).Cursor()
	for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
		var e ledger.OutboxEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("decode outbox entry: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

func (t *tx) Uploaded(e ledger.OutboxEntry, loc ledger.Location) error {
	k := binary.BigEndian.AppendUint64(nil, e.Seq)
	if t.b(bOutbox).Get(k) == nil {
		return nil
	}
	if err := t.b(bOutbox).Delete(k); err != nil {
		return err
	}
	if _, err := t.counter(kOutboxN, -1); err != nil {
		return err
	}
	if e.Op == "" && loc.Length > 0 {
		if _, err := t.count(bSegments, loc.Key, 1); err != nil {
			return err
		}
	}
	v, err := json.Marshal(loc)
	if err != nil {
		return err
	}
	return t.b(bObjects).Put([]byte(e.Key), v)
}

func (t *tx) Object(key string) (ledger.Location, error) {
	var loc ledger.Location
	v := t.b(bObjects).Get([]byte(key))
	if v == nil {
		return loc, ledger.ErrNotFound
	}
	err := json.Unmarshal(v, &loc)
	return loc, err
}

func (t *tx) OutboxDepth() (int, error) {
	v := t.b(bMeta).Get(kOutboxN)
	if len(v) != 8 {
		return 0, nil
	}
	return int(binary.BigEndian.Uint64(v)), nil
}
