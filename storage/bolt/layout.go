package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

// The file's layout version (docs/design/017-row-store-layout.md).
// Layout 1 kept rows and every index under the row's 64-hex id, and
// values as plain JSON; layout 2 numbers rows in commit order, keys ids
// by their 32 bytes and compresses values. Open converts a layout-1 file
// in place, in transactions of convertBatch entries, each recording how
// far it got: a conversion stopped by a crash resumes where it stopped.
// Layout 3 adds the drill pool (bDrillPool), filled from the rows at the
// conversion of an older file. Layout 4 (docs/design/019) keys a stored
// row's leaf index, evidence bundle and evidence record by the row's
// number instead of its id; the conversion moves the ones an older file
// keeps by id. Layout 5 counts the rows naming each JWKS snapshot
// (bSnapCounts) instead of keeping a key per row and snapshot
// (bSnapLinks); the conversion counts the links, then deletes them.
// Layout 6 (docs/design/023) packs an index's entries in runs under one
// key (runs.go); the conversion merges layout 5's key per entry into
// runs. Layout 7 (docs/design/024) keys a request JWT's hash in
// bReqJWT by its first 16 bytes (numbers.go). Layout 8 writes object
// records and outbox entries in a binary form (location.go, queued.go)
// and sequenced leaves uncompressed, and reads those of earlier layouts
// as they are: a layout-7 file needs no conversion, only its mark, so
// that an earlier version refuses it. Layout 9 (docs/design/028) keeps
// the row numbers by id and the request JWTs by hash in runs (idruns.go);
// an entry of layout 8 is a run of one, so the step needs only the mark:
// an earlier version would not see the entries within runs. Layout 10
// (docs/design/032) writes the keys rows add to those two buckets later,
// in key order, keeping them meanwhile in records by row number
// (bPending, pending.go); a layout-9 file has none pending, so the step
// needs only the mark: an earlier version would not see the pending keys.
// Layout 11 (docs/design/012) indexes the receipt rows whose receipt
// signature passed by grant (ixSigned), the rows a grant's countMax check
// reads; the conversion fills the index from an older file's rows
// (signedPass), and an earlier version would leave it behind its writes.
const layout = 11

var (
	kLayout = []byte("layout")
	// kConverted + a pass's name: the last old key that pass converted.
	kConverted = "layout2 converted "
	// kPassDone + a pass's name: that pass is complete.
	kPassDone = "layout2 done "
)

// Layout-1 buckets: read by the conversion, then deleted.
var (
	oldRows      = []byte("rows")
	oldReqJWT    = []byte("request_jwt")
	oldLogIndex  = []byte("log_index")
	oldObjects   = []byte("objects")
	oldSnapLinks = []byte("snapshot_rows")
	oldSnapRefs  = []byte("snapshot_refs")
	oldIndexes   = [][]byte{[]byte("ix_principal"), []byte("ix_grant"), []byte("ix_target"), []byte("ix_agent"),
		[]byte("ix_status"), []byte("ix_class"), []byte("ix_time"), []byte("ix_expiry")}
	oldBuckets = append([][]byte{oldRows, oldReqJWT, oldLogIndex, oldObjects, oldSnapLinks, oldSnapRefs, bSnapLinks, bRowLeaf}, oldIndexes...)
)

// convertBatch is how many old entries one conversion transaction takes.
var convertBatch = 5000

// afterConvertBatch, when set (by tests), runs after each committed
// conversion transaction; an error stops the conversion there.
var afterConvertBatch func(pass string) error

// conversionPass rewrites the entries of one bucket of an older layout.
type conversionPass struct {
	name   string
	bucket []byte
	what   string // what its entries are, for the log
	fn     func(t *tx, k, v []byte) error
	// stop, when set, ends the pass at the first key it accepts (a pass
	// over the part of a bucket its keys sort in).
	stop func(k []byte) bool
}

