package bolt

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/pactledger/pactledger/internal/fsync"
)

// Compaction. A file with many free pages writes its whole free list with
// every commit (the list is kept on disk, docs/design/010), and bbolt
// sorts it each time: after the layout-2 conversion freed the old
// layout's pages (several GB for a million rows), every commit would
// write and sort a list of a million page numbers until new rows reused
// them. So the conversion's last transaction marks the file, and Open
// copies a marked file into a new one without free pages and puts it in
// the old one's place (docs/design/017).
//
// The copy is written beside the file (path + compactSuffix), synced,
// then renamed over it; a crash before the rename leaves the file as it
// was, still marked, and the next Open starts the copy again. A copy that
// fails for lack of room leaves it as it was too, and in use (the mark
// only saves the work of commits with a long free list). CompactFile
// does not mark the file: it copies it and renames the copy. When path
// is a symbolic link, the copy is written beside the file it names and
// renamed over that file: the link stays, and names the copy.

// kCompact in bMeta marks a file to be compacted at the next Open.
var kCompact = []byte("compact pending")

const compactSuffix = ".compacting"

// compactTxBytes bounds the bytes one transaction of the copy writes.
const compactTxBytes = 64 << 20

// compactIfPending compacts the file of db if it is marked, and returns
// the database to go on with (db itself when nothing was done, or when
// the copy could not be opened in its place, with the error; nil when
// the old file could not be closed).
//
// The mark only saves work: the marked file is whole, and serves as well
// as its copy, only with a longer free list. A copy that fails for lack
// of room (a full disk, a quota, a file size limit) leaves it in use,
// still marked, with a WARN naming the cause: the next Open with room
// copies it.
func compactIfPending(db *bolt.DB, timeout time.Duration, log *slog.Logger) (*bolt.DB, error) {
	path, err := filepath.EvalSymlinks(db.Path())
	if err != nil {
		return db, fmt.Errorf("compact: %w", err)
	}
	tmp := path + compactSuffix
	pending := false
	if err := db.View(func(btx *bolt.Tx) error {
		pending = btx.Bucket(bMeta).Get(kCompact) != nil
		return nil
	}); err != nil {
		return db, err
	}
	if !pending {
		if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
			return db, fmt.Errorf("remove an unfinished copy: %w", err)
		}
		return db, nil
	}
	ndb, err := compactNow(db, timeout, log)
	if errors.Is(err, errNotReplaced) && noRoom(err) {
		log.Warn("row store (bbolt): the file marked for a copy without its free pages could not be copied for lack of room, and is used as it is; every commit writes its free list until its pages are reused. The next start with free disk space of about the file's size copies it",
			slog.String("path", path), slog.String("error", err.Error()))
		return db, nil
	}
	return ndb, err
}

// errNotReplaced marks a compaction that failed before its copy took
// the file's place: the file at the path is still the one db has open.
// After the rename, the open file is no longer the one at the path, and
// only the copy may be used.
var errNotReplaced = errors.New("the file was left in place")

// compactNow copies the file of db without its free pages into a new
// file beside it and renames the copy over it (see compactIfPending for
// what it returns). A copy that fails is removed, and leaves the file as
// it was.
func compactNow(db *bolt.DB, timeout time.Duration, log *slog.Logger) (*bolt.DB, error) {
	path, err := filepath.EvalSymlinks(db.Path())
	if err != nil {
		return db, fmt.Errorf("compact: %w", err)
	}
	tmp := path + compactSuffix
	start := time.Now()
	before := db.Stats().FreePageN
	size := fileSize(path)
	log.Info("row store (bbolt): copying the file without its free pages; the copy replaces it when complete",
		slog.String("path", path), slog.Int("free pages", before), slog.Int64("bytes", size))
	if err := copyCompacted(db, tmp, timeout); err != nil {
		os.Remove(tmp)
		return db, fmt.Errorf("compact: %w: %w", errNotReplaced, err)
	}
	// The old file stays open, and locked, until the copy at path is
	// open and locked in its turn: an open waiting for the old file's
	// lock finds then that path names another file (openLocked), and
	// waits for the copy's lock instead of serving the old file.
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return db, fmt.Errorf("compact: put the copy in place: %w: %w", errNotReplaced, err)
	}
	if err := fsync.Dir(filepath.Dir(path)); err != nil {
		return db, fmt.Errorf("compact: %w", err)
	}
	ndb, err := openDB(db.Path(), timeout)
	if err != nil {
		return db, fmt.Errorf("open the compacted file: %w", err)
	}
	if err := db.Close(); err != nil {
		ndb.Close()
		return nil, err
	}
	log.Info("row store (bbolt): compacted the file", slog.String("path", path),
		slog.Int64("bytes before", size), slog.Int64("bytes after", fileSize(path)), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	return ndb, nil
}

// noRoomErrs are the errors of a write that found no room for the copy.
var noRoomErrs = []error{syscall.ENOSPC, syscall.EFBIG, syscall.EDQUOT}

