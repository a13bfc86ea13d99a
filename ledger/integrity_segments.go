package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Rows lost from the row store whose evidence reached write-once storage.
//
// A row store put back to an older copy (docs/operations.md, "Backups")
// no longer holds the rows acknowledged after the copy was taken, nor
// records where their evidence went. With the Merkle log on, their
// published leaves name them; with it off, or before their leaves were
// published, only their evidence bundles, packed in segments in
// write-once storage, still tell of them. checkSegments lists those
// segments and names every row one holds that the row store holds
// neither as a row nor as a tombstone.

// segmentsPrefix is the folder of the day folders segments are put in
// (SegmentKey).
const segmentsPrefix = "segments/"

// maxSegmentRead bounds the bytes read of one segment object: the ledger
// puts at most MaxSegmentBytes of bundles in one, with a line of a few
// dozen bytes before each. An object under segments/ that is longer was
// not put by the ledger as a segment and is read no further.
const maxSegmentRead = MaxSegmentBytes + 8<<20

// segmentChunk is how many row ids are looked up in one read transaction.
const segmentChunk = 1000

// FolderLister is an object store that lists the folders under a prefix:
// the folders whose keys start with prefix and hold one more "/", each
// once, ending in "/", in no set order. A folder holding only hidden keys
// (delete markers over kept versions) is listed too.
type FolderLister interface {
	ListFolders(ctx context.Context, prefix string, fn func(folder string) error) error
}