var conversionPasses = []conversionPass{
	{"rows", oldRows, "rows", func(t *tx, k, v []byte) error {
		raw, err := t.c.Decode(v)
		if err != nil {
			return fmt.Errorf("row %s: %w", k, err)
		}
		var r ledger.Row
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("row %s: %w", k, err)
		}
		n, err := t.counter(kRowSeqN, 1)
		if err != nil {
			return err
		}
		seq := seqKey(n)
		if err := t.b(bRowSeq).Put(idKey(r.ID), seq); err != nil {
			return err
		}
		if err := t.insertRow(&r, seq); err != nil {
			return err
		}
		return t.linkSnapshots(&r)
	}, nil},
	{"request JWTs", oldReqJWT, "request-JWT entries", func(t *tx, k, v []byte) error {
		// The first row that used it, by its number (the rows pass ran
		// first). An entry naming no stored row points nowhere and is
		// left out.
		seq := t.get(bRowSeq, idKey(string(v)))
		if seq == nil {
			return nil
		}
		return t.b(bReqJWT).Put(idKey(string(k)), rowNumber(seq))
	}, nil},
	{"leaf index", oldLogIndex, "log index entries", func(t *tx, k, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("leaf index of %s: %d bytes", k, len(v))
		}
		return t.putLeafIndex(string(k), int64(binary.BigEndian.Uint64(v)))
	}, nil},
	{"objects", oldObjects, "object records", func(t *tx, k, v []byte) error {
		loc, err := decodeLocation(t.c, string(k), v)
		if err != nil {
			return err
		}
		return t.b(bObjects).Put(objectKey(string(k)), encodeLocation(loc))
	}, nil},
}

// poolPass fills the drill pool from the stored rows: the conversion
// from layout 2 (a layout-1 file gets its entries as its rows are
// converted, and the pass adds any a stopped conversion left out).
var poolPass = conversionPass{"drill pool", bRowData, "drill pool entries", func(t *tx, k, v []byte) error {
	r, err := decodeRow(t.c, k, v)
	if err != nil {
		return err
	}
	if !ledger.Drillable(r) {
		return nil
	}
	if len(k) != 8 {
		return fmt.Errorf("row number %x", k)
	}
	return setPoolBit(t.b(bDrillPool), binary.BigEndian.Uint64(k), true)
}, nil}

// signedPass brings a file to layout 11: each stored receipt row whose
// receipt signature passed gets its entry in the index of the rows that
// can count under its grant (ixSigned). A layout-1 file gets its entries
// as its rows are converted; an entry already there stays as it is.
var signedPass = conversionPass{"signed rows", bRowData, "receipts whose signature passed, by grant", func(t *tx, k, v []byte) error {
	r, err := decodeRow(t.c, k, v)
	if err != nil {
		return err
	}
	if !r.ReceiptVerified() || r.GrantID == "" {
		return nil
	}
	if len(k) != 8 {
		return fmt.Errorf("row number %x", k)
	}
	return insertEntry(t.b(ixSigned), indexPrefix(r.GrantID), indexPosting(r.IssuedAt, k))
}, nil}

// byNumberPasses bring a file to layout 4: what a stored row's id keyed
// moves to keys by its number.
var byNumberPasses = []conversionPass{
	{"row leaf index", bRowSeq, "rows' leaf indexes", func(t *tx, k, v []byte) error {
		if len(v) != 16 {
			return nil
		}
		if err := putRowLeaf(t.b(bRowLeaves), v[:8], binary.BigEndian.Uint64(v[8:])); err != nil {
			return err
		}
		return t.b(bRowSeq).Put(k, v[:8])
	}, nil},
	{"evidence by number", bEvidence, "evidence bundles", func(t *tx, k, v []byte) error {
		if len(k) == 8 {
			return nil // by number already
		}
		seq := t.seqOf(string(k))
		if seq == nil {
			return nil // no stored row's
		}
		if err := t.b(bEvidence).Put(seq, v); err != nil {
			return err
		}
		return t.b(bEvidence).Delete(k)
	}, nil},
	{"object records by number", bObjects, "evidence records", func(t *tx, k, v []byte) error {
		seq := t.seqOf(idString(k[1:]))
		if seq == nil {
			return nil // a swept row's: kept by its id
		}
		if err := t.b(bObjects).Put(rowObjectKey(seq), v); err != nil {
			return err
		}
		return t.b(bObjects).Delete(k)
	}, func(k []byte) bool { return !(len(k) == 33 && k[0] == 1) }},
}

// snapshotCountPass brings a file to layout 5: each of layout 4's
// snapshot links counts its row in.
var snapshotCountPass = conversionPass{"snapshot counts", bSnapLinks, "snapshot links", func(t *tx, k, _ []byte) error {
	if len(k) != 4+8 {
		return fmt.Errorf("snapshot link %x: %d bytes", k, len(k))
	}
	return t.addSnapshotCount(k[:4], 1)
}, nil}

// bRowLeaf: layouts 4 and 5 kept a row's leaf index by the row's number,
// a key per row; layout 6 keeps them in runs (bRowLeaves).
var bRowLeaf = []byte("row_leaf_index")

