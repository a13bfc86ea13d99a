package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
)

// Row numbers by id, remembered by the commit loop's transactions.
//
// A row's later writes name it by its id: its evidence bundle (in the
// transaction that creates the row), the record of its uploaded object and
// the drop of its bundle (the uploader, a few seconds later), its leaf
// index (the integrator, within a second). The write also asks for the
// same ids more than once: the ledger's dedupe looks up the row's id and
// its request JWT's hash, then CreateRow checks both again before it
// writes them. Each of these read bRowSeq or bReqJWT at a random key: in
// a file of millions of rows, a walk through pages the processor's caches
// no longer hold.
//
// So the commit loop's transactions remember:
//   - within one transaction (one batch), the number each row id and
//     request-JWT hash was found or written with, and the ones found
//     absent;
//   - across transactions, the numbers of the last recentRows rows created,
//     added once their transaction committed and forgotten when a row is
//     removed.
//
// Only the commit loop's transactions use them: they run one at a time, and
// each sees every earlier commit, so what is remembered is what the file
// holds. Read-only transactions, which may see an older snapshot, read the
// buckets.

// recentRows bounds the rows whose numbers are remembered across
// transactions: at two thousand rows a second, the last eight seconds,
// which covers the uploader's and the integrator's lag in normal
// operation (both are under a second behind the writes at that rate).
// Past it, a lookup reads bRowSeq as before.
const recentRows = 1 << 14

// recent is the commit loop's memory of the numbers of rows it created.
type recent struct {
	number map[string]uint64 // row id key → row number
	ring   []string          // the keys in the order they were added
	next   int               // where the next key goes in ring
}

func newRecent(n int) *recent {
	return &recent{number: map[string]uint64{}, ring: make([]string, n)}
}

func (r *recent) add(k string, n uint64) {
	if old := r.ring[r.next]; old != "" {
		delete(r.number, old)
	}
	r.ring[r.next] = k
	r.next = (r.next + 1) % len(r.ring)
	r.number[k] = n
}

// forget drops k; its slot in ring stays until reused (deleting an absent
// key then is harmless).
func (r *recent) forget(k string) { delete(r.number, k) }

// memo is what one commit-loop transaction remembers (see above).
type memo struct {
	recent  *recent
	rows    map[string][]byte // row id key → its number, nil when absent
	jwts    map[string][]byte // request-JWT hash key → the row number, nil when absent
	created []createdRow      // for recent and the pending keys once the transaction commits
	// jwtKeys: the bReqJWT keys the transaction's rows took (pending.go),
	// with their numbers; nil once removed again.
	jwtKeys map[string][]byte
	removed []removedKey // for the pending keys once the transaction commits
}

type createdRow struct {
	key    string
	number uint64
	jwtKey []byte // the bReqJWT key the row took, nil for none
}

// removedKey is a key the transaction removed from bRowSeq or bReqJWT,
// and the number of the row it named. The same transaction may give the
// key to another row after.
type removedKey struct {
	name   []byte
	key    string
	number uint64
}

func newMemo(r *recent) *memo {
	return &memo{recent: r, rows: map[string][]byte{}, jwts: map[string][]byte{}, jwtKeys: map[string][]byte{}}
}

// stale reports whether key k of bucket name no longer names row number
// n as the transaction left it: it removed the key, or removed it and
// gave it to another row.
func (m *memo) stale(name, k []byte, n uint64) bool {
	seen := m.rows
	if bytes.Equal(name, bReqJWT) {
		seen = m.jwtKeys
	}
	v, ok := seen[string(k)]
	return ok && (v == nil || binary.BigEndian.Uint64(v) != n)
}

// committed adds the rows the transaction created, and did not remove
// again, to the store's recent rows and their keys to the pending keys
// (nil: none kept), and drops the keys it removed from them; call it only
// after the commit succeeded.
func (m *memo) committed(p *pendingIDs) {
	var add []createdRow
	for _, c := range m.created {
		if n := m.rows[c.key]; n != nil && binary.BigEndian.Uint64(n) == c.number {
			m.recent.add(c.key, c.number)
			add = append(add, c)
		}
	}
	if p != nil && (len(add) > 0 || len(m.removed) > 0) {
		p.apply(add, m.removed)
	}
}

// rowNumberOf returns the number of the row whose id key is k, nil when
// there is none.
func (t *tx) rowNumberOf(k []byte) []byte {
	if t.m == nil {
		return t.lookup(bRowSeq, k, nil, nil)
	}
	return t.lookup(bRowSeq, k, t.m.rows, t.m.recent)
}

