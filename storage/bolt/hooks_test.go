package bolt

import (
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"
)

// SetConversionHooks sets the conversion's batch size and the function
// run after each of its transactions, for the tests of package bolt_test,
// and returns a function that puts them back.
func SetConversionHooks(batch int, after func(pass string) error) (restore func()) {
	oldBatch, oldAfter := convertBatch, afterConvertBatch
	convertBatch, afterConvertBatch = batch, after
	return func() { convertBatch, afterConvertBatch = oldBatch, oldAfter }
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
	b := btx.Bucket(bObjects)
	type kv struct{ k, v []byte }
	var out []kv
	err = b.ForEach(func(k, v []byte) error {
		loc, err := parseLocation(v)
		if err != nil {
			return fmt.Errorf("record %x: %w", k, err)
		}
		js, err := json.Marshal(loc)
		if err != nil {
			return err
		}
		out = append(out, kv{append([]byte(nil), k...), c.Encode(js)})
		return nil
	})
	if err == nil {
		var entries []kv
		ob := btx.Bucket(bOutbox)
		err = ob.ForEach(func(k, v []byte) error {
			q, err := parseQueued(v)
			if err != nil {
				return fmt.Errorf("outbox entry %x: %w", k, err)
			}
			js, err := json.Marshal(q)
			entries = append(entries, kv{append([]byte(nil), k...), js})
			return err
		})
		for _, e := range entries {
			if err == nil {
				err = ob.Put(e.k, e.v)
			}
		}
	}
	n := len(out)
	if err == nil {
		err = btx.Bucket(bLogLeaves).ForEach(func(k, v []byte) error {
			out = append(out, kv{append([]byte(nil), k...), c.Encode(v)})
			return nil
		})
	}
	for i, e := range out {
		if err == nil && i < n {
			err = b.Put(e.k, e.v)
		} else if err == nil {
			err = btx.Bucket(bLogLeaves).Put(e.k, e.v)
		}
	}
	return n, err
}
