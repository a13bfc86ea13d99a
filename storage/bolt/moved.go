package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The mark of a moved file. Once a move of the file into PostgreSQL has
// verified (storage/move), the move marks the file in bMeta: the store
// it went to, when, and the file's last write transaction it copied. The
// ledger lives in the database from then on: Open and CompactFile refuse
// a marked file, so that a ledgerd started again on it (a leftover
// service, a rollback, a second host) does not acknowledge writes beside
// the one on the database, with the same sequence numbers, data
// directory and bucket. The read-only uses (OpenExport: the move run
// again, its verification) go on. ClearMoved removes the mark, for an
// operator who goes back to the file.
//
// The mark also replaces the file's layout mark with movedLayout and
// keeps the layout in the mark: a version that knows no move mark
// refuses the file as one of a newer layout instead of writing to it.
// ClearMoved puts the layout back.
var kMoved = []byte("moved to")

// movedLayout is the layout mark of a moved file: newer than any layout,
// so that a version without the move mark refuses it.
const movedLayout = 1 << 32

// ErrMoved: the file was moved into another store and carries the mark
// of it; ledgerd runs on that store now.
var ErrMoved = errors.New("the bbolt file was moved to PostgreSQL")

// Moved is the mark of a moved file.
type Moved struct {
	// Store is the kind of store the file was moved to ("PostgreSQL").
	Store string `json:"store"`
	// Database names the database the file was moved to, without its
	// password (postgres://user@host:port/name).
	Database string `json:"database"`
	// At is when the move verified and the file was marked.
	At time.Time `json:"at"`
	// Began is when the move began, as the database records it: with
	// Database, it names the move the mark is of.
	Began time.Time `json:"began"`
	// Version is the file's last write transaction the move copied.
	Version uint64 `json:"version"`
	// Layout is the file's layout, which the mark keeps while the
	// layout mark says movedLayout.
	Layout uint64 `json:"layout"`
	// MarkedIn is the write transaction that marked the file: while the
	// file's last write transaction is this one, nothing was written to
	// it since the move copied it.
	MarkedIn uint64 `json:"markedIn"`
}

// Unchanged reports whether the file, whose last write transaction is
// version, was not written to since it was marked: the move copied it
// as it is.
func (m *Moved) Unchanged(version uint64) bool { return m != nil && m.MarkedIn == version }

// readMoved returns the mark of btx's file, nil when it has none.
func readMoved(btx *bolt.Tx) (*Moved, error) {
	b := btx.Bucket(bMeta)
	if b == nil {
		return nil, nil
	}
	v := b.Get(kMoved)
	if v == nil {
		return nil, nil
	}
	var m Moved
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("the file's mark that it was moved is unreadable (%v): it was moved; run ledgerd on the store it was moved to", err)
	}
	return &m, nil
}

// movedError is the refusal of a write to the file at path, marked m.
func movedError(path string, m *Moved) error {
	return fmt.Errorf("%w (%s) at %s: run ledgerd on that store (store.kind postgres), where the ledger is now; nothing was written to the file, which takes no more writes. Only to go back to the file (a rollback, the database no longer used): stop every ledgerd on the database and run `ledgerd unmark-moved %s`; the rows written on the database since the move are not in the file",
		ErrMoved, m.Database, m.At.UTC().Format(time.RFC3339), path)
}

// refuseMoved returns movedError when the file of btx carries the mark.
func refuseMoved(btx *bolt.Tx, path string) error {
	m, err := readMoved(btx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMoved, err)
	}
	if m != nil {
		return movedError(path, m)
	}
	return nil
}

// ErrWrittenSince: the file was written to after the move read it.
var ErrWrittenSince = errors.New("the bbolt file was written to since the move began")