// rowLeavesPass brings a file to layout 6: each leaf index of bRowLeaf
// joins bRowLeaves' runs.
var rowLeavesPass = conversionPass{"row leaves", bRowLeaf, "rows' leaf indexes into runs", func(t *tx, k, v []byte) error {
	if len(k) != 8 || len(v) != 8 {
		return fmt.Errorf("leaf index of row %x: %x", k, v)
	}
	return putRowLeaf(t.b(bRowLeaves), k, binary.BigEndian.Uint64(v))
}, nil}

// runPasses bring a file to layout 6: each index entry that is a run of
// one (every key of layout 5) joins the run before it, if the entry's
// value has one with room.
var runPasses = func() []conversionPass {
	var ps []conversionPass
	for _, b := range indexBuckets {
		ps = append(ps, conversionPass{"runs " + string(b), b, "index entries into runs (" + string(b) + ")", func(t *tx, k, v []byte) error {
			if len(v) > 0 {
				return nil // a run already
			}
			if len(k) < entryKeyLen {
				return fmt.Errorf("index %s: key %x: %d bytes", b, k, len(k))
			}
			prefix := k[:len(k)-entryKeyLen]
			p, _ := runHead(k, prefix)
			bk := t.b(b)
			if err := bk.Delete(k); err != nil {
				return err
			}
			return insertEntry(bk, prefix, p)
		}, nil})
	}
	return ps
}()

// reqJWTPasses bring a file to layout 7: a text hash of 15 characters,
// whose key was 16 bytes long, gets the byte that keeps it from short
// keys (first, so that the second pass sees only its own 16-byte keys),
// then each hex hash moves to its short key, unless another already
// holds it: the whole key is then where layout 7 keeps such a hash.
var reqJWTPasses = []conversionPass{
	{"request JWT text keys", bReqJWT, "request-JWT text keys", func(t *tx, k, v []byte) error {
		if len(k) != reqKeyLen {
			return nil
		}
		b := t.b(bReqJWT)
		if err := b.Put(append(k[:len(k):len(k)], 0), v); err != nil {
			return err
		}
		return b.Delete(k)
	}, nil},
	{"request JWT short keys", bReqJWT, "request-JWT hashes to short keys", func(t *tx, k, v []byte) error {
		if len(k) != 32 {
			return nil
		}
		b := t.b(bReqJWT)
		if b.Get(k[:reqKeyLen]) != nil {
			return nil
		}
		if err := b.Put(k[:reqKeyLen], v); err != nil {
			return err
		}
		return b.Delete(k)
	}, nil},
}

// ErrLayoutNew: the file has a layout newer than this version's: a newer
// version wrote it, and only such a version reads it.
var ErrLayoutNew = errors.New("the file was written by a newer version")

// fileLayout returns the layout the file of btx records: 0 for a new
// file, and for a layout-1 file, which recorded none.
func fileLayout(btx *bolt.Tx) uint64 {
	if m := btx.Bucket(bMeta); m != nil {
		return metaUint(m, kLayout)
	}
	return 0
}

// newerLayout returns an error wrapping ErrLayoutNew when version is
// newer than this version's layout, else nil.
func newerLayout(version uint64) error {
	if version <= layout {
		return nil
	}
	return fmt.Errorf("%w (the file has layout %d, newer than this version's %d): run the version that wrote it, or a newer one", ErrLayoutNew, version, layout)
}

