package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// Layout 10 (docs/design/032): the keys rows add to bRowSeq (a row's
// number by its id) and bReqJWT (the first row of a request JWT) are
// written to those buckets after the rows, many at a time and in key
// order, instead of in each row's commit.
//
// Both buckets are keyed at random, so a row's commit put each of its two
// keys into a leaf page no other row of the batch touched, and rewrote
// that page and the branch pages above it: half the pages a commit wrote,
// and more as the file grows and its trees deepen. Now a row's commit
// writes its keys' record instead (bPending, under the row's number: its
// id's key and the request JWT's key it took, if any), appended to that
// bucket's last page, and once the commit succeeded the commit loop adds
// both keys to the open generation in memory, which lookups read before
// the buckets.
//
// When the open generation holds genRows rows it is closed and a new
// one opened, and its keys are sorted. Then every commit carries a step
// of its merge (mergeStepFor): the next keys put into the buckets in
// order, then the records deleted. Keys in order share their pages, so a
// generation rewrites each page it touches about once. The last step's
// commit drops the generation.
//
// Nothing is lost to a crash: a record commits with its row, Open reads
// the records back into the open generation, and a merge cut short is
// made again from its start (a key put again with the number the bucket
// holds for it changes nothing). A generation's records go only once all
// its keys are in the buckets.
//
// Readers: a read transaction takes the list of generations before it
// begins, so one that began before a generation's last step committed
// still reads it, and it reads only the keys of rows its snapshot
// numbered: the open generation takes the keys of rows committed after
// it began. The commit loop's transactions read the list as it is; only
// the commit loop changes it. A row's keys join the open generation
// after its commit: a read transaction that begins in between reads the
// records of those rows from its snapshot (idsView.snapshot), so that it
// finds them by their ids as by their indexes. Tools that read
// a closed file without a store (OpenExport) read the records into
// generations of their own; those that edit one (SetRowNumber,
// DeleteRowNumber) first merge them (settlePending).

// bPending: a row's number -> the keys its commit added to bRowSeq and
// bReqJWT, not yet written there (pendingRecord).
var bPending = []byte("ids_pending")

// A generation takes a sixty-fourth of the rows the file has numbered,
// from minGen to maxGen rows: a merge of k sorted keys into a bucket of
// p leaf pages touches about p(1-e^(-k/p)) of them, so the fewer rows
// the file holds the fewer a generation needs to share its pages, and a
// small file merges often and briefly. At ten million rows bRowSeq has
// about 110,000 leaf pages, of which the keys of maxGen rows touch about
// 70 %: about 0.6 pages a key, where each row's commit wrote a leaf and a
// branch or two. At most maxGen rows' keys take about 19 MiB in memory
// (in maps without pointers for the collector to follow), twice that,
// with the merge's sorted keys, while one generation merges and the next
// fills.
const (
	minGen = 1 << 13
	maxGen = 1 << 17
)

// genRows is how many rows the open generation takes in a file that has
// numbered rows rows.
func genRows(rows uint64) int { return int(min(max(rows/64, minGen), maxGen)) }

// mergeStep is the fewest keys (then records) a merge step writes, more
// when the rows since the step before call for more (mergeStepFor): at
// ten million rows about 600 pages, a few milliseconds added to the
// commit whose batch the step joins.
const mergeStep = 1024

// pendingRecord is bPending's value for a row: the length of its id's key
// (a uvarint: one byte for any id the ledger takes), the key, then its
// request JWT's key in bReqJWT (empty when the row took none).
func pendingRecord(rowKey, jwtKey []byte) []byte {
	v := make([]byte, 0, binary.MaxVarintLen64+len(rowKey)+len(jwtKey))
	return append(append(binary.AppendUvarint(v, uint64(len(rowKey))), rowKey...), jwtKey...)
}

// splitPendingRecord returns the keys of a bPending value.
func splitPendingRecord(v []byte) (rowKey, jwtKey []byte, err error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || n == 0 || n > uint64(len(v)-w) {
		return nil, nil, fmt.Errorf("pending record of %d bytes: malformed", len(v))
	}
	return v[w : w+int(n)], v[w+int(n):], nil
}

// idMap maps bucket keys to row numbers; keys of 32 and 16 bytes (a hex
// id, a request JWT's short key) are kept as arrays, which the collector
// does not scan.
type idMap struct {
	k32 map[[32]byte]uint64
	k16 map[[16]byte]uint64
	kx  map[string]uint64
}

