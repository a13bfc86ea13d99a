package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Layout 6 (docs/design/023): an index holds runs of entries. A run's key
// is the key of its first entry, as layouts 2 to 5 keyed every entry: the
// indexed value and 0x00 (no prefix in the expiry index), the time (8
// bytes) and the row number (8 bytes).
// Its value packs the entries after the first, in key order: for each,
// the difference of its time from the one before it (uvarint) and of its
// row number (zigzag varint). A key whose value is empty is a run of one,
// so every layout-5 key reads as a run. An entry costs a few bytes
// instead of a key of its own with bbolt's 16-byte header.

// maxRunBytes bounds a run's packed value: an insert rewrites at most
// this, and a page holds several runs.
const maxRunBytes = 480

// entryKeyLen is the bytes an entry's key adds to its value's prefix.
const entryKeyLen = 16

// posting is one entry of an index: a row's time key and number.
type posting struct{ time, seq uint64 }

func (p posting) less(q posting) bool {
	return p.time < q.time || (p.time == q.time && p.seq < q.seq)
}

// cmpPosting orders entries as their keys sort.
func cmpPosting(a, b posting) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}

// key is p's key under prefix (the value and 0x00).
func (p posting) key(prefix []byte) []byte {
	k := make([]byte, 0, len(prefix)+entryKeyLen)
	k = append(k, prefix...)
	k = binary.BigEndian.AppendUint64(k, p.time)
	return binary.BigEndian.AppendUint64(k, p.seq)
}

var errBadRun = errors.New("index run damaged")

// runHead returns the first entry of the run keyed k, when k is a run
// key under prefix.
func runHead(k, prefix []byte) (posting, bool) {
	if len(k) != len(prefix)+entryKeyLen || !bytes.HasPrefix(k, prefix) {
		return posting{}, false
	}
	k = k[len(prefix):]
	return posting{binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:])}, true
}

// decodeRun returns the entries of the run whose first entry is first
// and whose value is v.
func decodeRun(first posting, v []byte) ([]posting, error) {
	run := make([]posting, 1, 1+len(v)/3)
	run[0] = first
	p := first
	for len(v) > 0 {
		dt, n := binary.Uvarint(v)
		if n <= 0 {
			return nil, errBadRun
		}
		v = v[n:]
		ds, m := binary.Varint(v)
		if m <= 0 {
			return nil, errBadRun
		}
		v = v[m:]
		p = posting{p.time + dt, uint64(int64(p.seq) + ds)}
		run = append(run, p)
	}
	return run, nil
}

// walkRun calls each with the entries of the run whose first entry is
// first and whose value is v, in order, without decoding it into a slice,
// until each returns false; it returns the last entry passed to each.
func walkRun(first posting, v []byte, each func(posting) bool) (posting, error) {
	p := first
	if !each(p) {
		return p, nil
	}
	for len(v) > 0 {
		dt, n := binary.Uvarint(v)
		if n <= 0 {
			return p, errBadRun
		}
		ds, m := binary.Varint(v[n:])
		if m <= 0 {
			return p, errBadRun
		}
		v = v[n+m:]
		p = posting{p.time + dt, uint64(int64(p.seq) + ds)}
		if !each(p) {
			return p, nil
		}
	}
	return p, nil
}

// lastOf returns the last entry of the run whose first entry is first
// and whose value is v.
// It runs for each index entry a row adds (insertEntry), so it reads the
// deltas in a loop of its own rather than through walkRun's callback.
func lastOf(first posting, v []byte) (posting, error) {
	t, s := first.time, int64(first.seq)
	for len(v) > 0 {
		dt, n := binary.Uvarint(v)
		if n <= 0 {
			return posting{t, uint64(s)}, errBadRun
		}
		ds, m := binary.Varint(v[n:])
		if m <= 0 {
			return posting{t, uint64(s)}, errBadRun
		}
		v = v[n+m:]
		t, s = t+dt, s+ds
	}
	return posting{t, uint64(s)}, nil
}

