package verifier

import (
	"crypto/ecdsa"
	"math/big"
	"sync"
	"sync/atomic"

	"github.com/pactledger/pactledger/verifier/p256"
)

// A handful of keys sign nearly every token the ledger checks: each
// Provider's receipt key and each personal agent's request key. The keys
// that verify the most signatures get a table of their multiples (package
// p256), with which a check costs about two fifths of crypto/ecdsa's. Only
// a signature the table accepts is taken from it: one it refuses is
// checked again by crypto/ecdsa, so a table can never turn a signature
// crypto/ecdsa accepts into a failure (docs/design/031).

const (
	// tableAfter is how many signatures a key must verify before it gets
	// a table, and how often after that it asks again for one when none
	// is free: a table costs about thirty verifications to make.
	tableAfter = 64
	// DefaultKeyTables is how many tables are kept unless SetKeyTables
	// says otherwise (p256.Size each, about 384 KiB).
	DefaultKeyTables = 16
	// MaxKeyTables is the most SetKeyTables accepts.
	MaxKeyTables = 256
	// tableWindow is the length of the windows signatures are counted in,
	// in verifications. A key's score is the signatures it verified in the
	// current window and the one before, so a key that stops signing (a
	// rotated key) loses its score within two windows.
	tableWindow = 100_000
	// maxCountedKeys bounds the keys without a table whose signatures are
	// counted in a window; past it the window's counts start again.
	maxCountedKeys = 1024
)

// keyID is a P-256 public key's uncompressed encoding (ecdsa's Bytes).
type keyID string

// keyTable is a table kept, with the signatures verified through it in the
// current window and in the window before.
type keyTable struct {
	table      *p256.Table
	hits, prev atomic.Uint64
}

func (t *keyTable) score() uint64 { return t.hits.Load() + t.prev.Load() }

// keyTables holds the tables of the keys that sign most. When all are
// taken, a key without one gets a table only by having verified more
// signatures over the last two windows than the kept key with the fewest,
// whose table it then replaces.
type keyTables struct {
	after, max int
	window     uint64
	clock      atomic.Uint64 // verifications
	mu         sync.RWMutex
	tables     map[keyID]*keyTable
	// counts and prevCounts are the signatures keys without a table
	// verified in the current window and the one before.
	counts, prevCounts map[keyID]uint64
	making             bool // one table is made at a time
	// newTable makes a key's table: p256.NewTable, which checks the table
	// it made (tests replace it).
	newTable func(*ecdsa.PublicKey) (*p256.Table, error)
	metrics  *KeyTableMetrics
}

func newKeyTables(after, max int, window uint64, m *KeyTableMetrics) *keyTables {
	return &keyTables{after: after, max: max, window: window, tables: make(map[keyID]*keyTable),
		counts: make(map[keyID]uint64), prevCounts: make(map[keyID]uint64), newTable: p256.NewTable, metrics: m}
}

// signingKeyTables are the process's tables; nil when turned off.
var signingKeyTables atomic.Pointer[keyTables]

func init() { SetKeyTables(DefaultKeyTables, nil) }

// SetKeyTables sets how many signing keys' tables the process keeps, from
// 0, every signature checked by crypto/ecdsa alone, to MaxKeyTables (more
// are taken as MaxKeyTables), and the metrics they record (nil: none).
// The tables kept so far are dropped. It is meant to be called once at
// start, before signatures are checked.
func SetKeyTables(n int, m *KeyTableMetrics) {
	m.reset()
	if n <= 0 {
		signingKeyTables.Store(nil)
		return
	}
	signingKeyTables.Store(newKeyTables(tableAfter, min(n, MaxKeyTables), tableWindow, m))
}

// verifyP256 is ecdsa.Verify(pub, digest, r, s), through the process's
// tables when they are on.
func verifyP256(pub *ecdsa.PublicKey, digest []byte, r, s *big.Int) bool {
	if k := signingKeyTables.Load(); k != nil {
		return k.verify(pub, digest, r, s)
	}
	return ecdsa.Verify(pub, digest, r, s)
}

// verify is ecdsa.Verify(pub, digest, r, s), through pub's table when it
// has one. Each signature verified counts towards its key's table.
func (k *keyTables) verify(pub *ecdsa.PublicKey, digest []byte, r, s *big.Int) bool {
	enc, err := pub.Bytes()
	if err != nil {
		return ecdsa.Verify(pub, digest, r, s)
	}
	if k.clock.Add(1)%k.window == 0 {
		k.roll()
	}
	k.mu.RLock()
	t := k.tables[keyID(enc)] // a lookup by the bytes makes no string of them
	k.mu.RUnlock()
	if t != nil {
		ok := t.table.Verify(digest, r, s)
		k.metrics.checked(ok)
		if ok {
			t.hits.Add(1)
			return true
		}
		return ecdsa.Verify(pub, digest, r, s)
	}
	if !ecdsa.Verify(pub, digest, r, s) {
		return false
	}
	k.verified(keyID(enc), pub)
	return true
}

// roll starts a new window.
func (k *keyTables) roll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range k.tables {
		t.prev.Store(t.hits.Swap(0))
	}
	clear(k.prevCounts)
	k.prevCounts, k.counts = k.counts, k.prevCounts
}

// verified counts a signature crypto/ecdsa verified with pub, which has no
// table, and makes pub's table on every k.after-th count if there is room
// for it (room). The table is made by the caller that reached the count,
// outside the lock; the key's other signatures are meanwhile checked by
// crypto/ecdsa.
func (k *keyTables) verified(id keyID, pub *ecdsa.PublicKey) {
	k.mu.Lock()
	if k.tables[id] != nil {
		k.mu.Unlock()
		return
	}
	if len(k.counts) >= maxCountedKeys {
		clear(k.counts)
	}
	k.counts[id]++
	n := k.counts[id]
	if n%uint64(k.after) != 0 || k.making {
		k.mu.Unlock()
		return
	}
	if _, ok := k.room(id); !ok {
		k.mu.Unlock()
		return
	}
	k.making = true
	k.mu.Unlock()

	t, err := k.build(pub)

	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.metrics.failure()
		return // the key keeps being checked by crypto/ecdsa alone
	}
	victim, ok := k.room(id) // the scores moved while the table was made
	if !ok {
		return
	}
	if victim != "" {
		delete(k.tables, victim)
	}
	kt := &keyTable{table: t}
	kt.hits.Store(k.counts[id])
	kt.prev.Store(k.prevCounts[id])
	delete(k.counts, id)
	delete(k.prevCounts, id)
	k.tables[id] = kt
	k.metrics.kept(victim != "", len(k.tables))
}

// build makes pub's table and marks that none is being made, even if
// making it panicked.
func (k *keyTables) build(pub *ecdsa.PublicKey) (*p256.Table, error) {
	defer func() {
		k.mu.Lock()
		k.making = false
		k.mu.Unlock()
	}()
	return k.newTable(pub)
}

// room reports whether id, a key without a table, may have one, and whose
// table it replaces: none while fewer than k.max are kept, else the kept
// table with the lowest score if id's signatures over the two windows are
// more. k.mu is held.
func (k *keyTables) room(id keyID) (victim keyID, ok bool) {
	if len(k.tables) < k.max {
		return "", true
	}
	least := uint64(1<<64 - 1)
	for kid, t := range k.tables {
		if s := t.score(); s < least {
			victim, least = kid, s
		}
	}
	return victim, k.counts[id]+k.prevCounts[id] > least
}