// noRoom reports whether err is a write's lack of room: no space left on
// the device, a file larger than the process may write, a quota. bbolt
// reports some of them as text only ("file resize error: …").
func noRoom(err error) bool {
	for _, e := range noRoomErrs {
		if errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}

// copyCompacted writes every bucket of db into a new file at tmp, unmarked.
func copyCompacted(db *bolt.DB, tmp string, timeout time.Duration) error {
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	dst, err := openDB(tmp, timeout)
	if err != nil {
		return err
	}
	err = copyBuckets(dst, db, compactTxBytes)
	if err == nil {
		err = dst.Update(func(btx *bolt.Tx) error {
			if meta := btx.Bucket(bMeta); meta != nil {
				return meta.Delete(kCompact)
			}
			return nil
		})
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// randomCopyFill is how full the copy fills the pages of a bucket keyed
// at random (a row's id, a request JWT's hash, the principal, grant and
// target indexes): a tenth of each page is left free. Packed full, as
// bbolt.Compact packs every bucket, each insert that follows the
// compaction would land in a full page and split it, and its full parent
// with it, until every page had split once. Two buckets of 10 million
// 32-byte keys, nine inserts in each a commit: 119-143 µs of CPU a row
// full, 85 µs with a tenth free (docs/design/017).
const randomCopyFill = 0.9

// copyFill is the fill the copy gives the pages of bucket name: a bucket
// whose keys arrive in order is filled as its own writes fill it
// (fillPercent); one keyed at random keeps randomCopyFill.
func copyFill(name []byte) float64 {
	if f, ok := fillPercent[string(name)]; ok {
		return f
	}
	return randomCopyFill
}

// copyBuckets copies every bucket of src, with its sequence, into dst, in
// key order, committing whenever a transaction has written txBytes of keys
// and values.
func copyBuckets(dst, src *bolt.DB, txBytes int64) error {
	c := &copier{dst: dst, txBytes: txBytes}
	if err := c.begin(); err != nil {
		return err
	}
	defer func() {
		if c.tx != nil {
			c.tx.Rollback() // after a commit, ErrTxClosed
		}
	}()
	err := view(src, func(stx *bolt.Tx) error {
		return stx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return c.bucket([][]byte{name}, b)
		})
	})
	if err != nil {
		return err
	}
	return c.tx.Commit()
}

// copier is copyBuckets' transaction on the new file.
type copier struct {
	dst     *bolt.DB
	tx      *bolt.Tx
	txBytes int64
	written int64
}

func (c *copier) begin() error {
	tx, err := c.dst.Begin(true)
	c.tx, c.written = tx, 0
	return err
}

// at returns the new file's bucket at path in the current transaction,
// with the fill its top-level bucket is copied at.
func (c *copier) at(path [][]byte) *bolt.Bucket {
	b := c.tx.Bucket(path[0])
	for _, name := range path[1:] {
		b = b.Bucket(name)
	}
	b.FillPercent = copyFill(path[0])
	return b
}

// bucket copies src, found at path, into the new file.
func (c *copier) bucket(path [][]byte, src *bolt.Bucket) error {
	var b *bolt.Bucket
	var err error
	if len(path) == 1 {
		b, err = c.tx.CreateBucket(path[0])
	} else {
		b, err = c.at(path[:len(path)-1]).CreateBucket(path[len(path)-1])
	}
	if err != nil {
		return err
	}
	if err := b.SetSequence(src.Sequence()); err != nil {
		return err
	}
	b = c.at(path)
	cur := src.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if v == nil {
			if err := c.bucket(append(path[:len(path):len(path)], k), src.Bucket(k)); err != nil {
				return err
			}
			b = c.at(path)
			continue
		}
		if c.written += int64(len(k) + len(v)); c.written > c.txBytes {
			if err := c.tx.Commit(); err != nil {
				return err
			}
			if err := c.begin(); err != nil {
				return err
			}
			b = c.at(path)
		}
		if err := b.Put(k, v); err != nil {
			return err
		}
	}
	return nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// CompactFile copies the closed store file at path without its free
// pages and puts the copy in its place, as Open does after a layout
// conversion: for a file whose free pages came from a bulk load or a mass
// deletion. Nothing else may have the file open. The file is not marked
// first: a copy that fails (no room for it) or a crash before the rename
// leaves the file as it was, and an Open uses it as before. A file marked
// as moved (moved.go) is refused with an error wrapping ErrMoved.
func CompactFile(path string, timeout time.Duration) error {
	db, err := openDB(path, timeout)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	// A moved file takes no writes, a copy in its place included.
	if err := db.View(func(btx *bolt.Tx) error { return refuseMoved(btx, path) }); err != nil {
		db.Close()
		return fmt.Errorf("open %s: %w", path, err)
	}
	db, err = compactNow(db, timeout, slog.Default())
	if err != nil {
		if db != nil {
			db.Close()
		}
		return err
	}
	return db.Close()
}