// openToMark opens the closed store file at path to mark or unmark it,
// waiting up to timeout (default 5 s) for its lock: an error wrapping
// ErrLocked means another process has the file.
func openToMark(path string, timeout time.Duration) (*bolt.DB, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db, err := openLocked(path, bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistArrayType})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// MarkMoved marks the closed store file at path as moved to m's store,
// in one write transaction under the file's lock (waiting up to timeout,
// default 5 s, for it: an error wrapping ErrLocked means another process
// has the file). m.Version is the file's last write transaction the move
// copied: a file written to since is refused (ErrWrittenSince) and left
// unmarked. A file already marked is left as it is; its mark is returned.
// Otherwise the mark written is returned.
func MarkMoved(path string, m Moved, timeout time.Duration) (*Moved, error) {
	db, err := openToMark(path, timeout)
	if err != nil {
		return nil, err
	}
	// A file already marked is only read: a write transaction, even one
	// that changes nothing, would make the file's version another.
	var mark *Moved
	err = db.View(func(btx *bolt.Tx) error {
		var err error
		mark, err = readMoved(btx)
		return err
	})
	if err == nil && mark == nil {
		err = db.Update(func(btx *bolt.Tx) error {
			var err error
			mark, err = putMoved(btx, m)
			return err
		})
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("mark %s as moved: %w", path, err)
	}
	return mark, nil
}

// putMoved writes the mark m in btx, unless the file was written to
// since the move read it (m.Version), and returns the mark written.
func putMoved(btx *bolt.Tx, m Moved) (*Moved, error) {
	// This transaction's id is the one after the last committed.
	if last := uint64(btx.ID()) - 1; last != m.Version {
		return nil, fmt.Errorf("%w (last write transaction %d when the move read it, %d now): it was not marked", ErrWrittenSince, m.Version, last)
	}
	meta := btx.Bucket(bMeta)
	if meta == nil {
		return nil, fmt.Errorf("%w: it has no meta bucket", ErrNotLedger)
	}
	m.Layout = fileLayout(btx)
	if err := newerLayout(m.Layout); err != nil {
		return nil, err
	}
	m.MarkedIn = uint64(btx.ID())
	if m.Store == "" {
		m.Store = "PostgreSQL"
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := meta.Put(kLayout, binary.BigEndian.AppendUint64(nil, movedLayout)); err != nil {
		return nil, err
	}
	return &m, meta.Put(kMoved, raw)
}

// ClearMoved removes the mark of a move from the closed store file at
// path and puts its layout mark back, so that ledgerd serves the file
// again: for an operator who goes back to the file after a move. It
// waits up to timeout (default 5 s) for the file's lock: an error
// wrapping ErrLocked means another process has the file, and nothing
// was changed. It returns the mark it removed, nil when the file had
// none (and was left as it was).
func ClearMoved(path string, timeout time.Duration) (*Moved, error) {
	db, err := openToMark(path, timeout)
	if err != nil {
		return nil, err
	}
	var cleared *Moved
	var had bool
	if err = db.View(func(btx *bolt.Tx) error {
		if meta := btx.Bucket(bMeta); meta != nil {
			had = meta.Get(kMoved) != nil
		}
		// An unreadable mark is removed all the same, the layout mark
		// set to this version's.
		cleared, _ = readMoved(btx)
		return nil
	}); err == nil && had {
		err = db.Update(func(btx *bolt.Tx) error {
			meta := btx.Bucket(bMeta)
			layoutWas := uint64(layout)
			if cleared != nil && cleared.Layout > 0 {
				layoutWas = cleared.Layout
			}
			if err := meta.Put(kLayout, binary.BigEndian.AppendUint64(nil, layoutWas)); err != nil {
				return err
			}
			return meta.Delete(kMoved)
		})
		if err == nil && cleared == nil {
			cleared = &Moved{}
		}
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("clear the mark of a move from %s: %w", path, err)
	}
	return cleared, nil
}

// Moved returns the file's mark of a move, nil when it has none.
func (e *Export) Moved() (*Moved, error) {
	var m *Moved
	err := view(e.db, func(btx *bolt.Tx) error {
		var err error
		m, err = readMoved(btx)
		return err
	})
	return m, err
}