// appendDelta appends q's difference from p, the entry before it.
func appendDelta(v []byte, p, q posting) []byte {
	v = binary.AppendUvarint(v, q.time-p.time)
	return binary.AppendVarint(v, int64(q.seq-p.seq))
}

// encodeRun packs the entries of run after the first.
func encodeRun(run []posting) []byte {
	if len(run) < 2 {
		return nil
	}
	v := make([]byte, 0, 6*(len(run)-1))
	for i := 1; i < len(run); i++ {
		v = appendDelta(v, run[i-1], run[i])
	}
	return v
}

// runAt returns the key (a copy), first entry and value of the run under
// prefix whose first entry's key is the greatest below k, with the cursor
// left on it; ok is false when there is none. The value is the file's
// memory: read it before the bucket changes.
func runAt(c *bolt.Cursor, prefix, k []byte) (rk []byte, first posting, rv []byte, ok bool) {
	sk, _ := c.Seek(k)
	return runBeforeSought(c, prefix, sk)
}

// runBeforeSought is runAt for a cursor just sought to k, where it found
// sk.
func runBeforeSought(c *bolt.Cursor, prefix, sk []byte) (rk []byte, first posting, rv []byte, ok bool) {
	if sk == nil {
		rk, rv = last(c)
	} else {
		rk, rv = prev(c, sk)
	}
	if first, ok = runHead(rk, prefix); !ok {
		return nil, posting{}, nil, false
	}
	return append([]byte(nil), rk...), first, rv, true
}

// runBefore is runAt with the run decoded.
func runBefore(c *bolt.Cursor, prefix, k []byte) (rk []byte, run []posting, ok bool, err error) {
	rk, first, rv, ok := runAt(c, prefix, k)
	if !ok {
		return nil, nil, false, nil
	}
	if run, err = decodeRun(first, rv); err != nil {
		return nil, nil, false, fmt.Errorf("%w at %x", err, rk)
	}
	return rk, run, true, nil
}

// insertEntry adds p to the index under prefix. An entry already there
// stays as it is.
func insertEntry(b *bolt.Bucket, prefix []byte, p posting) error {
	return insertAt(b.Cursor(), prefix, p)
}

// insertAt is insertEntry with a cursor on the index, which it moves.
func insertAt(c *bolt.Cursor, prefix []byte, p posting) error {
	b := c.Bucket()
	k := p.key(prefix)
	sk, _ := c.Seek(k)
	if bytes.Equal(sk, k) {
		return nil
	}
	rk, first, rv, ok := runBeforeSought(c, prefix, sk)
	if !ok {
		return b.Put(k, nil) // before every run of the value: a run of its own
	}
	last, err := lastOf(first, rv)
	if err != nil {
		return fmt.Errorf("%w at %x", err, rk)
	}
	if last.less(p) {
		// After the run's last entry, as most are: appended as it is.
		if d := appendDelta(nil, last, p); len(rv)+len(d) <= maxRunBytes {
			return b.Put(rk, append(append(make([]byte, 0, len(rv)+len(d)), rv...), d...))
		}
		return b.Put(k, nil) // the run is full: p starts the next
	}
	run, err := decodeRun(first, rv)
	if err != nil {
		return fmt.Errorf("%w at %x", err, rk)
	}
	i, found := slices.BinarySearchFunc(run, p, cmpPosting)
	if found {
		return nil
	}
	run = slices.Insert(run, i, p)
	if v := encodeRun(run); len(v) <= maxRunBytes {
		return b.Put(rk, v)
	}
	half := len(run) / 2
	if err := b.Put(rk, encodeRun(run[:half])); err != nil {
		return err
	}
	return b.Put(run[half].key(prefix), encodeRun(run[half:]))
}