func newIDMap() idMap {
	return idMap{k32: map[[32]byte]uint64{}, k16: map[[16]byte]uint64{}, kx: map[string]uint64{}}
}

func (m idMap) get(k []byte) (uint64, bool) {
	var n uint64
	var ok bool
	switch len(k) {
	case 32:
		n, ok = m.k32[[32]byte(k)]
	case 16:
		n, ok = m.k16[[16]byte(k)]
	default:
		n, ok = m.kx[string(k)]
	}
	return n, ok
}

func (m idMap) set(k []byte, n uint64) {
	switch len(k) {
	case 32:
		m.k32[[32]byte(k)] = n
	case 16:
		m.k16[[16]byte(k)] = n
	default:
		m.kx[string(k)] = n
	}
}

func (m idMap) del(k []byte) {
	switch len(k) {
	case 32:
		delete(m.k32, [32]byte(k))
	case 16:
		delete(m.k16, [16]byte(k))
	default:
		delete(m.kx, string(k))
	}
}

func (m idMap) len() int { return len(m.k32) + len(m.k16) + len(m.kx) }

// keys returns m's keys, copied, in no order.
func (m idMap) keys() [][]byte {
	out := make([][]byte, 0, m.len())
	buf := make([]byte, 0, 32*len(m.k32)+16*len(m.k16))
	for k := range m.k32 {
		buf = append(buf, k[:]...)
		out = append(out, buf[len(buf)-32:len(buf):len(buf)])
	}
	for k := range m.k16 {
		buf = append(buf, k[:]...)
		out = append(out, buf[len(buf)-16:len(buf):len(buf)])
	}
	for k := range m.kx {
		out = append(out, []byte(k))
	}
	return out
}

// idGen is a generation of pending keys: those of the rows numbered from
// lo to hi (hi is 0 while it is open).
type idGen struct {
	rows, jwts idMap
	lo, hi     uint64
	max        uint64 // the highest row number added
	added      int    // rows added

	// sorted caches each map's keys in order for iteration (idEntries
	// with the generations), valid while changes is what it was made at.
	sortMu  sync.Mutex
	changes [2]uint64
	sorted  [2][][]byte
	sortedN [2]uint64
}

func newIDGen() *idGen { return &idGen{rows: newIDMap(), jwts: newIDMap()} }

// of returns g's map of bucket name, and its index.
func (g *idGen) of(name []byte) (idMap, int) {
	if bytes.Equal(name, bReqJWT) {
		return g.jwts, 1
	}
	return g.rows, 0
}

// pendingIDs holds the generations, oldest first; the last one is open.
// mu guards the maps, the list and added; only the commit loop writes
// them.
type pendingIDs struct {
	mu    sync.RWMutex
	gens  []*idGen
	added uint64 // rows added to any generation since it was made
	last  uint64 // the highest row number added
}

// total returns how many rows were added since p was made.
func (p *pendingIDs) total() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.added
}

func newPendingIDs() *pendingIDs { return &pendingIDs{gens: []*idGen{newIDGen()}} }

// list returns the generations as they are now.
func (p *pendingIDs) list() []*idGen {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.gens
}

// idsView is what a transaction reads of the pending keys: the
// generations it took when it began, and of their keys those of rows
// numbered up to maxRow. A read transaction's maxRow is the last row its
// snapshot numbered (snapshotIDs): the open generation takes the keys
// of rows committed after, which it must not see.
type idsView struct {
	p      *pendingIDs
	gens   []*idGen
	maxRow uint64
	// last is p.last when gens were taken: the keys of rows numbered
	// after it may be in none of them (snapshot).
	last uint64
}

// allIDs is a view of p's generations as they are, every key seen: the
// commit loop's, or one of a file no store has open.
func allIDs(p *pendingIDs) *idsView {
	return &idsView{p: p, gens: p.list(), maxRow: math.MaxUint64}
}

// snapshotIDs is a view of p's generations for a read transaction about
// to begin; snapshot sets its maxRow once it began.
func snapshotIDs(p *pendingIDs) *idsView {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return &idsView{p: p, gens: p.gens, last: p.last}
}

// snapshot limits v to the rows numbered in btx's snapshot, and adds the
// keys of the rows its snapshot numbered after v.last: their commit ended
// before the transaction began, but their keys had not joined the
// generations when v took them (the commit loop adds them once the
// commit returns), or joined one opened since. Their records are in the
// snapshot (a record goes only with its generation's last merge step, and
// then its keys are in the buckets); there are a commit's worth at most,
// but for a transaction that took long to begin.
func (v *idsView) snapshot(btx *bolt.Tx) *idsView {
	v.maxRow = metaUint(btx.Bucket(bMeta), kRowSeqN)
	if v.maxRow > v.last {
		if late := recordsAfter(btx, v.last, v.maxRow); late != nil {
			v.gens = append(slices.Clip(v.gens), late)
		}
	}
	return v
}

