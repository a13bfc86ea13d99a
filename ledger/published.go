package ledger

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger/proof"
)

// checkPublishedLog compares the row store's log with the log published
// to write-once storage: the bucket's latest checkpoint and the largest it
// keeps, hidden ones included, as the integrator compares them before it
// signs (checkPublished, which /readyz reports as "diverged"). Checkpoints
// deleted from the bucket are a finding of their own. When the published tree is not one the
// row store's log extends (a row store restored from a backup older than
// what it published), it is a finding naming both checkpoints, and so is
// each published leaf after the leaves both logs share, read from the
// published entry bundles and checked against the published checkpoint:
// the rows, dispute events and closures acknowledged and published that
// the row store's log lacks.
func (l *Ledger) checkPublishedLog(ctx context.Context, page *IntegrityPage) error {
	finding := func(rowID, format string, args ...any) {
		page.Findings = append(page.Findings, Finding{RowID: rowID, Problem: fmt.Sprintf(format, args...)})
	}
	p, err := l.readPublished(ctx, true, true)
	if err != nil && ctx.Err() == nil {
		// A bucket of a log years old may hold more checkpoints than a
		// listing takes in its time: the log is compared as the
		// integrator compares it, from the live checkpoint and the
		// largest the tiles show, and the hidden ones are not all named.
		finding("", "the checkpoints kept by size in write-once storage were not all listed (%v): checkpoints hidden by delete markers may go unreported; the row store's log is compared with the live checkpoint and the largest the tiles show", err)
		p, err = l.readPublished(ctx, true, false)
	}
	if err != nil {
		finding("", "the row store's log was not compared with the log published to write-once storage: %v", err)
		return nil
	}
	if d := p.deletions(); d != "" {
		finding("", "checkpoints of the log published to write-once storage were deleted: %s. "+
			"Write-once storage keeps every checkpoint the ledger published, so this is someone with delete access to the bucket (or the evidence directory) removing the log's record from sight; on S3 the locked versions stay behind the delete markers. "+
			"The ledger compares the row store's log with the largest checkpoint kept, signs nothing that does not extend it, and writes %scheckpoint again at its next publication. "+
			"Find who deleted them in the bucket's access logs, and remove the delete markers (delete each marker's version) so that readers of the bucket see the log again; see \"Deleted checkpoints\" in docs/operations.md",
			d, LogPrefix)
	}
	_, c, foreign, err := l.comparePublishedLog(ctx, p)
	for _, f := range foreign {
		finding("", "%s: someone with write access to the bucket (or the evidence directory) put it, or another ledger publishes there; the row store's log is not compared with it, and the ledger goes on signing its log in the row store, serves it only as far as it was published, and publishes nothing more to the bucket while it is there (docs/operations.md, \"Objects the ledger did not write\")",
			strings.TrimPrefix(f.Error(), ErrForeignObject.Error()+": "))
	}
	raw := c.raw
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case !errors.Is(err, ErrLogDiverged):
		finding("", "the row store's log was not compared with the log published to write-once storage: %v", err)
		return nil
	}
	why := strings.TrimPrefix(err.Error(), ErrLogDiverged.Error()+": ")
	theirs, perr := checkpointBody(raw)
	if perr != nil || theirs.Origin != l.Origin() {
		finding("", "the log published to write-once storage is not the row store's: %s", why)
		return nil
	}
	size, cp, err := l.logHead(ctx)
	if err != nil {
		return err
	}
	ours := proof.Checkpoint{Origin: l.Origin(), Hash: sha256.Sum256(nil)}
	if len(cp) > 0 {
		if ours, err = checkpointBody(cp); err != nil {
			finding("", "the row store's latest checkpoint cannot be read: %v", err)
			return nil
		}
	}
	pub := tlog.TileHashReader(tlog.Tree{N: theirs.Size, Hash: theirs.Hash}, bucketTiles{ctx: ctx, l: l})
	common, err := l.commonPrefix(ctx, min(size, theirs.Size), pub)
	if err != nil {
		finding("", "the published checkpoint has %d leaves and root %x, the row store's latest checkpoint %d leaves and root %x: the row store's log is not the published log or a continuation of it (%s); the published leaves it lacks cannot be listed: %v",
			theirs.Size, theirs.Hash[:], ours.Size, ours.Hash[:], why, err)
		return nil
	}
	unpublished := ""
	if size > common {
		unpublished = fmt.Sprintf(", and the row store's %d leaves after them are not the published ones", size-common)
	}
	finding("", "the published checkpoint has %d leaves and root %x, the row store's latest checkpoint %d leaves and root %x: the row store's log is not the published log or a continuation of it, as after a restore from a backup older than what was published. "+
		"The two logs share their first %d leaves; the %d published leaves after them are missing from the row store's log (each listed)%s. "+
		"Until they agree no checkpoint is signed, served or published (/readyz: log diverged, signing stopped); see \"Backups\" in docs/operations.md",
		theirs.Size, theirs.Hash[:], ours.Size, ours.Hash[:], common, theirs.Size-common, unpublished)
	return l.listPublished(ctx, common, theirs.Size, pub, finding)
}

