package bolt

import (
	"bytes"
	"errors"
	"hash/maphash"
	"log/slog"
	"math"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// The key filter: a Bloom filter over the keys of bRowSeq (row ids) and
// bReqJWT (request-JWT hashes, by reqKey), held in memory.
//
// Nearly every write asks for keys that are not there: the ledger looks up
// the receipt's id, the evidence's and the other encoding of the receipt,
// and both encodings of the request JWT, before it records a new row. In
// a file of millions of rows each such miss is a walk from the root to a
// leaf page at a random key, through pages the processor's caches do not
// hold. When the filter says a key is absent, it is: the lookup answers
// without reading the bucket. When it says present (the key is there, or
// about one lookup in a hundred by chance), the bucket is read as before.
//
// A filter is built from the file by a goroutine of its own, a chunk of
// keys per read transaction, and used once it holds every key: it is
// first registered with the commit loop, between two of its transactions,
// so that every key written from then on is added to it, and the keys
// written before are in every snapshot the scan reads afterwards. Keys are
// never taken out (a removed row's id stays in it: a lookup of it reads
// the bucket). Until it is ready, and in a file opened by another build of
// pactledger, lookups read the buckets. When more keys were added than it
// was sized for, a new filter twice its size is built the same way.

const (
	filterBitsPerKey = 8
	filterHashes     = 6
	filterMaxKeys    = math.MaxUint32
)

var (
	// filterMinKeys is the smallest capacity a filter is built with.
	filterMinKeys int64 = 1 << 16
	// filterChunk keys are read in one read transaction: a long read
	// transaction would hold up a commit that grows the file's mapping.
	filterChunk = 50_000
	// afterFilterChunk, when set (by tests), runs after each chunk read.
	afterFilterChunk func()
)

var filterSeed = maphash.MakeSeed()

// keyFilter is one Bloom filter, blocked: a key's bits are all in one
// block of 512 (a cache line), so a lookup reads one line of memory. add
// and mayHave may run at once.
type keyFilter struct {
	bits     []uint64
	blocks   uint64
	capacity int64 // keys it was sized for
	added    atomic.Int64
}

func newKeyFilter(capacity int64) *keyFilter {
	capacity = min(max(capacity, filterMinKeys), filterMaxKeys)
	blocks := (uint64(capacity)*filterBitsPerKey + 511) / 512
	f := &keyFilter{blocks: blocks, capacity: capacity}
	f.bits = filterBits(f, blocks*8)
	return f
}

// filterBits returns n zeroed words for f, mapped outside the Go heap and
// unmapped once f is unreachable. The collector sets its next goal from
// the live heap: 24 MiB of filter on the heap (ten million rows) made
// ledgerd hold about 70 MiB more. When the mapping fails, the words are
// allocated on the heap.
func filterBits(f *keyFilter, n uint64) []uint64 {
	m, err := syscall.Mmap(-1, 0, int(n*8), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]uint64, n)
	}
	runtime.AddCleanup(f, func(m []byte) { _ = syscall.Munmap(m) }, m)
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(m))), n)
}

// probe calls fn with the filterHashes bits of k, as a word of bits and
// a mask, until fn returns false: one 64-bit hash, its low half picks the
// block (reduced by a multiply), its high half the bits within it (double
// hashing).
func (f *keyFilter) probe(k []byte, fn func(word, mask uint64) bool) bool {
	h := maphash.Bytes(filterSeed, k)
	base := ((uint64(uint32(h)) * f.blocks) >> 32) * 8
	a, b := uint32(h>>32), uint32(h>>41)|1
	for i := range uint32(filterHashes) {
		pos := (a + i*b) & 511
		if !fn(base+uint64(pos/64), 1<<(pos%64)) {
			return false
		}
	}
	return true
}

func (f *keyFilter) add(k []byte) {
	f.probe(k, func(word, mask uint64) bool {
		if atomic.LoadUint64(&f.bits[word])&mask == 0 {
			atomic.OrUint64(&f.bits[word], mask)
		}
		return true
	})
	f.added.Add(1)
}

// mayHave is false when k was never added.
func (f *keyFilter) mayHave(k []byte) bool {
	return f.probe(k, func(word, mask uint64) bool { return atomic.LoadUint64(&f.bits[word])&mask != 0 })
}

// keyFilters is the store's filter in use and the one being built.
type keyFilters struct {
	active   atomic.Pointer[keyFilter] // nil until the first is ready
	building atomic.Pointer[keyFilter]
	running  atomic.Bool  // a build goroutine runs
	retryAt  atomic.Int64 // after a failed build, no other before this time (Unix ns)
}

// filterRetry is how long after a failed build the next may start.
const filterRetry = time.Minute

// add adds a key written to bRowSeq or bReqJWT to the filters. Only the
// commit loop calls it, and only the commit loop changes which filters
// are in use and built.
func (fs *keyFilters) add(k []byte) {
	a := fs.active.Load()
	if a != nil {
		a.add(k)
	}
	if b := fs.building.Load(); b != nil && b != a {
		b.add(k)
	}
}