// recordsAfter is a generation of the keys of the records of rows after
// row number from, up to to, in btx's snapshot; nil when there are none.
// A record that does not split is left out, as readPending would refuse
// it at Open.
func recordsAfter(btx *bolt.Tx, from, to uint64) *idGen {
	var g *idGen
	for r := range pendingRecords(btx.Bucket(bPending), from+1) {
		if r.n > to {
			break
		}
		if r.err != nil {
			continue
		}
		if g == nil {
			g = newIDGen()
		}
		g.rows.set(r.rowKey, r.n)
		g.changes[0]++
		if r.jwtKey != nil {
			g.jwts.set(r.jwtKey, r.n)
			g.changes[1]++
		}
	}
	return g
}

// pendingRec is a record of bucket bPending as pendingRecords reads it:
// the row's number and its keys (jwtKey nil when it took none), or why
// the record does not read.
type pendingRec struct {
	n              uint64
	rowKey, jwtKey []byte
	err            error
}

// pendingRecords yields the records of b (bPending; none when nil) from
// row number from on, in order.
func pendingRecords(b *bolt.Bucket, from uint64) iter.Seq[pendingRec] {
	return func(yield func(pendingRec) bool) {
		if b == nil {
			return
		}
		c := b.Cursor()
		for k, v := c.Seek(seqKey(from)); k != nil; k, v = c.Next() {
			var r pendingRec
			if len(k) != 8 {
				r.err = fmt.Errorf("pending record under a key of %d bytes", len(k))
			} else {
				r.n = binary.BigEndian.Uint64(k)
				if r.rowKey, r.jwtKey, r.err = splitPendingRecord(v); r.err != nil {
					r.err = fmt.Errorf("row %x: %w", k, r.err)
				} else if len(r.jwtKey) == 0 {
					r.jwtKey = nil
				}
			}
			if !yield(r) {
				return
			}
		}
	}
}

// get returns the number gens hold for key k of bucket name.
func (v *idsView) get(name, k []byte) (uint64, bool) {
	v.p.mu.RLock()
	defer v.p.mu.RUnlock()
	for i := len(v.gens) - 1; i >= 0; i-- {
		m, _ := v.gens[i].of(name)
		if n, ok := m.get(k); ok {
			return n, n <= v.maxRow
		}
	}
	return 0, false
}

// sortedOf returns g's keys of bucket name in order (some may have gone
// since: a reader checks each with get).
func (v *idsView) sortedOf(g *idGen, name []byte) [][]byte {
	g.sortMu.Lock()
	defer g.sortMu.Unlock()
	v.p.mu.RLock()
	m, i := g.of(name)
	changes := g.changes[i]
	if g.sorted[i] != nil && g.sortedN[i] == changes {
		v.p.mu.RUnlock()
		return g.sorted[i]
	}
	// Copied under the lock, sorted after it: the commit loop waits for
	// the copy only.
	keys := m.keys()
	v.p.mu.RUnlock()
	slices.SortFunc(keys, bytes.Compare)
	g.sorted[i], g.sortedN[i] = keys, changes
	return keys
}

// addLocked adds the keys of row number n to the open generation; p.mu
// is held.
func (p *pendingIDs) addLocked(rowKey, jwtKey []byte, n uint64) {
	g := p.gens[len(p.gens)-1]
	if g.added == 0 || n < g.lo {
		g.lo = n
	}
	g.max = max(g.max, n)
	g.added++
	p.added++
	p.last = max(p.last, n)
	g.rows.set(rowKey, n)
	g.changes[0]++
	if jwtKey != nil {
		g.jwts.set(jwtKey, n)
		g.changes[1]++
	}
}

// apply adds the keys of the rows created to the open generation and
// drops the keys removed from the generation that holds each, as one
// commit left them. A key is dropped only where it names the row removed:
// the commit may have given it to a row it created after.
func (p *pendingIDs) apply(created []createdRow, removed []removedKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range created {
		p.addLocked([]byte(c.key), c.jwtKey, c.number)
	}
	for _, r := range removed {
		for _, g := range p.gens {
			m, _ := g.of(r.name)
			if n, ok := m.get([]byte(r.key)); ok && n == r.number {
				m.del([]byte(r.key))
			}
		}
	}
}