// lookup returns the row number bucket holds for key k: from seen (the
// transaction's memory; nil outside the commit loop) or rec (the rows
// created last), else from the bucket when the key filter lets it
// through. What it read goes into seen.
func (t *tx) lookup(bucket, k []byte, seen map[string][]byte, rec *recent) []byte {
	if n, ok := seen[string(k)]; ok {
		return n
	}
	if rec != nil {
		if n, ok := rec.number[string(k)]; ok {
			return seqKey(n)
		}
	}
	n, ok := t.pendingNumber(bucket, k)
	if !ok && !t.absent(k) {
		n = validNumber(idGet(t.b(bucket), idWidth(bucket), k))
	}
	if seen != nil {
		seen[string(k)] = n
	}
	return n
}

// validNumber is a copy of the row number a bRowSeq or bReqJWT value
// starts with, nil when it is absent.
func validNumber(v []byte) []byte {
	if len(v) < 8 {
		return nil
	}
	return rowNumber(v)
}

// deferIDs reports whether the transaction leaves the keys of the rows it
// creates pending (pending.go): the commit loop's do.
func (t *tx) deferIDs() bool { return t.m != nil && t.ids != nil }

// putRowNumber keeps row id key k's number: pending in the commit loop's
// transactions (CreateRow writes the record), else in bRowSeq.
func (t *tx) putRowNumber(k, seq []byte) error {
	if !t.deferIDs() {
		if err := idPutAt(t.cursor(bRowSeq), idWidth(bRowSeq), k, seq); err != nil {
			return err
		}
	}
	if t.fs != nil {
		t.fs.add(k)
	}
	if t.m != nil {
		t.m.rows[string(k)] = seq
	}
	return nil
}

// deleteRowNumber removes row id key k (numbered seq) from bRowSeq and
// the pending keys.
func (t *tx) deleteRowNumber(k, seq []byte) error {
	if t.m != nil {
		// Forgotten before the commit: should it fail, a lookup reads
		// the file, which still holds the row.
		t.m.recent.forget(string(k))
		t.m.rows[string(k)] = nil
		t.m.removed = append(t.m.removed, removedKey{bRowSeq, string(k), binary.BigEndian.Uint64(seq)})
	}
	if err := t.b(bPending).Delete(seq); err != nil {
		return err
	}
	_, err := idDelete(t.b(bRowSeq), idWidth(bRowSeq), k)
	return err
}

// Request JWTs by hash (layout 7, docs/design/024). A request JWT's hash is
// a random 32 bytes, and bReqJWT is read and written at random keys, so its
// pages are about two thirds full: a key's bytes count half again. Layout
// 7 keys a hash by its first 16 bytes (reqKey): two request JWTs share them
// only when someone computes about 2^64 hashes to make it so. Nothing is
// trusted to the prefix: a lookup checks that the row it finds used the
// request JWT asked for, and a hash whose short key another request JWT
// holds is kept under its whole 32 bytes (reqKeys), which the lookup
// reads next. A hash that is not a lowercase hex SHA-256 (the store takes
// any text) is keyed by its marked text, which is never 16 or 32 bytes
// long, so the three kinds of keys never meet.

// reqKeyLen is the length of a hex hash's short key.
const reqKeyLen = 16

// reqKeys are the keys sha may be kept under, in the order a lookup reads
// them: the key it is kept under when no other holds it (also its key in
// the key filter), then, for a hex hash, its whole 32 bytes, where it is
// kept when another holds the first; text has no other key.
func reqKeys(sha string) [][]byte {
	k := idKey(sha)
	switch len(k) {
	case 32:
		return [][]byte{k[:reqKeyLen:reqKeyLen], k}
	case reqKeyLen:
		return [][]byte{append(k, 0)}
	}
	return [][]byte{k}
}

// reqKey is sha's first key (reqKeys).
func reqKey(sha string) []byte { return reqKeys(sha)[0] }

// reqFilterKey is the key filter's key of bReqJWT key k.
func reqFilterKey(k []byte) []byte {
	if len(k) == 32 {
		return k[:reqKeyLen]
	}
	return k
}

// requestJWTRow returns the number of the first row that used the request
// JWT whose hash is sha, nil when none.
func (t *tx) requestJWTRow(sha string) ([]byte, error) {
	full := string(idKey(sha))
	if t.m != nil {
		if n, ok := t.m.jwts[full]; ok {
			return n, nil
		}
	}
	n, err := t.requestJWTInFile(sha)
	if err != nil {
		return nil, err
	}
	if t.m != nil {
		t.m.jwts[full] = n
	}
	return n, nil
}

