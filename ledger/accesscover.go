package ledger

import (
	"cmp"
	"context"
	"errors"
	"slices"
)

// accessSpan is the access records first to last.
type accessSpan struct{ first, last uint64 }

// accessCover finds the access record numbers that no batch holds: the
// batches recorded as uploaded, those queued and the dead letters must
// between them hold every number the access log handed out, from its
// oldest record kept (older ones were pruned, or written before the log
// was anchored) to its last. A run of numbers none holds is a batch
// removed from the row store together with its records and its record,
// where the store numbers records without gaps (bbolt); on a store whose
// numbers skip those of rolled-back writes (PostgreSQL) it is no finding
// of itself, and the batches in write-once storage the row store neither
// records nor queues tell (unrecordedAccessBatches, on both stores).
//
// The numbering, the oldest record and the pending batches are read in
// one transaction before the recorded batches, which see is then given in
// key order (their first numbers ascending): a batch that leaves the
// outbox meanwhile is recorded by the time see reads its key, and a batch
// queued meanwhile holds numbers past the last read.
type accessCover struct {
	oldest  uint64 // the oldest record kept; 0: none
	last    uint64 // the last number handed out
	gapless bool   // every number up to last went to a record
	known   bool   // the store tells last (AccessNumbers)
	pending []accessSpan

	started bool
	next    uint64 // the lowest number from which none is known held yet
	gaps    []accessSpan
}

// readAccessCover reads in tx what accessCover starts from.
func readAccessCover(tx Tx) (*accessCover, error) {
	c := &accessCover{}
	recs, err := tx.AccessLog(0, 1)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return c, nil
	}
	c.oldest = recs[0].Seq
	if n, ok := tx.(AccessNumbers); ok {
		if c.last, c.gapless, err = n.LastAccessSeq(); err != nil {
			return nil, err
		}
		c.known = true
	}
	if !c.gapless {
		// Runs of numbers no batch holds are no finding on such a store
		// (reportAccessGaps): the batches pending are not read.
		return c, nil
	}
	add := func(e OutboxEntry) {
		if e.Kind != ObjectAccess || e.Op != "" {
			return
		}
		if first, last, ok := accessRange(e.Ref); ok {
			c.pending = append(c.pending, accessSpan{first, last})
		}
	}
	queued, err := queuedAccess(tx)
	if err != nil {
		return nil, err
	}
	for _, e := range queued {
		add(e)
	}
	for after := uint64(0); ; {
		dead, err := tx.DeadLetters(after, 1000)
		if err != nil {
			return nil, err
		}
		if len(dead) == 0 {
			break
		}
		for _, d := range dead {
			add(d.Entry)
			after = d.Entry.Seq
		}
	}
	slices.SortFunc(c.pending, func(a, b accessSpan) int { return cmp.Compare(a.first, b.first) })
	return c, nil
}

// see takes a recorded batch of the records first to last; batches come in
// the order of their first numbers.
func (c *accessCover) see(first, last uint64) {
	for len(c.pending) > 0 && c.pending[0].first <= first {
		c.take(c.pending[0])
		c.pending = c.pending[1:]
	}
	c.take(accessSpan{first, last})
}

func (c *accessCover) take(s accessSpan) {
	if c.oldest == 0 {
		return
	}
	if !c.started {
		// Numbers below the oldest batch were pruned, or written before
		// the log was anchored, or are of batches whose record was
		// removed, which only write-once storage shows
		// (unrecordedAccessBatches).
		c.started, c.next = true, max(s.first, c.oldest)
		if !c.known {
			c.last = s.last
		}
	}
	if !c.known {
		c.last = max(c.last, s.last)
	}
	if s.last < c.next {
		return
	}
	if s.first > c.next && c.next <= c.last {
		c.gaps = append(c.gaps, accessSpan{c.next, min(s.first-1, c.last)})
	}
	c.next = s.last + 1
}

// end returns the runs of numbers no batch holds.
func (c *accessCover) end() []accessSpan {
	for _, s := range c.pending {
		c.take(s)
	}
	c.pending = nil
	if c.started && c.next <= c.last {
		c.gaps = append(c.gaps, accessSpan{c.next, c.last})
		c.next = c.last + 1
	}
	return c.gaps
}