// close closes the open generation and opens a new one; it returns the
// closed one.
func (p *pendingIDs) close() *idGen {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gens[len(p.gens)-1]
	g.hi = g.max
	p.gens = append(slices.Clip(p.gens), newIDGen())
	return g
}

// drop removes generation g from the list.
func (p *pendingIDs) drop(g *idGen) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gens = slices.DeleteFunc(slices.Clone(p.gens), func(x *idGen) bool { return x == g })
}

// addKeysTo adds every pending key to key filter f, as a write adds the
// keys it puts, with those of the rows m (a commit-loop transaction's)
// created, which join the generations when it commits.
func (p *pendingIDs) addKeysTo(f *keyFilter, m *memo) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	for _, g := range p.gens {
		for _, k := range g.rows.keys() {
			f.add(k)
		}
		for _, k := range g.jwts.keys() {
			f.add(reqFilterKey(k))
		}
	}
	for _, c := range m.created {
		f.add([]byte(c.key))
		if c.jwtKey != nil {
			f.add(reqFilterKey(c.jwtKey))
		}
	}
}

// rows counts the rows whose keys are pending.
func (p *pendingIDs) rows() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, g := range p.gens {
		n += g.rows.len()
	}
	return n
}

// PendingKeys reports how many rows' numbers by id (and request JWTs) are
// not yet written into the file's buckets, and how many generations of
// them were merged, and failed to merge, since Open (docs/design/032).
func (s *Store) PendingKeys() (rows int, merged, failed uint64) {
	return s.pending.rows(), s.merges.Load(), s.mergeFailures.Load()
}

// readPending reads the records of bucket bPending into a new set of
// generations, all in the open one.
func readPending(btx *bolt.Tx) (*pendingIDs, error) {
	p := newPendingIDs()
	p.mu.Lock()
	defer p.mu.Unlock()
	for r := range pendingRecords(btx.Bucket(bPending), 0) {
		if r.err != nil {
			return p, r.err
		}
		p.addLocked(r.rowKey, r.jwtKey, r.n)
	}
	return p, nil
}