// commonPrefix returns how many leading leaves the row store's log shares
// with the published tree pub, up to most: the largest size at which the
// two trees have the same root (two logs that agree at a size agree at
// every smaller one).
func (l *Ledger) commonPrefix(ctx context.Context, most int64, pub tlog.HashReader) (int64, error) {
	lo, hi := int64(0), most // the trees agree at lo; the answer is at most hi
	err := l.store.View(ctx, func(tx Tx) error {
		lr, err := l.logReader(ctx, tx)
		if err != nil {
			return err
		}
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			ours, err := tlog.TreeHash(mid, lr)
			if err != nil {
				return fmt.Errorf("the row store's tree of size %d: %w", mid, err)
			}
			theirs, err := tlog.TreeHash(mid, pub)
			if err != nil {
				return fmt.Errorf("the published tree of size %d: %w", mid, err)
			}
			if ours == theirs {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return nil
	})
	return lo, err
}

// maxListedPublished bounds the published leaves listPublished names one
// by one.
const maxListedPublished = 1000

// listedUpTo is where listPublished stops naming the leaves from from to
// to one by one.
func listedUpTo(from, to int64) int64 {
	return min(to, from+maxListedPublished)
}

// listPublished reports each published leaf from from up to to, read
// from the published entry bundles and checked against the published
// tree pub, as missing from the row store's log, naming what it records.
//
// It lists maxListedPublished leaves at most, and the rest as one
// finding: after a restore from an old backup they may be many, and the
// findings travel in one answer.
func (l *Ledger) listPublished(ctx context.Context, from, to int64, pub tlog.HashReader, finding func(rowID, format string, args ...any)) error {
	// Tiles are read as published, to to (their widths follow it); the
	// leaves are listed to last.
	last := listedUpTo(from, to)
	if last < to {
		defer finding("", "published leaves %d to %d (%d more) are missing from the row store's log too, not listed one by one: they are in %stile/entries", last, to-1, to-last, LogPrefix)
	}
	for n := from >> TileHeight; n<<TileHeight < last; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := tlog.Tile{H: TileHeight, L: 0, N: n, W: int(min(1<<TileHeight, to-n<<TileHeight))}
		path := entriesPath(t)
		bundle, err := l.objects.Get(ctx, LogPrefix+path)
		if err != nil {
			finding("", "published leaves %d to %d cannot be read: %v", max(from, n<<TileHeight), n<<TileHeight+int64(t.W)-1, tileReadError("entry bundle", path, err))
			continue
		}
		leaves, ok := splitBundle(bundle)
		idx := make([]int64, t.W)
		for i := range idx {
			idx[i] = tlog.StoredHashIndex(0, n<<TileHeight+int64(i))
		}
		hashes, err := pub.ReadHashes(idx)
		if !ok || len(leaves) != t.W || err != nil {
			finding("", "published leaves %d to %d cannot be checked against the published checkpoint: the entry bundle %s%s or its tiles do not match it (%v)", max(from, n<<TileHeight), n<<TileHeight+int64(t.W)-1, LogPrefix, path, err)
			continue
		}
		for i, data := range leaves {
			at := n<<TileHeight + int64(i)
			if at < from || at >= last {
				continue
			}
			if tlog.RecordHash(data) != hashes[i] {
				finding("", "published leaf %d in %s%s does not hash to the published tree's leaf: it was altered", at, LogPrefix, path)
				continue
			}
			if err := l.missingLeaf(ctx, at, data, finding); err != nil {
				return err
			}
		}
	}
	return nil
}

// missingLeaf reports published leaf at, which the row store's log lacks,
// with what it records and whether the row store holds its row.
func (l *Ledger) missingLeaf(ctx context.Context, at int64, data []byte, finding func(rowID, format string, args ...any)) error {
	const missing = "is missing from the row store's log"
	f, err := ParseLeaf(data)
	if err != nil {
		finding("", "published leaf %d (not a leaf this version reads) %s", at, missing)
		return nil
	}
	id := f["row"]
	held := ""
	if id != "" {
		if err := l.store.View(ctx, func(tx Tx) error {
			_, err := tx.Row(id)
			switch {
			case err == nil:
				held = "the row store holds the row (written again since?)"
				if idx, err := tx.LeafIndex(id); err == nil {
					held += fmt.Sprintf(" under leaf %d", idx)
				}
			case errors.Is(err, ErrStoreEdited):
				held = "the row store holds a record of the row it does not serve: " + err.Error()
			case errors.Is(err, ErrNotFound):
				held = "the row store does not hold the row"
				if _, err := tx.Tombstone(id); err == nil {
					held += " (a retention sweep removed it)"
				} else if !errors.Is(err, ErrNotFound) {
					return err
				}
			default:
				return err
			}
			return nil
		}); err != nil {
			return err
		}
	}
	switch f["kind"] {
	case LeafReceipt, LeafRefusal:
		finding(id, "published leaf %d, the %s of row %s (status %s, recorded %s, evidence %s), %s; %s", at, f["kind"], id, f["status"], f["recorded"], f["evidence"], missing, held)
	case LeafDispute:
		finding(id, "published leaf %d, dispute event %s of row %s (status %s, at %s), %s; %s", at, f["event"], id, f["status"], f["at"], missing, held)
	case LeafIncidentClose:
		finding(id, "published leaf %d, the closure of incident %s of row %s at %s, %s; %s", at, f["incident"], id, f["at"], missing, held)
	case LeafPolicy:
		finding("", "published leaf %d, the retention policy logged at %s, %s", at, f["at"], missing)
	default:
		finding(id, "published leaf %d, of kind %s, %s", at, f["kind"], missing)
	}
	return nil
}

// bucketTiles reads the published hash tiles from write-once storage, for
// tlog.TileHashReader, which checks them against the published
// checkpoint.
type bucketTiles struct {
	ctx context.Context
	l   *Ledger
}

func (bucketTiles) Height() int { return TileHeight }

func (b bucketTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := b.l.objects.Get(b.ctx, LogPrefix+tilePath(t))
		if err != nil {
			return nil, tileReadError("tile", tilePath(t), err)
		}
		out[i] = data
	}
	return out, nil
}

func (bucketTiles) SaveTiles([]tlog.Tile, [][]byte) {}