// checkSegments lists every segment in write-once storage (first page
// only) and reads those the row store does not count members of, and
// reports each row a segment holds that the row store holds neither as
// a row nor as a tombstone: an acknowledged row lost from the row store.
//
// A segment the row store counts members of (RefSegment) is not read:
// its members were recorded together, in the transaction that counted
// them, so a row store that counts it holds each of them or its
// tombstone, whatever copy it was put back to. Its cost is therefore a
// listing of segments/ (one request per day folder, and one per
// thousand keys in a folder) and one count looked up per segment; the
// bytes read are those of the segments the row store does not count: in
// an honest ledger only segments put and not yet recorded, or whose
// members were all swept and whose deletion is still queued. A row
// removed from the row store by hand from a segment it counts is not
// found here; its leaf finds it where the log is on.
//
// It needs an object store that lists folders and kept keys
// (FolderLister, KeptLister), as both stores do; of another it checks
// nothing.
func (l *Ledger) checkSegments(ctx context.Context, page *IntegrityPage) error {
	fl, ok := l.objects.(FolderLister)
	kl, ok2 := l.objects.(KeptLister)
	if !ok || !ok2 {
		return nil
	}
	finding := func(id, format string, args ...any) {
		page.Findings = append(page.Findings, Finding{RowID: id, Problem: fmt.Sprintf(format, args...)})
	}
	var folders []string
	if err := fl.ListFolders(ctx, segmentsPrefix, func(f string) error {
		folders = append(folders, f)
		return nil
	}); err != nil {
		finding("", "the segments in write-once storage cannot be listed, to find rows the row store lost: %v", err)
		return nil
	}
	slices.Sort(folders)
	var segs []KeptKey
	for _, f := range folders {
		if err := kl.ListKept(ctx, f, func(k KeptKey) error {
			if strings.HasSuffix(k.Key, ".seg") {
				segs = append(segs, k)
			}
			return nil
		}); err != nil {
			finding("", "the segments in write-once storage under %s cannot be listed, to find rows the row store lost: %v", f, err)
		}
	}
	slices.SortFunc(segs, func(a, b KeptKey) int { return strings.Compare(a.Key, b.Key) })
	for chunk := range slices.Chunk(segs, segmentChunk) {
		var unrecorded []KeptKey
		err := l.store.View(ctx, func(tx Tx) error {
			for _, k := range chunk {
				n, err := tx.Count(RefSegment, k.Key, 0)
				if err != nil {
					return fmt.Errorf("count members of segment %s: %w", k.Key, err)
				}
				if n == 0 {
					unrecorded = append(unrecorded, k)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range unrecorded {
			b, err := l.readSegment(ctx, k)
			if err != nil {
				finding("", "the segment %s in write-once storage cannot be read, to find rows the row store lost: %v", k.Key, err)
				continue
			}
			ids, err := segmentRowIDs(b)
			if err != nil {
				finding("", "the segment %s in write-once storage cannot be read, to find rows the row store lost: %v", k.Key, err)
			}
			lost, err := l.heldNowhere(ctx, ids)
			if err != nil {
				return err
			}
			for _, id := range lost {
				finding(id, "row %s's evidence is in write-once storage (segment %s), but the row store holds neither the row nor its tombstone: it was acknowledged and is lost from the row store (restored from an older backup?); "+
					"fsck --restore cannot put it back (it mends the evidence of rows the row store holds): the segment keeps the row's evidence bundle, its receipt and tokens as posted (see Backups in docs/operations.md)", id, k.Key)
			}
		}
	}
	return nil
}

// readSegment reads at most maxSegmentRead bytes of segment k (its kept
// version where the store keeps versions), in one ranged read where the
// store reads ranges, else whole.
func (l *Ledger) readSegment(ctx context.Context, k KeptKey) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	vr, versioned := l.objects.(VersionReader)
	rr, ranged := l.objects.(RangeReader)
	switch {
	case versioned && k.Version != "":
		b, err = vr.GetRangeVersion(ctx, k.Key, k.Version, 0, maxSegmentRead+1)
	case ranged:
		b, err = rr.GetRange(ctx, k.Key, 0, maxSegmentRead+1)
	default:
		b, err = l.objects.Get(ctx, k.Key)
	}
	if err != nil {
		return nil, err
	}
	if len(b) > maxSegmentRead {
		return nil, fmt.Errorf("it holds more than %d bytes, more than the ledger puts in a segment", maxSegmentRead)
	}
	return b, nil
}

// segmentRowIDs returns the row ids segment b holds, in order: after
// segmentHeader, each row is "<row id> <length>\n", its bundle and "\n".
// It returns those read before the first that does not parse, with why.
func segmentRowIDs(b []byte) ([]string, error) {
	rest, ok := bytes.CutPrefix(b, []byte(segmentHeader))
	if !ok {
		return nil, errors.New("it does not start as a segment does")
	}
	var ids []string
	for at := len(segmentHeader); len(rest) > 0; {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		id, size, ok2 := strings.Cut(string(line), " ")
		n, err := strconv.Atoi(size)
		if !ok || !ok2 || !ValidID(id) || err != nil || n < 0 || n+1 > len(after) || after[n] != '\n' {
			return ids, fmt.Errorf("the row at byte %d is not one \"<row id> <length>\" line and its bundle", at)
		}
		ids = append(ids, id)
		at += len(line) + 1 + n + 1
		rest = after[n+1:]
	}
	return ids, nil
}

// heldNowhere returns the ids of ids the row store holds neither as a
// row nor as a tombstone.
func (l *Ledger) heldNowhere(ctx context.Context, ids []string) ([]string, error) {
	var lost []string
	for chunk := range slices.Chunk(ids, segmentChunk) {
		err := l.store.View(ctx, func(tx Tx) error {
			if err := prefetch(tx, Prefetch{Rows: chunk, Tombstones: chunk}); err != nil {
				return err
			}
			for _, id := range chunk {
				_, err := tx.Row(id)
				if !errors.Is(err, ErrNotFound) {
					// A row the store holds but does not serve, edited
					// outside the ledger, is held: the index check names it.
					if err != nil && !errors.Is(err, ErrStoreEdited) {
						return err
					}
					continue
				}
				switch _, err := tx.Tombstone(id); {
				case errors.Is(err, ErrNotFound):
					lost = append(lost, id)
				case err != nil:
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return lost, nil
}