// hasEntry reports whether the index under prefix holds p, with a cursor
// on the index, which it moves.
func hasEntry(c *bolt.Cursor, prefix []byte, p posting) (bool, error) {
	k := p.key(prefix)
	sk, _ := c.Seek(k)
	if bytes.Equal(sk, k) {
		return true, nil
	}
	rk, first, rv, ok := runBeforeSought(c, prefix, sk)
	if !ok {
		return false, nil
	}
	found := false
	if _, err := walkRun(first, rv, func(q posting) bool {
		found = q == p
		return q.less(p)
	}); err != nil {
		return false, fmt.Errorf("%w at %x", err, rk)
	}
	return found, nil
}

// deleteEntry removes p from the index under prefix, if it is there.
func deleteEntry(b *bolt.Bucket, prefix []byte, p posting) error {
	k := p.key(prefix)
	c := b.Cursor()
	sk, sv := c.Seek(k)
	if bytes.Equal(sk, k) {
		run, err := decodeRun(p, sv)
		if err != nil {
			return fmt.Errorf("%w at %x", err, k)
		}
		if err := b.Delete(k); err != nil {
			return err
		}
		if len(run) == 1 {
			return nil
		}
		return b.Put(run[1].key(prefix), encodeRun(run[1:]))
	}
	rk, first, rv, ok := runBeforeSought(c, prefix, sk)
	if !ok {
		return nil
	}
	run, err := decodeRun(first, rv)
	if err != nil {
		return fmt.Errorf("%w at %x", err, rk)
	}
	i := slices.Index(run, p)
	if i < 0 {
		return nil
	}
	return b.Put(rk, encodeRun(slices.Delete(run, i, i+1)))
}

// runCursor walks an index's entries under one prefix, either way.
type runCursor struct {
	c      *bolt.Cursor
	prefix []byte
	run    []posting
	i      int // run[i] is the entry last returned
}

// below positions rc at the last entry whose key is below bound (a full
// entry key, or a prefix of one) and returns it.
func (rc *runCursor) below(bound []byte) (posting, bool, error) {
	_, run, ok, err := runBefore(rc.c, rc.prefix, bound)
	if err != nil || !ok {
		return posting{}, false, err
	}
	rc.run = run
	// The run's first entry is below bound; some of the later ones may not be.
	rc.i = len(run) - 1
	for rc.i > 0 && bytes.Compare(run[rc.i].key(rc.prefix), bound) >= 0 {
		rc.i--
	}
	return run[rc.i], true, nil
}

// prev returns the entry before the one last returned.
func (rc *runCursor) prev() (posting, bool, error) {
	if rc.i > 0 {
		rc.i--
		return rc.run[rc.i], true, nil
	}
	if ok, err := rc.load(prev(rc.c, rc.run[0].key(rc.prefix))); err != nil || !ok {
		return posting{}, false, err
	}
	rc.i = len(rc.run) - 1
	return rc.run[rc.i], true, nil
}

// above positions rc at the first entry whose key is above bound, or at
// the first entry when bound is nil, and returns it.
func (rc *runCursor) above(bound []byte) (posting, bool, error) {
	if bound == nil {
		return rc.first(rc.c.Seek(rc.prefix))
	}
	// Entry keys under a prefix have one length: above bound is at or
	// above bound and a zero byte.
	succ := append(append([]byte(nil), bound...), 0)
	_, run, ok, err := runBefore(rc.c, rc.prefix, succ)
	if err != nil {
		return posting{}, false, err
	}
	if !ok {
		return rc.first(rc.c.Seek(succ))
	}
	rc.run, rc.i = run, 0
	for rc.i < len(run) && bytes.Compare(run[rc.i].key(rc.prefix), bound) <= 0 {
		rc.i++
	}
	if rc.i < len(run) {
		return run[rc.i], true, nil
	}
	return rc.first(rc.c.Next())
}

// next returns the entry after the one last returned.
func (rc *runCursor) next() (posting, bool, error) {
	if rc.i+1 < len(rc.run) {
		rc.i++
		return rc.run[rc.i], true, nil
	}
	return rc.first(rc.c.Next())
}