// settlePending writes every pending key into its bucket and deletes the
// records, in a write transaction on a file no store has open (for the
// tools that edit one).
func settlePending(btx *bolt.Tx) error {
	b := btx.Bucket(bPending)
	if b == nil {
		return nil
	}
	rows, jwts := btx.Bucket(bRowSeq), btx.Bucket(bReqJWT)
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		rowKey, jwtKey, err := splitPendingRecord(v)
		if err != nil {
			return fmt.Errorf("row %x: %w", k, err)
		}
		seq := append([]byte(nil), k...)
		if err := idPut(rows, idWidth(bRowSeq), rowKey, seq); err != nil {
			return err
		}
		if len(jwtKey) > 0 {
			if err := idPut(jwts, idWidth(bReqJWT), jwtKey, seq); err != nil {
				return err
			}
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// pendingRowNumber looks for row id key k among the records, in a
// transaction on a file no store has open.
func pendingRowNumber(btx *bolt.Tx, k []byte) []byte {
	for r := range pendingRecords(btx.Bucket(bPending), 0) {
		if r.err == nil && bytes.Equal(r.rowKey, k) {
			return seqKey(r.n)
		}
	}
	return nil
}

// pendingNumber returns the number the pending keys hold for key k of
// bucket name, as the transaction sees them. In a read transaction a key
// may still name a row its snapshot no longer stores: the row's removal
// committed before the transaction began, and the commit loop drops the
// keys once the commit returns. Such a key holds no number (true, nil):
// the row is gone, as the snapshot has it.
func (t *tx) pendingNumber(name, k []byte) ([]byte, bool) {
	if t.ids == nil {
		return nil, false
	}
	n, ok := t.ids.get(name, k)
	if !ok {
		return nil, false
	}
	if t.gone(n) {
		return nil, true
	}
	return seqKey(n), true
}

// gone reports whether row number n, which the pending keys name, is one
// a read transaction's snapshot no longer stores (pendingNumber).
func (t *tx) gone(n uint64) bool {
	return t.m == nil && t.ids.maxRow != math.MaxUint64 && t.get(bRowData, seqKey(n)) == nil
}

// idValue returns what bucket name holds for key k, the pending keys
// first (idGet: a row number, or a value written before layout 4).
func (t *tx) idValue(name, k []byte) []byte {
	if n, ok := t.pendingNumber(name, k); ok {
		return n
	}
	return idGet(t.b(name), idWidth(name), k)
}

// rowSeqValue returns what bRowSeq holds for row id key k as the
// transaction sees it: a row it created, the pending keys, the bucket.
func (t *tx) rowSeqValue(k []byte) []byte {
	if t.m != nil {
		if n, ok := t.m.rows[string(k)]; ok && n == nil {
			return nil
		} else if ok {
			if v := t.idValue(bRowSeq, k); v != nil {
				return v
			}
			return n
		}
	}
	return t.idValue(bRowSeq, k)
}

// idEntries yields bucket name's entries at or after from (all when from
// is nil) in key order, the pending keys among them (idEntries).
func (t *tx) idEntries(name, from []byte) iter.Seq2[[]byte, []byte] {
	tree := idEntries(t.b(name), idWidth(name), from)
	if t.ids == nil {
		return tree
	}
	var lists [][][]byte
	for _, g := range t.ids.gens {
		keys := t.ids.sortedOf(g, name)
		if from != nil {
			i, _ := slices.BinarySearchFunc(keys, from, bytes.Compare)
			keys = keys[i:]
		}
		if len(keys) > 0 {
			lists = append(lists, keys)
		}
	}
	if len(lists) == 0 {
		return tree
	}
	return func(yield func(k, v []byte) bool) {
		next, stop := iter.Pull2(tree)
		defer stop()
		tk, tv, tok := next()
		for {
			// The least pending key still held, over the generations.
			var pk []byte
			var pn []byte
			for i := range lists {
				for len(lists[i]) > 0 {
					n, ok := t.ids.get(name, lists[i][0])
					if ok && !t.gone(n) {
						if pk == nil || bytes.Compare(lists[i][0], pk) < 0 {
							pk, pn = lists[i][0], seqKey(n)
						}
						break
					}
					lists[i] = lists[i][1:]
				}
			}
			switch {
			case pk == nil && !tok:
				return
			case pk == nil || (tok && bytes.Compare(tk, pk) < 0):
				if !yield(tk, tv) {
					return
				}
				tk, tv, tok = next()
				continue
			}
			if tok && bytes.Equal(tk, pk) {
				// Merged already, and still pending: the same number.
				tk, tv, tok = next()
			}
			for i := range lists {
				if len(lists[i]) > 0 && bytes.Equal(lists[i][0], pk) {
					lists[i] = lists[i][1:]
				}
			}
			if !yield(pk, pn) {
				return
			}
		}
	}
}

// entriesAfter is entriesAfter with the transaction's pending keys.
func (t *tx) entriesAfter(name, after []byte) iter.Seq2[[]byte, []byte] {
	if t.ids == nil || !(bytes.Equal(name, bRowSeq) || bytes.Equal(name, bReqJWT)) {
		return entriesAfter(t.b(name), name, after)
	}
	return skipKey(t.idEntries(name, after), after)
}

// mergeRetry is how long after a failed merge step the next may run.
const mergeRetry = time.Minute

// mergeState is a generation's merge. The commit loop owns it but for
// sorted, which a goroutine sets once it has sorted the generation's keys.
type mergeState struct {
	g      *idGen
	sorted atomic.Pointer[[2][][]byte] // bRowSeq's keys, bReqJWT's, in order
	at     mergeAt
}

// mergeAt is how far a merge got: the bucket it is at (0 bRowSeq, 1
// bReqJWT, 2 done), the keys of each merged, the first record not
// deleted, and the rows added to the generations at its last step.
type mergeAt struct {
	bucket int
	keys   [2]int
	record uint64
	total  uint64
}

// maybeMerge closes the open generation once it holds genRows rows and no
// merge runs, and has its keys sorted for the merge. It runs in the
// commit loop.
func (s *Store) maybeMerge() {
	if s.merge != nil {
		return
	}
	gens := s.pending.list()
	open := gens[len(gens)-1]
	limit := s.cfg.genRows
	if limit == 0 {
		limit = genRows(open.max)
	}
	if open.added < limit {
		return
	}
	g := s.pending.close()
	m := &mergeState{g: g, at: mergeAt{record: g.lo, total: s.pending.total()}}
	s.merge = m
	sort := func() {
		view := &idsView{p: s.pending, gens: []*idGen{g}, maxRow: math.MaxUint64}
		m.sorted.Store(&[2][][]byte{view.sortedOf(g, bRowSeq), view.sortedOf(g, bReqJWT)})
	}
	if g.added <= minGen {
		sort() // a millisecond or two
		return
	}
	s.builds.Add(1)
	go func() {
		defer s.builds.Done()
		sort()
	}()
}

// mergeStepFor returns the next step of the merge as a member for the
// batch about to commit, and what to do once it committed; nil when
// none is due. A step writes the generation's next keys into bRowSeq
// and bReqJWT in key order, and once all are there deletes its records.
//
// A step takes mergeStep keys, or four times the rows added since the
// step before, its batch's among them (two keys a row), when more; the
// step that puts the last keys deletes records too, as many, and later
// steps the rest. Every commit carries a step once the keys are sorted
// (at once for a generation of minGen rows or fewer, else by a
// goroutine, in tens of milliseconds), so the merge outpaces the rows
// that fill the open generation however many a commit carries (a bulk
// load's thousands): a generation is merged before the open one is half
// full.
func (s *Store) mergeStepFor() (*request, func(error)) {
	m := s.merge
	if m == nil || time.Now().Before(s.mergeRetryAt) {
		return nil, nil
	}
	sorted := m.sorted.Load()
	if sorted == nil {
		return nil, nil
	}
	var next mergeAt
	fn := func(lt ledger.Tx) error {
		t := lt.(*tx)
		// The rows added since the last step, with the batch's own (it
		// runs last in the batch).
		next = m.at
		next.total = s.pending.total() + uint64(len(t.m.created))
		n := max(mergeStep, int(4*(next.total-m.at.total)))
		for ; n > 0 && next.bucket < 2; next.bucket++ {
			name, keys := bRowSeq, sorted[next.bucket]
			if next.bucket == 1 {
				name = bReqJWT
			}
			take := keys[next.keys[next.bucket]:]
			take = take[:min(n, len(take))]
			if err := t.mergeKeys(m.g, name, take); err != nil {
				return err
			}
			next.keys[next.bucket] += len(take)
			n -= len(take)
			if next.keys[next.bucket] < len(keys) {
				break
			}
		}
		if next.bucket == 2 && n > 0 {
			// Every key is in: records may go.
			var err error
			next.record, err = t.dropRecords(next.record, m.g.hi, max(n, mergeStep))
			return err
		}
		return nil
	}
	done := func(err error) {
		switch {
		case errors.Is(err, ledger.ErrClosed):
		case err != nil:
			s.mergeFailures.Add(1)
			s.mergeRetryAt = time.Now().Add(mergeRetry)
			slog.Default().Warn("row store (bbolt): writing pending row numbers and request JWTs into the file failed; lookups read them from memory meanwhile, and the merge goes on in a minute",
				slog.String("path", s.db.Path()), slog.Any("error", err))
		case next.bucket == 2 && next.record > m.g.hi:
			s.pending.drop(m.g)
			s.merges.Add(1)
			s.merge = nil
		default:
			m.at = next
		}
	}
	return &request{fn: fn, err: make(chan error, 1), own: true}, done
}

// commitWithMerge commits batch with the merge's next step, if one is
// due, as a member of its own: should the step fail, the writes still
// commit (run).
func (s *Store) commitWithMerge(batch []*request) {
	step, done := s.mergeStepFor()
	if step != nil {
		batch = append(batch, step)
	}
	s.run(batch)
	if step != nil {
		done(<-step.err)
	}
	s.maybeMerge()
}

// mergeKeys puts the keys of g among keys (bucket name's, in order) that
// g still holds into the bucket.
func (t *tx) mergeKeys(g *idGen, name []byte, keys [][]byte) error {
	m, _ := g.of(name)
	c := t.cursor(name)
	w := idWidth(name)
	for _, k := range keys {
		n, ok := m.get(k)
		if !ok || t.m.stale(name, k, n) {
			continue
		}
		if err := idPutAt(c, w, k, seqKey(n)); err != nil {
			return err
		}
	}
	return nil
}

// dropRecords deletes up to limit records numbered from..hi and returns
// the number to go on from (past hi when done).
func (t *tx) dropRecords(from, hi uint64, limit int) (uint64, error) {
	c := t.b(bPending).Cursor()
	k, _ := c.Seek(seqKey(from))
	for range limit {
		if k == nil || binary.BigEndian.Uint64(k) > hi {
			return hi + 1, nil
		}
		from = binary.BigEndian.Uint64(k) + 1
		if err := c.Delete(); err != nil {
			return 0, err
		}
		k, _ = c.Seek(seqKey(from))
	}
	return from, nil
}