// reportAccessGaps adds a finding for each run of numbers no batch holds
// on a store that numbers without gaps (bbolt). On another (PostgreSQL,
// whose sequence skips the numbers of rolled-back writes) a run is no
// finding of itself: a batch of its numbers in write-once storage that
// the row store neither records nor queues is (unrecordedAccessBatches).
func (l *Ledger) reportAccessGaps(c *accessCover, finding func(format string, args ...any)) {
	if !c.gapless {
		return
	}
	for _, g := range c.gaps {
		finding("access records %d–%d are in no batch: none recorded as uploaded, queued or in the dead letters holds them, though the access log numbered every record from %d to %d: their records and their batch's record were removed from the row store", g.first, g.last, c.oldest, c.last)
	}
}

// unrecordedChunk is how many listed keys unrecordedAccessBatches looks up
// in one read of the row store.
const unrecordedChunk = 500

// unrecordedAccessBatches lists write-once storage's batches of access
// records once and reports each the row store neither records nor
// queues: a batch whose record was removed from the row store (its
// records may since have been removed, or edited, or replaced by others
// queued again under other keys), or, after the row store was put back
// to an older copy, the reads it no longer holds.
func (l *Ledger) unrecordedAccessBatches(ctx context.Context, finding func(format string, args ...any)) error {
	lister, ok := l.objects.(KeptLister)
	if !ok {
		return nil
	}
	var keys []string
	check := func() error {
		if len(keys) == 0 {
			return nil
		}
		var missing []string
		err := l.store.View(ctx, func(tx Tx) error {
			missing = missing[:0]
			// One round trip for the chunk, where the store reads ahead.
			if err := prefetch(tx, Prefetch{Objects: keys}); err != nil {
				return err
			}
			var unrecorded []string
			for _, key := range keys {
				_, err := tx.Object(key)
				switch {
				case err == nil:
				case errors.Is(err, ErrNotFound):
					unrecorded = append(unrecorded, key)
				default:
					return err
				}
			}
			if len(unrecorded) == 0 {
				return nil
			}
			// A batch put and not yet recorded is still queued; one put
			// under a key naming its bytes is queued under its plain key
			// until then.
			var ask []string
			for _, key := range unrecorded {
				ask = append(ask, key)
				if first, last, ok := accessRange(key); ok && key != AccessKey(first, last) {
					ask = append(ask, AccessKey(first, last))
				}
			}
			slices.Sort(ask)
			queued, err := tx.QueuedPuts(slices.Compact(ask))
			if err != nil {
				return err
			}
			inQueue := map[string]bool{}
			for _, e := range queued {
				inQueue[e.Key] = true
			}
			for _, key := range unrecorded {
				first, last, _ := accessRange(key)
				if !inQueue[key] && !inQueue[AccessKey(first, last)] {
					missing = append(missing, key)
				}
			}
			return nil
		})
		keys = keys[:0]
		if err != nil {
			return err
		}
		slices.Sort(missing)
		for _, key := range missing {
			first, last, _ := accessRange(key)
			finding("access records %d–%d are in no batch the row store records or queues, but write-once storage holds %s: a batch whose record was removed from the row store (its records may since have been edited, or removed), "+
				"or, after the row store was put back to an older copy, reads it no longer holds, which only that copy shows (see Backups in docs/operations.md)", first, last, key)
		}
		return nil
	}
	var storeErr error // the row store's: fsck fails
	err := lister.ListKept(ctx, accessPrefix, func(k KeptKey) error {
		if _, _, ok := accessRange(k.Key); !ok {
			return nil
		}
		keys = append(keys, k.Key)
		if len(keys) == unrecordedChunk {
			storeErr = check()
			return storeErr
		}
		return nil
	})
	switch {
	case storeErr != nil:
		return storeErr
	case err != nil:
		finding("access batches in write-once storage cannot be listed, to find those the row store neither records nor queues: %v", err)
		return nil
	}
	return check()
}
