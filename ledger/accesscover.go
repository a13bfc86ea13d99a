package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
// where the store numbers records without gaps; on a store whose numbers
// skip those of rolled-back writes (PostgreSQL), only when write-once
// storage holds a batch of them.
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
	// head is the records kept below the first batch (all of them when
	// the row store holds no batch): written before the log was anchored,
	// or a batch's record removed. Only write-once storage can tell.
	head *accessSpan
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
	add := func(e OutboxEntry) {
		if e.Kind != ObjectAccess || e.Op != "" {
			return
		}
		if first, last, ok := accessRange(e.Ref); ok {
			c.pending = append(c.pending, accessSpan{first, last})
		}
	}
	var queued []OutboxEntry
	if k, ok := tx.(KindOutbox); ok {
		if queued, err = k.OutboxOfKind(ObjectAccess); err != nil {
			return nil, err
		}
	} else {
		depth, err := tx.OutboxDepth()
		if err != nil {
			return nil, err
		}
		if depth > 0 {
			if queued, err = tx.Outbox(depth); err != nil {
				return nil, err
			}
		}
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
		// removed (head).
		c.started, c.next = true, max(s.first, c.oldest)
		if s.first > c.oldest {
			c.head = &accessSpan{c.oldest, s.first - 1}
		}
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
	if !c.started && c.oldest != 0 && c.known && c.last >= c.oldest {
		c.head = &accessSpan{c.oldest, c.last}
	}
	return c.gaps
}

// reportAccessGaps adds a finding for each run of gaps that is one: on a store that
// numbers without gaps, each; on another, each of whose numbers write-once
// storage holds a batch that the row store (read again) neither records
// nor queues.
func (l *Ledger) reportAccessGaps(ctx context.Context, c *accessCover, gaps []accessSpan, finding func(format string, args ...any)) error {
	var listed []accessSpan // runs only write-once storage can tell
	if c.gapless {
		for _, g := range gaps {
			finding("access records %d–%d are in no batch: none recorded as uploaded, queued or in the dead letters holds them, though the access log numbered every record from %d to %d: their records and their batch's record were removed from the row store", g.first, g.last, c.oldest, c.last)
		}
	} else {
		listed = gaps
	}
	if c.head != nil {
		// The records below the first batch the row store knows of hold
		// no batch of theirs in write-once storage when they were
		// written before the log was anchored; one that does had its
		// record removed, and its records may since have been edited.
		listed = append(listed, *c.head)
	}
	lister, ok := l.objects.(KeptLister)
	if !ok {
		return nil
	}
	for _, g := range listed {
		var found []string
		for _, p := range decimalPrefixes(g.first, g.last) {
			err := lister.ListKept(ctx, accessPrefix+p, func(k KeptKey) error {
				if first, _, ok := accessRange(k.Key); ok && first >= g.first && first <= g.last {
					found = append(found, k.Key)
				}
				return nil
			})
			if err != nil {
				finding("access records %d–%d are in no batch the row store records or queues, and write-once storage cannot be listed for one: %v", g.first, g.last, err)
				break
			}
		}
		for _, key := range found {
			var known bool
			err := l.store.View(ctx, func(tx Tx) error {
				_, err := tx.Object(key)
				switch {
				case err == nil:
					known = true
					return nil
				case !errors.Is(err, ErrNotFound):
					return err
				}
				// A batch put under a key naming its bytes is queued under
				// its plain key until that put is recorded.
				keys := []string{key}
				if first, last, ok := accessRange(key); ok && key != AccessKey(first, last) {
					keys = append(keys, AccessKey(first, last))
				}
				queued, err := tx.QueuedPuts(keys)
				known = len(queued) > 0
				return err
			})
			if err != nil {
				return err
			}
			if !known {
				finding("access records %d–%d are in no batch the row store records or queues, but write-once storage holds %s: a batch removed from the row store with its record, "+
					"or, after the row store was put back to an older copy, a batch of the numbers it handed out before (see Backups in docs/operations.md)", g.first, g.last, key)
			}
		}
	}
	return nil
}

// decimalPrefixes returns the fewest prefixes of numbers zero-padded to 20
// digits (as AccessKey writes them) that together start exactly the
// numbers first to last.
func decimalPrefixes(first, last uint64) []string {
	if first > last {
		return nil
	}
	var out []string
	for n := first; ; {
		// The largest block of 10^k numbers that starts at n and ends
		// within last.
		size, k := uint64(1), 0
		for k < 19 && n%(size*10) == 0 && size*10-1 <= last-n {
			size *= 10
			k++
		}
		out = append(out, fmt.Sprintf("%020d", n)[:20-k])
		end := n + (size - 1)
		if end >= last {
			return out
		}
		n = end + 1
	}
}