// convertLayout brings the file at db to this version's layout: a new
// file is marked, a layout-1 file converted, a newer one refused.
func convertLayout(db *bolt.DB, c *Codec, log *slog.Logger) error {
	var version uint64
	old := false
	if err := db.View(func(btx *bolt.Tx) error {
		version = fileLayout(btx)
		for _, b := range oldBuckets {
			old = old || btx.Bucket(b) != nil
		}
		return nil
	}); err != nil {
		return err
	}
	if err := newerLayout(version); err != nil {
		return err
	}
	if version == layout && !old {
		return nil
	}
	start := time.Now()
	if old || version > 0 {
		log.Info(fmt.Sprintf("row store (bbolt): converting the file from layout %d to layout %d (rows numbered in commit order, compressed values, the drill pool, a row's leaf index, evidence and evidence record by its number, counts of the rows naming each JWKS snapshot, index entries in runs, request JWTs by a short key, object records and outbox entries in binary, row numbers and request JWTs in runs, then written in key order after their rows, an index of the receipts whose signature passed by grant); it resumes where it stopped if interrupted", max(version, 1), layout),
			slog.String("path", db.Path()))
	}
	// Each pass finds nothing to do in a file already past it, but those
	// over the rows still read every row: the pool pass runs on files
	// before layout 3, the passes to keys by number before layout 4, the
	// pass of the signed rows before layout 11.
	passes := conversionPasses[:len(conversionPasses):len(conversionPasses)]
	if version < 3 {
		passes = append(passes, poolPass)
	}
	if version < 4 {
		passes = append(passes, byNumberPasses...)
	}
	passes = append(passes, snapshotCountPass)
	if version < 6 {
		passes = append(append(passes, rowLeavesPass), runPasses...)
	}
	if version < 7 {
		passes = append(passes, reqJWTPasses...)
	}
	if version < 11 {
		passes = append(passes, signedPass)
	}
	for _, p := range passes {
		if err := p.run(db, c, log); err != nil {
			return fmt.Errorf("convert to layout %d, %s: %w", layout, p.what, err)
		}
	}
	err := db.Update(func(btx *bolt.Tx) error {
		for _, b := range oldBuckets {
			if btx.Bucket(b) == nil {
				continue
			}
			if err := btx.DeleteBucket(b); err != nil {
				return err
			}
		}
		meta := btx.Bucket(bMeta)
		for _, p := range passes {
			if err := meta.Delete([]byte(kConverted + p.name)); err != nil {
				return err
			}
			if err := meta.Delete([]byte(kPassDone + p.name)); err != nil {
				return err
			}
		}
		if err := meta.Delete([]byte("snapshot_links")); err != nil { // layout 1's mark of complete snapshot links
			return err
		}
		if old || (version > 0 && version < 7) {
			// The old layout's pages are now free (a layout-1 file's
			// buckets, the evidence records moved to keys by number): copy
			// the file without them at this Open (compactIfPending). The
			// steps from layouts 7 and 8 rewrite nothing.
			if err := meta.Put(kCompact, []byte{1}); err != nil {
				return err
			}
		}
		return meta.Put(kLayout, u64(layout))
	})
	if err != nil {
		return fmt.Errorf("convert to layout %d: %w", layout, err)
	}
	if old || version > 0 {
		log.Info(fmt.Sprintf("row store (bbolt): converted the file to layout %d", layout),
			slog.String("path", db.Path()), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	}
	return nil
}

// run converts every entry of p's bucket after the last one converted,
// convertBatch entries per transaction, and logs progress every 10 s.
func (p conversionPass) run(db *bolt.DB, c *Codec, log *slog.Logger) error {
	total, done := 0, 0
	if err := db.View(func(btx *bolt.Tx) error {
		if b := btx.Bucket(p.bucket); b != nil && btx.Bucket(bMeta).Get([]byte(kPassDone+p.name)) == nil {
			total = b.Stats().KeyN
		}
		return nil
	}); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	logged := time.Now()
	for {
		finished := false
		err := db.Update(func(btx *bolt.Tx) error {
			t := &tx{tx: btx, c: c}
			meta := btx.Bucket(bMeta)
			c := btx.Bucket(p.bucket).Cursor()
			last := meta.Get([]byte(kConverted + p.name))
			var k, v []byte
			if last == nil {
				k, v = c.First()
			} else if k, v = c.Seek(last); k != nil && string(k) == string(last) {
				k, v = c.Next()
			}
			// The batch is read, then converted: a pass may write to the
			// bucket it reads, which a cursor must not see mid-walk.
			var batch [][2][]byte
			for ; k != nil && len(batch) < convertBatch && (p.stop == nil || !p.stop(k)); k, v = c.Next() {
				batch = append(batch, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
			}
			end := k == nil || (p.stop != nil && p.stop(k))
			for _, e := range batch {
				if err := p.fn(t, e[0], e[1]); err != nil {
					return err
				}
			}
			var at []byte
			if len(batch) > 0 {
				at = batch[len(batch)-1][0]
			}
			done += len(batch)
			if end {
				finished = true
				return meta.Put([]byte(kPassDone+p.name), []byte{1})
			}
			return meta.Put([]byte(kConverted+p.name), at)
		})
		if err != nil {
			return err
		}
		if afterConvertBatch != nil {
			if err := afterConvertBatch(p.name); err != nil {
				return err
			}
		}
		if finished {
			log.Info(fmt.Sprintf("row store (bbolt): layout %d: converted ", layout)+p.what, slog.Int("converted", done))
			return nil
		}
		if time.Since(logged) >= 10*time.Second {
			log.Info(fmt.Sprintf("row store (bbolt): layout %d: converting ", layout)+p.what, slog.Int("converted", done), slog.Int("of about", total))
			logged = time.Now()
		}
	}
}
