package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// ErrDamaged: the bbolt file is not what bbolt wrote: cut short, or a
// page of it overwritten. Nothing reads it safely; restore it from a
// backup.
var ErrDamaged = errors.New("the bbolt file is damaged")

// A damaged file makes bbolt panic (a page that is not the one its
// parent names: "assertion failed: Page expected to be …") or, when the
// file is shorter than the pages it uses, fault on its memory map
// (SIGBUS). Every open checks the file's length against its pages first
// (checkLength), and the reads of the whole file (an export, the copy of
// a compaction, the search for leftovers) turn such a panic or fault into
// an error wrapping ErrDamaged (view); any other panic there is a fault of
// the code, not of the file, and goes on. A store's own transactions are
// not guarded: a damaged page they reach still ends the process.

// bbolt's meta page, as the file holds it (go.etcd.io/bbolt
// internal/common: a 16-byte page header, then magic, version, page
// size, flags, the root bucket (root page, sequence), the free list's
// page, the page high-water mark, the transaction id and an FNV-64a
// checksum of what precedes it), in the machine's byte order.
const (
	metaMagic    = 0xED0CDAED
	metaAt       = 16 // the page header
	metaSumOf    = 56 // bytes the checksum covers
	metaLen      = 64
	metaPageSize = 8
	metaHighMark = 40
	metaTxID     = 48
)

// checkLength returns an error wrapping ErrDamaged when the file at path
// is shorter than the pages its newest valid meta page says it uses (a
// copy cut short, a disk that filled), and nil otherwise, or when there
// is no file or no valid meta page to tell (bbolt then says so itself).
//
// It runs before the open takes the file's lock, while a ledgerd may be
// writing the file, so it reads the meta pages before the file's length:
// bbolt grows the file, and writes the pages, before it writes the meta
// page that names them, so the length read after a meta page is never
// shorter than that meta page's pages unless the file is cut short.
func checkLength(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	first, ok0 := readMeta(f, 0)
	pageSize := int64(os.Getpagesize())
	if ok0 {
		pageSize = int64(first.pageSize)
	}
	best, ok := first, ok0
	if second, ok1 := readMeta(f, pageSize); ok1 && (!ok || second.txid > best.txid) {
		best, ok = second, true
	}
	if !ok {
		return nil
	}
	if h := lengthChecking.Load(); h != nil {
		(*h)(path)
	}
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	need := int64(best.highMark) * int64(best.pageSize)
	if st.Size() < need {
		return fmt.Errorf("%w: %s is truncated: %d bytes, its pages need %d: restore it from a backup", ErrDamaged, path, st.Size(), need)
	}
	return nil
}

// lengthChecking, when set (tests), is told of each file checkLength
// checks, between reading its meta pages and its length.
var lengthChecking atomic.Pointer[func(path string)]

// meta is what checkLength reads of a meta page.
type meta struct {
	pageSize uint32
	highMark uint64
	txid     uint64
}

// readMeta reads the meta page at off, and reports whether it is valid.
func readMeta(f *os.File, off int64) (meta, bool) {
	buf := make([]byte, metaAt+metaLen)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return meta{}, false
	}
	m := buf[metaAt:]
	e := binary.NativeEndian
	h := fnv.New64a()
	h.Write(m[:metaSumOf])
	if e.Uint32(m) != metaMagic || h.Sum64() != e.Uint64(m[metaSumOf:]) {
		return meta{}, false
	}
	ps := e.Uint32(m[metaPageSize:])
	if ps < 512 || ps > 1<<20 {
		return meta{}, false
	}
	return meta{pageSize: ps, highMark: e.Uint64(m[metaHighMark:]), txid: e.Uint64(m[metaTxID:])}, true
}

// view is db.View, with a panic of bbolt's on a damaged page or a fault
// on the file's memory map turned into an error wrapping ErrDamaged
// (bbolt rolls the transaction back as the panic passes). Any other panic
// in fn, such as a nil dereference in the code decoding what it read, is
// no sign of a damaged file and goes on as it was.
func view(db *bolt.DB, fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			what, ok := damage(p)
			if !ok {
				panic(p)
			}
			err = fmt.Errorf("%w: reading %s failed (%s): restore it from a backup", ErrDamaged, db.Path(), what)
		}
	}()
	return db.View(fn)
}

// damage reports whether p, a panic recovered in view, is what a damaged
// file makes, and says what happened: one of bbolt's checks of a page it read failing (a string
// that starts "assertion failed", or names a page type or number it
// cannot be), or a fault on memory that debug.SetPanicOnFault turned into
// a panic (a runtime.Error with the address, as a read past the end of a
// file cut short makes, SIGBUS). A nil dereference is not a fault of this
// kind (the runtime's error for it has no address).
func damage(p any) (string, bool) {
	switch p := p.(type) {
	case string:
		for _, s := range bboltDamage {
			if strings.Contains(p, s) {
				return p, true
			}
		}
	case runtime.Error:
		if f, ok := p.(interface{ Addr() uintptr }); ok {
			return fmt.Sprintf("a page could not be read: fault at address %#x, past the end of the file or on a failing disk", f.Addr()), true
		}
	}
	return "", false
}

// bboltDamage are the panics of go.etcd.io/bbolt (v1.5) reading a page
// that is not what its parent names: its assertions (common.Assert and
// the page checks), a page of an unknown type (cursor.go), a page past the
// file's high-water mark (bucket.go, node.go) and a bucket's header that
// is not one (bucket.go).
var bboltDamage = []string{
	"assertion failed",
	"invalid page type",
	"above high water mark",
	"bucket header",
}