// first takes the run keyed k with value v, the cursor's position, and
// returns its first entry.
func (rc *runCursor) first(k, v []byte) (posting, bool, error) {
	if ok, err := rc.load(k, v); err != nil || !ok {
		return posting{}, false, err
	}
	rc.i = 0
	return rc.run[0], true, nil
}

// load makes the run keyed k with value v the current one; false when k
// is not a run under the prefix (or the end).
func (rc *runCursor) load(k, v []byte) (bool, error) {
	head, ok := runHead(k, rc.prefix)
	if !ok {
		return false, nil
	}
	run, err := decodeRun(head, v)
	if err != nil {
		return false, fmt.Errorf("%w at %x", err, k)
	}
	rc.run = run
	return true, nil
}

// IndexRunKeys yields the key of each entry of the run keyed k with value
// v under prefix, as layout 5 keyed every entry: for tests and tools that
// read the file directly.
func IndexRunKeys(prefix, k, v []byte) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		first, ok := runHead(k, prefix)
		if !ok {
			yield(nil, fmt.Errorf("%w: %x is not a run under %x", errBadRun, k, prefix))
			return
		}
		run, err := decodeRun(first, v)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, p := range run {
			if !yield(p.key(prefix), nil) {
				return
			}
		}
	}
}

// A stored row's leaf index (layout 6): runs under no prefix in
// bRowLeaves of entries whose time is the row's number and whose number is
// the leaf's index. The integrator takes leaves in commit order, so the
// entries are appended and both numbers mostly grow by one: two bytes an
// entry.

// rowLeaf returns the leaf index b holds for the row numbered seq (8
// bytes), as 8 bytes; nil when it holds none.
func rowLeaf(b *bolt.Bucket, seq []byte) ([]byte, error) {
	n := binary.BigEndian.Uint64(seq)
	rk, first, rv, ok := runAt(b.Cursor(), nil, posting{n, ^uint64(0)}.key(nil))
	if !ok {
		return nil, nil
	}
	// Entries are in order of the row's number: stop at the first one
	// not below n (the run is read where it lies, not decoded into a
	// slice).
	p, err := walkRun(first, rv, func(p posting) bool { return p.time < n })
	if err != nil {
		return nil, fmt.Errorf("%w at %x", err, rk)
	}
	if p.time != n {
		return nil, nil
	}
	return binary.BigEndian.AppendUint64(nil, p.seq), nil
}

// putRowLeaf records that the row numbered seq has its leaf at index.
func putRowLeaf(b *bolt.Bucket, seq []byte, index uint64) error {
	old, err := rowLeaf(b, seq)
	if err != nil {
		return err
	}
	n := binary.BigEndian.Uint64(seq)
	if old != nil {
		if binary.BigEndian.Uint64(old) == index {
			return nil
		}
		if err := deleteEntry(b, nil, posting{n, binary.BigEndian.Uint64(old)}); err != nil {
			return err
		}
	}
	return insertEntry(b, nil, posting{n, index})
}

// takeRowLeaf removes the leaf index of the row numbered seq from b and
// returns it (nil when there was none).
func takeRowLeaf(b *bolt.Bucket, seq []byte) ([]byte, error) {
	v, err := rowLeaf(b, seq)
	if err != nil || v == nil {
		return nil, err
	}
	return v, deleteEntry(b, nil, posting{binary.BigEndian.Uint64(seq), binary.BigEndian.Uint64(v)})
}

// UnlinkRowLeaf moves the leaf index of the row id numbered seq to the
// key by its id, as a removed row's: for tools that edit the file
// directly.
func UnlinkRowLeaf(btx *bolt.Tx, id string, seq []byte) error {
	v, err := takeRowLeaf(btx.Bucket(bRowLeaves), seq)
	if err != nil || v == nil {
		return err
	}
	return btx.Bucket(bLogIndex).Put(idKey(id), v)
}

// ForgetLeafIndex removes the leaf index of ref (a stored row's id, or
// another leaf's ref), leaving its leaf in the log: for tools that edit
// the file directly.
func ForgetLeafIndex(btx *bolt.Tx, ref string) error {
	if seq := RowNumber(btx, ref); seq != nil {
		if err := UnlinkRowLeaf(btx, ref, seq); err != nil {
			return err
		}
	}
	return btx.Bucket(bLogIndex).Delete(idKey(ref))
}