// filterCapacity is the size a filter is built for in a file of rows rows:
// a row id and a request-JWT hash a row, and a quarter more to grow.
func filterCapacity(rows uint64) int64 {
	return int64(min(rows, filterMaxKeys/3)) * 5 / 2
}

// maybeBuildFilter starts a build when none runs and there is no filter,
// or the one in use holds more keys than it was sized for. It runs in the
// commit loop, or before it starts.
func (s *Store) maybeBuildFilter(rows uint64) {
	a := s.filters.active.Load()
	if a != nil && a.added.Load() <= a.capacity {
		return
	}
	if time.Now().UnixNano() < s.filters.retryAt.Load() {
		return
	}
	if !s.filters.running.CompareAndSwap(false, true) {
		return
	}
	capacity := filterCapacity(rows)
	if a != nil {
		capacity = max(capacity, 2*a.capacity)
	}
	s.builds.Add(1)
	go func() {
		defer s.builds.Done()
		defer s.filters.running.Store(false)
		s.buildFilter(newKeyFilter(capacity))
	}()
}

// buildFilter fills f from the file and puts it in use (see above).
func (s *Store) buildFilter(f *keyFilter) {
	log := slog.Default().With(slog.String("path", s.db.Path()))
	t0 := time.Now()
	// Registered by the commit loop between two transactions: the writes
	// before it are committed, the writes after it add their keys to f.
	// The keys still pending are added then too, with those of the
	// batch's members before: a merge may move them into a part of a
	// bucket the scan has passed.
	err := s.own(func(t *tx) error {
		s.filters.building.Store(f)
		s.pending.addKeysTo(f, t.m)
		return nil
	})
	if err == nil {
		err = s.scanInto(f, bRowSeq, nil)
	}
	if err == nil {
		err = s.scanInto(f, bReqJWT, reqFilterKey)
	}
	if err == nil {
		// Put in use by the commit loop too: a write adds its keys to the
		// filter in use and the one being built, read together, and no
		// write runs while the two change.
		err = s.betweenWrites(func() {
			s.filters.active.Store(f)
			s.filters.building.Store(nil)
		})
	}
	if err != nil {
		s.filters.building.CompareAndSwap(f, nil)
		if !errors.Is(err, errFilterStopped) && !errors.Is(err, ledger.ErrClosed) {
			s.filters.retryAt.Store(time.Now().Add(filterRetry).UnixNano())
			log.Warn("row store (bbolt): building the key filter failed; lookups of keys the filter does not hold read the file; tried again after a minute of writes", slog.Any("error", err))
		}
		return
	}
	log.Info("row store (bbolt): key filter ready", slog.Int64("keys", f.added.Load()), slog.Int64("capacity", f.capacity),
		slog.Int("mib", len(f.bits)*8>>20), slog.Duration("took", time.Since(t0).Round(time.Millisecond)))
}

// errFilterStopped: the store was closed during a build.
var errFilterStopped = errors.New("store closed")

// scanInto adds every key of bucket name to f (as filterKey makes it, when
// set), filterChunk keys a read transaction, until the store closes.
func (s *Store) scanInto(f *keyFilter, name []byte, filterKey func([]byte) []byte) error {
	var after []byte
	for done := false; !done; {
		select {
		case <-s.quit:
			return errFilterStopped
		default:
		}
		err := s.db.View(func(btx *bolt.Tx) error {
			c := btx.Bucket(name).Cursor()
			k, v := c.Seek(after)
			if k != nil && after != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
			w := idWidth(name)
			add := func(k []byte) {
				if filterKey != nil {
					f.add(filterKey(k))
				} else {
					f.add(k)
				}
			}
			// A chunk ends after the run that takes it past filterChunk
			// keys.
			for n := 0; ; n++ {
				if k == nil {
					done = true
					return nil
				}
				add(k)
				if entries, ok := runEntries(v, w); ok && len(k) == w {
					for ; len(entries) > 0; entries = entries[w+8:] {
						add(entries[:w])
						n++
					}
				}
				if n >= filterChunk {
					after = append(after[:0], k...)
					return nil
				}
				k, v = c.Next()
			}
		})
		if err != nil {
			return err
		}
		if afterFilterChunk != nil {
			afterFilterChunk()
		}
	}
	return nil
}

// absent reports whether the filter in use (when t has one) says k, a
// bRowSeq or bReqJWT key, is not in the file. A commit-loop transaction
// asks the filter in use now: one put in use by a member of its batch
// holds the keys the members before wrote, and the old one lacks those
// the members after write. A read transaction asks the one in use when
// it began, which holds every key of its snapshot.
func (t *tx) absent(k []byte) bool {
	f := t.kf
	if t.fs != nil {
		f = t.fs.active.Load()
	}
	return f != nil && !f.mayHave(k)
}

// KeyFilter reports how many keys the key filter in use holds; ready is
// false until the first is built.
func (s *Store) KeyFilter() (keys int64, ready bool) {
	f := s.filters.active.Load()
	if f == nil {
		return 0, false
	}
	return f.added.Load(), true
}
