package bolt

import (
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"
)

// CompressFromDepth is the outbox depth from which bundles are stored
// compressed, for the tests of package bolt_test.
const CompressFromDepth = compressFromDepth

// SetConversionHooks sets the conversion's batch size and the function
// run after each of its transactions, for the tests of package bolt_test,
// and returns a function that puts them back.
func SetConversionHooks(batch int, after func(pass string) error) (restore func()) {
	oldBatch, oldAfter := convertBatch, afterConvertBatch
	convertBatch, afterConvertBatch = batch, after
	return func() { convertBatch, afterConvertBatch = oldBatch, oldAfter }
}

// SetFileOpened makes each open of a bbolt file tell opened its path,
// before the open waits for the file's lock, until restore.
func SetFileOpened(opened func(path string)) (restore func()) {
	fileOpened.Store(&opened)
	return func() { fileOpened.Store(nil) }
}

// Layout7Values rewrites the object records, outbox entries and
// sequenced leaves of the file btx writes as layouts before 8 wrote
// them: records and entries as JSON, records and leaves compressed
// against the file's dictionary. It returns how many records it
// rewrote.
func Layout7Values(btx *bbolt.Tx) (int, error) {
	c, err := FileCodec(btx)
	if err != nil {
		return 0, err
	}
	records, err := rewriteValues(btx.Bucket(bObjects), func(v []byte) ([]byte, error) {
		loc, err := parseLocation(v)
		if err != nil {
			return nil, err
		}
		js, err := json.Marshal(loc)
		return c.Encode(js), err
	})
	if err != nil {
		return 0, fmt.Errorf("object records: %w", err)
	}
	if _, err := rewriteValues(btx.Bucket(bOutbox), func(v []byte) ([]byte, error) {
		q, err := parseQueued(v)
		if err != nil {
			return nil, err
		}
		return json.Marshal(q)
	}); err != nil {
		return 0, fmt.Errorf("outbox entries: %w", err)
	}
	if _, err := rewriteValues(btx.Bucket(bLogLeaves), func(v []byte) ([]byte, error) { return c.Encode(v), nil }); err != nil {
		return 0, fmt.Errorf("leaves: %w", err)
	}
	return records, nil
}

// rewriteValues replaces every value of b with fn of it (collected
// first: a bucket is not written while it is walked) and returns how many
// it replaced.
func rewriteValues(b *bbolt.Bucket, fn func(v []byte) ([]byte, error)) (int, error) {
	type kv struct{ k, v []byte }
	var out []kv
	err := b.ForEach(func(k, v []byte) error {
		nv, err := fn(v)
		if err != nil {
			return fmt.Errorf("%x: %w", k, err)
		}
		out = append(out, kv{append([]byte(nil), k...), nv})
		return nil
	})
	for _, e := range out {
		if err == nil {
			err = b.Put(e.k, e.v)
		}
	}
	return len(out), err
}

// Layout9IDs writes the pending row numbers and request JWTs (layout 10)
// into their buckets, as layouts before 10 kept them, and removes the
// bucket of their records.
func Layout9IDs(btx *bbolt.Tx) error {
	if err := settlePending(btx); err != nil {
		return err
	}
	return btx.DeleteBucket(bPending)
}

// Layout8IDs rewrites the runs of row numbers by id and of request JWTs
// by hash (layout 9) as layouts before 9 kept them: an entry under each
// key, after Layout9IDs. It returns how many entries the two buckets
// hold.
func Layout8IDs(btx *bbolt.Tx) (int, error) {
	if err := Layout9IDs(btx); err != nil {
		return 0, err
	}
	moved := 0
	for _, name := range [][]byte{bRowSeq, bReqJWT} {
		b, w := btx.Bucket(name), idWidth(name)
		type entry struct{ k, v []byte }
		var all []entry
		for k, v := range idEntries(b, w, nil) {
			all = append(all, entry{append([]byte(nil), k...), append([]byte(nil), v...)})
		}
		if err := btx.DeleteBucket(name); err != nil {
			return 0, err
		}
		b, err := btx.CreateBucket(name)
		if err != nil {
			return 0, err
		}
		for _, e := range all {
			if err := b.Put(e.k, e.v); err != nil {
				return 0, err
			}
		}
		moved += len(all)
	}
	return moved, nil
}