// indexBuckets are the buckets that hold runs of index entries; the
// expiry index is the last.
var indexBuckets = [][]byte{ixPrincipal, ixGrant, ixTarget, ixAgent, ixStatus, ixClass, ixTime, ixSigned, bExpiry}

// eachEntry calls fn with the prefix (the file's memory: copy it to keep
// it) and the entry of every entry of run index b, run by run, until fn
// returns an error.
func eachEntry(b *bolt.Bucket, fn func(prefix []byte, p posting) error) error {
	return b.ForEach(func(k, v []byte) error {
		if len(k) < entryKeyLen {
			return fmt.Errorf("%w: key %x", errBadRun, k)
		}
		prefix := k[:len(k)-entryKeyLen]
		head, _ := runHead(k, prefix)
		run, err := decodeRun(head, v)
		if err != nil {
			return fmt.Errorf("%w at %x", err, k)
		}
		for _, p := range run {
			if err := fn(prefix, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// entriesOf returns the prefix and the entry of every entry of the row
// numbered n in b, reading every run.
func entriesOf(b *bolt.Bucket, n uint64) ([][]byte, []posting, error) {
	var prefixes [][]byte
	var ps []posting
	err := eachEntry(b, func(prefix []byte, p posting) error {
		if p.seq == n {
			prefixes, ps = append(prefixes, slices.Clone(prefix)), append(ps, p)
		}
		return nil
	})
	return prefixes, ps, err
}

// DropIndexEntries deletes the entries of the row numbered seq (8
// bytes) from the indexes named (bucket names such as "by_principal"),
// or from every index when none is: for tools that edit the file
// directly.
func DropIndexEntries(btx *bolt.Tx, seq []byte, names ...string) error {
	for _, name := range indexBuckets {
		if len(names) > 0 && !slices.Contains(names, string(name)) {
			continue
		}
		b := btx.Bucket(name)
		prefixes, ps, err := entriesOf(b, binary.BigEndian.Uint64(seq))
		if err != nil {
			return err
		}
		for i, p := range ps {
			if err := deleteEntry(b, prefixes[i], p); err != nil {
				return err
			}
		}
	}
	return nil
}

// CopyIndexEntries gives the row numbered to the entries the row
// numbered from has in every index but the expiry index: for tools that
// edit the file directly.
func CopyIndexEntries(btx *bolt.Tx, from, to []byte) error {
	for _, name := range indexBuckets[:len(indexBuckets)-1] {
		b := btx.Bucket(name)
		prefixes, ps, err := entriesOf(b, binary.BigEndian.Uint64(from))
		if err != nil {
			return err
		}
		for i, p := range ps {
			if err := insertEntry(b, prefixes[i], posting{p.time, binary.BigEndian.Uint64(to)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// MoveIndexEntries moves the entries the row numbered from has in the
// indexes named (by bucket name, such as "by_target") to the row
// numbered to, or in every index but the expiry index when none is
// named: for tools that edit the file directly.
func MoveIndexEntries(btx *bolt.Tx, from, to []byte, names ...string) error {
	if len(names) == 0 {
		for _, name := range indexBuckets[:len(indexBuckets)-1] {
			names = append(names, string(name))
		}
	}
	for _, name := range names {
		b := btx.Bucket([]byte(name))
		if b == nil {
			return fmt.Errorf("no index %s", name)
		}
		prefixes, ps, err := entriesOf(b, binary.BigEndian.Uint64(from))
		if err != nil {
			return err
		}
		for i, p := range ps {
			if err := deleteEntry(b, prefixes[i], p); err != nil {
				return err
			}
			if err := insertEntry(b, prefixes[i], posting{p.time, binary.BigEndian.Uint64(to)}); err != nil {
				return err
			}
		}
	}
	return nil
}