// requestJWTInFile reads sha's row number from bReqJWT (see above).
func (t *tx) requestJWTInFile(sha string) ([]byte, error) {
	keys := reqKeys(sha)
	if t.absent(keys[0]) {
		return nil, nil
	}
	for _, k := range keys {
		seq := validNumber(t.idValue(bReqJWT, k))
		if seq == nil {
			continue
		}
		r, err := t.rowAt(seq)
		if err != nil {
			return nil, fmt.Errorf("request JWT %s: %w", sha, err)
		}
		if r.RequestJWTSHA256 == sha {
			return seq, nil
		}
	}
	return nil, nil
}

// putRequestJWT records row number seq as the first that used sha, which
// requestJWTRow found in no row, and returns the key it is kept under:
// pending in the commit loop's transactions (CreateRow writes the
// record), else in bReqJWT.
func (t *tx) putRequestJWT(sha string, seq []byte) ([]byte, error) {
	keys := reqKeys(sha)
	k := keys[0]
	if t.reqKeyTaken(k) {
		// Another request JWT's: its first 16 bytes are this one's.
		if len(keys) == 1 || t.reqKeyTaken(keys[1]) {
			return nil, fmt.Errorf("request JWT %s: its key is another request JWT's", sha)
		}
		k = keys[1]
	}
	if t.fs != nil {
		t.fs.add(keys[0])
	}
	if t.m != nil {
		t.m.jwts[string(idKey(sha))] = seq
		t.m.jwtKeys[string(k)] = seq
	}
	if t.deferIDs() {
		return k, nil
	}
	return k, idPutAt(t.cursor(bReqJWT), reqKeyLen, k, seq)
}

// reqKeyTaken reports whether bReqJWT key k holds a row, pending or not.
func (t *tx) reqKeyTaken(k []byte) bool {
	if t.m != nil {
		if n, ok := t.m.jwtKeys[string(k)]; ok {
			return n != nil
		}
	}
	if _, ok := t.pendingNumber(bReqJWT, k); ok {
		return true
	}
	return !t.absent(reqFilterKey(k)) && idGetAt(t.cursor(bReqJWT), reqKeyLen, k) != nil
}

// deleteRequestJWT removes sha's entry when it names row number seq.
func (t *tx) deleteRequestJWT(sha string, seq []byte) error {
	for _, k := range reqKeys(sha) {
		if v := t.idValue(bReqJWT, k); len(v) >= 8 && string(v[:8]) == string(seq) {
			if t.m != nil {
				t.m.jwts[string(idKey(sha))] = nil
				t.m.jwtKeys[string(k)] = nil
				t.m.removed = append(t.m.removed, removedKey{bReqJWT, string(k), binary.BigEndian.Uint64(seq)})
			}
			_, err := idDelete(t.b(bReqJWT), reqKeyLen, k)
			return err
		}
	}
	return nil
}

// takeRequestJWTs removes each entry of taken (a hash, the id of the row
// the ledger read it naming) that still names that row, for the row being
// created, which CreateRow then keys under its own hash: a hash is kept
// for the row that used it (requestJWTInFile), so the entry of the other
// encoding of its request JWT goes, and lookups of either find the new
// row under its own. The row that held an entry holds none after.
func (t *tx) takeRequestJWTs(taken map[string]string) error {
	for _, sha := range slices.Sorted(maps.Keys(taken)) {
		seq, err := t.requestJWTRow(sha)
		if err != nil {
			return err
		}
		if seq == nil {
			continue
		}
		r, err := t.rowAt(seq)
		if err != nil {
			return fmt.Errorf("request JWT %s: %w", sha, err)
		}
		if r.ID != taken[sha] {
			continue
		}
		if err := t.deleteRequestJWT(sha, seq); err != nil {
			return err
		}
		// The row's record, while its keys are pending, names the key
		// too, and would give it back to the row at the next Open.
		v := t.b(bPending).Get(seq)
		if v == nil {
			continue
		}
		rowKey, jwtKey, err := splitPendingRecord(v)
		if err != nil {
			return fmt.Errorf("row %x: %w", seq, err)
		}
		if len(jwtKey) > 0 {
			if err := t.b(bPending).Put(seq, pendingRecord(rowKey, nil)); err != nil {
				return err
			}
		}
	}
	return nil
}
