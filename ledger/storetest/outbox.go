package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// entry is an outbox entry for the evidence of row n.
func entry(n int) ledger.OutboxEntry {
	id := hexID(fmt.Sprintf("outbox %d", n))
	return ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: id, Key: ledger.EvidenceKey(id), RetainUntil: base.Add(24 * time.Hour), Segment: n%2 == 0}
}

// outbox returns up to n outbox entries.
func outbox(t *testing.T, s ledger.Store, n int) []ledger.OutboxEntry {
	t.Helper()
	var out []ledger.OutboxEntry
	view(t, s, func(tx ledger.Tx) error {
		var err error
		out, err = tx.Outbox(n)
		return err
	})
	return out
}

// enqueued queues entries 0 to n-1 in one transaction
// and returns the outbox as read back (up to limit entries).
func enqueued(t *testing.T, s ledger.Store, n, limit int) []ledger.OutboxEntry {
	t.Helper()
	update(t, s, func(tx ledger.Tx) error {
		for i := range n {
			if err := tx.Enqueue(entry(i), base); err != nil {
				return err
			}
		}
		return nil
	})
	return outbox(t, s, limit)
}

// checkEntries fails the test unless got holds the entries want in order
// (Seq aside) with strictly increasing Seq, and returns the Seqs.
func checkEntries(t *testing.T, got, want []ledger.OutboxEntry) []uint64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("outbox: %d entries, want %d", len(got), len(want))
	}
	var seqs []uint64
	for i := range got {
		if i > 0 && got[i].Seq <= got[i-1].Seq {
			t.Errorf("outbox entry %d has Seq %d after %d: want increasing", i, got[i].Seq, got[i-1].Seq)
		}
		w := want[i]
		w.Seq = got[i].Seq
		if !same(got[i], w) {
			t.Errorf("outbox entry %d\n got %s\nwant %s", i, show(got[i]), show(w))
		}
		seqs = append(seqs, got[i].Seq)
	}
	return seqs
}

// testOutboxOfKind: a store's transaction reads the outbox entries of
// one kind alone (ledger.KindOutbox), in Seq order, as queued.
func testOutboxOfKind(t *testing.T, open opener) {
	s := open.fresh(t)
	var want []ledger.OutboxEntry
	update(t, s, func(tx ledger.Tx) error {
		for i := range 6 {
			if err := tx.Enqueue(entry(i), base); err != nil {
				return err
			}
			if i%2 == 1 {
				first, last := uint64(i*10+1), uint64(i*10+3)
				a := ledger.OutboxEntry{Kind: ledger.ObjectAccess, Ref: fmt.Sprintf("%d-%d", first, last), Key: ledger.AccessKey(first, last),
					RetainUntil: base.Add(time.Hour), SHA256: hexID(fmt.Sprint("batch ", i))}
				if err := tx.Enqueue(a, base); err != nil {
					return err
				}
				want = append(want, a)
			}
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		k, ok := tx.(ledger.KindOutbox)
		if !ok {
			t.Fatalf("the store's transaction %T does not read the outbox by kind", tx)
		}
		got, err := k.OutboxOfKind(ledger.ObjectAccess)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, got, want)
		none, err := k.OutboxOfKind("no such kind")
		if err != nil || len(none) != 0 {
			t.Errorf("entries of a kind none is of: %v, %v", none, err)
		}
		return nil
	})
}

// testOutboxOrder: Enqueue assigns increasing Seqs in commit order (also
// several in one transaction), Outbox returns the oldest n first, depth
// and the oldest queue time follow (the time the ledger gave Enqueue),
// the ledger's RecordUpload removes an entry and records its object, and a Seq is never handed out again after its entry left.
func testOutboxOrder(t *testing.T, open opener) {
	s := open.fresh(t)
	view(t, s, func(tx ledger.Tx) error {
		depth, err := tx.OutboxDepth()
		if err != nil || depth != 0 {
			t.Errorf("empty outbox: depth %d, %v", depth, err)
		}
		oldest, err := tx.OldestQueued()
		if err != nil || !oldest.IsZero() {
			t.Errorf("empty outbox: OldestQueued %v, %v; want zero", oldest, err)
		}
		return nil
	})
	var want []ledger.OutboxEntry
	for i := range 10 {
		e := entry(i)
		e.Seq = 999 // Enqueue assigns Seq; what the caller set is ignored
		update(t, s, func(tx ledger.Tx) error { return tx.Enqueue(e, base) })
		e.Seq = 0
		want = append(want, e)
	}
	update(t, s, func(tx ledger.Tx) error {
		for i := 10; i < 15; i++ {
			if err := tx.Enqueue(entry(i), base); err != nil {
				return err
			}
		}
		return nil
	})
	for i := 10; i < 15; i++ {
		want = append(want, entry(i))
	}
	all := outbox(t, s, 1000)
	checkEntries(t, all, want)
	checkEntries(t, outbox(t, s, 4), want[:4])
	view(t, s, func(tx ledger.Tx) error {
		depth, err := tx.OutboxDepth()
		if err != nil || depth != len(want) {
			t.Errorf("OutboxDepth = %d, %v; want %d", depth, err, len(want))
		}
		oldest, err := tx.OldestQueued()
		if err != nil || !oldest.Equal(base) {
			t.Errorf("OldestQueued = %v, %v; want %v, the time the first was queued at", oldest, err, base)
		}
		_, err = tx.Object(all[0].Key)
		wantNotFound(t, "Object of a queued entry", err)
		return nil
	})

	// The uploader records the first three, out of order.
	locs := map[string]ledger.Location{}
	for _, i := range []int{2, 0, 1} {
		e := all[i]
		loc := ledger.Location{Store: "s3", Bucket: "evidence", Key: e.Key, VersionID: fmt.Sprint("v", i), RetainUntil: e.RetainUntil, Uploaded: true}
		locs[e.Key] = loc
		update(t, s, func(tx ledger.Tx) error { return ledger.RecordUpload(tx, e, loc) })
	}
	checkEntries(t, outbox(t, s, 1000), want[3:])
	view(t, s, func(tx ledger.Tx) error {
		for key, w := range locs {
			got, err := tx.Object(key)
			if err != nil {
				return err
			}
			if !same(got, w) {
				t.Errorf("Object(%s)\n got %s\nwant %s", key, show(got), show(w))
			}
		}
		depth, err := tx.OutboxDepth()
		if err != nil || depth != len(want)-3 {
			t.Errorf("OutboxDepth after three uploads = %d, %v; want %d", depth, err, len(want)-3)
		}
		return nil
	})

	// Drain the rest; the outbox is empty, and a new entry gets a Seq above
	// every Seq handed out before.
	update(t, s, func(tx ledger.Tx) error {
		for _, e := range all[3:] {
			if err := ledger.RecordUpload(tx, e, ledger.Location{Store: "s3", Key: e.Key, Uploaded: true}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		depth, err := tx.OutboxDepth()
		if err != nil || depth != 0 {
			t.Errorf("drained outbox: depth %d, %v", depth, err)
		}
		oldest, err := tx.OldestQueued()
		if err != nil || !oldest.IsZero() {
			t.Errorf("drained outbox: OldestQueued %v, %v; want zero", oldest, err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error { return tx.Enqueue(entry(100), base) })
	after := outbox(t, s, 10)
	checkEntries(t, after, []ledger.OutboxEntry{entry(100)})
	if last := all[len(all)-1].Seq; after[0].Seq <= last {
		t.Errorf("new entry got Seq %d, not above %d handed out before", after[0].Seq, last)
	}
}

// testOutboxConcurrentEnqueue: entries enqueued by many concurrent writers
// get distinct Seqs, and Outbox returns them in Seq order.
func testOutboxConcurrentEnqueue(t *testing.T, open opener) {
	s := open.fresh(t)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(tx ledger.Tx) error {
				if err := tx.Enqueue(entry(2*i), base); err != nil {
					return err
				}
				return tx.Enqueue(entry(2*i+1), base)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	got := outbox(t, s, 1000)
	if len(got) != 2*writers {
		t.Fatalf("outbox: %d entries, want %d", len(got), 2*writers)
	}
	pos := map[string]int{}
	for i, e := range got {
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Errorf("entry %d: Seq %d after %d", i, e.Seq, got[i-1].Seq)
		}
		pos[e.Ref] = i
	}
	for i := range writers {
		a, b := entry(2*i).Ref, entry(2*i+1).Ref
		if pos[a] >= pos[b] {
			t.Errorf("writer %d: its second entry is not after its first", i)
		}
	}
}

// testDeadLetters: the ledger's CountFailure counts failures of a queued
// entry and MoveToDeadLetters moves the entry aside with that record (out
// of the outbox and its depth), or does nothing for an entry already gone;
// DeadLetters pages in Seq order after a Seq, and RemoveDeadLetter removes
// one.
func testDeadLetters(t *testing.T, open opener) {
	s := open.fresh(t)
	q := enqueued(t, s, 4, 10)
	t1, t2 := base.Add(time.Minute), base.Add(2*time.Minute)
	update(t, s, func(tx ledger.Tx) error {
		if f, err := ledger.CountFailure(tx, q[1].Seq, "first", t1); err != nil || f.Attempts != 1 {
			return fmt.Errorf("first failure: %+v, %v", f, err)
		}
		f, err := ledger.CountFailure(tx, q[1].Seq, "second", t2)
		if err != nil {
			return err
		}
		want := ledger.OutboxFailure{Attempts: 2, First: t1, Last: t2, Reason: "second"}
		if !same(f, want) {
			t.Errorf("CountFailure\n got %s\nwant %s", show(f), show(want))
		}
		if err := ledger.MoveToDeadLetters(tx, q[1], "gone for good", t2); err != nil {
			return err
		}
		if err := ledger.MoveToDeadLetters(tx, q[3], "never tried", t2); err != nil {
			return err
		}
		return nil
	})
	checkEntries(t, outbox(t, s, 10), []ledger.OutboxEntry{entry(0), entry(2)})
	view(t, s, func(tx ledger.Tx) error {
		n, err := tx.DeadLetterCount()
		if err != nil || n != 2 {
			t.Errorf("DeadLetterCount = %d, %v; want 2", n, err)
		}
		depth, err := tx.OutboxDepth()
		if err != nil || depth != 2 {
			t.Errorf("OutboxDepth = %d, %v; want 2", depth, err)
		}
		all, err := tx.DeadLetters(0, 10)
		if err != nil {
			return err
		}
		want := []ledger.DeadLetter{
			{Entry: q[1], Reason: "gone for good", Attempts: 2, FirstFailure: t1, LastFailure: t2},
			{Entry: q[3], Reason: "never tried", Attempts: 1, FirstFailure: t2, LastFailure: t2},
		}
		if !same(all, want) {
			t.Errorf("DeadLetters\n got %s\nwant %s", show(all), show(want))
		}
		page, err := tx.DeadLetters(q[1].Seq, 10)
		if err != nil {
			return err
		}
		if len(page) != 1 || page[0].Entry.Seq != q[3].Seq {
			t.Errorf("DeadLetters after %d: %s", q[1].Seq, show(page))
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		// The entry already left the outbox: nothing changes.
		if err := ledger.MoveToDeadLetters(tx, q[1], "again", t2); err != nil {
			return err
		}
		return tx.RemoveDeadLetter(q[1].Seq)
	})
	view(t, s, func(tx ledger.Tx) error {
		all, err := tx.DeadLetters(0, 10)
		if err != nil {
			return err
		}
		if len(all) != 1 || all[0].Entry.Seq != q[3].Seq {
			t.Errorf("DeadLetters after RemoveDeadLetter: %s", show(all))
		}
		n, err := tx.DeadLetterCount()
		if err != nil || n != 1 {
			t.Errorf("DeadLetterCount = %d, %v; want 1", n, err)
		}
		return nil
	})
}

// testSegmentPlans: PlanSegment records a plan (its entries in order),
// SegmentPlans returns the plans by key, DropSegmentPlan removes one.
func testSegmentPlans(t *testing.T, open opener) {
	s := open.fresh(t)
	plans := []ledger.SegmentPlan{
		{Key: "segments/2026-03-02/b", RetainUntil: base.Add(24 * time.Hour), Entries: []ledger.OutboxEntry{entry(3), entry(1)}},
		{Key: "segments/2026-03-02/a", RetainUntil: base.Add(24 * time.Hour), Entries: []ledger.OutboxEntry{entry(2)}},
	}
	update(t, s, func(tx ledger.Tx) error {
		for _, p := range plans {
			if err := tx.PlanSegment(p); err != nil {
				return err
			}
		}
		return nil
	})
	got := func() []ledger.SegmentPlan {
		var out []ledger.SegmentPlan
		view(t, s, func(tx ledger.Tx) error {
			var err error
			out, err = tx.SegmentPlans()
			return err
		})
		return out
	}
	if want := []ledger.SegmentPlan{plans[1], plans[0]}; !same(got(), want) {
		t.Errorf("SegmentPlans\n got %s\nwant %s", show(got()), show(want))
	}
	update(t, s, func(tx ledger.Tx) error { return tx.DropSegmentPlan(plans[1].Key) })
	if want := plans[:1]; !same(got(), want) {
		t.Errorf("SegmentPlans after a drop\n got %s\nwant %s", show(got()), show(want))
	}
}

// testDequeueAndFailures: Dequeue removes an entry with its failure record
// and reports whether it was queued; Failure is zero until SetFailure
// stores one; PutDeadLetter counts a dead letter once however often it is
// put.
func testDequeueAndFailures(t *testing.T, open opener) {
	s := open.fresh(t)
	q := enqueued(t, s, 3, 10)
	rec := ledger.OutboxFailure{Attempts: 3, First: base, Last: base.Add(time.Minute), Reason: "refused"}
	update(t, s, func(tx ledger.Tx) error {
		if f, err := tx.Failure(q[0].Seq); err != nil || f != (ledger.OutboxFailure{}) {
			t.Errorf("Failure before any: %s, %v; want zero", show(f), err)
		}
		if err := tx.SetFailure(q[0].Seq, rec); err != nil {
			return err
		}
		return tx.SetFailure(q[1].Seq, rec)
	})
	update(t, s, func(tx ledger.Tx) error {
		if f, err := tx.Failure(q[1].Seq); err != nil || !same(f, rec) {
			t.Errorf("Failure after SetFailure: %s, %v; want %s", show(f), err, show(rec))
		}
		for i, want := range []bool{true, false} {
			if ok, err := tx.Dequeue(q[0].Seq); err != nil || ok != want {
				t.Errorf("Dequeue #%d of one entry: %v, %v; want %v", i+1, ok, err, want)
			}
		}
		if f, err := tx.Failure(q[0].Seq); err != nil || f != (ledger.OutboxFailure{}) {
			t.Errorf("Failure after Dequeue: %s, %v; want zero", show(f), err)
		}
		d := ledger.DeadLetter{Entry: q[2], Reason: "doomed", Attempts: 1, FirstFailure: base, LastFailure: base}
		if err := tx.PutDeadLetter(d); err != nil {
			return err
		}
		return tx.PutDeadLetter(d)
	})
	view(t, s, func(tx ledger.Tx) error {
		if n, err := tx.DeadLetterCount(); err != nil || n != 1 {
			t.Errorf("DeadLetterCount after putting one twice: %d, %v; want 1", n, err)
		}
		if depth, err := tx.OutboxDepth(); err != nil || depth != 2 {
			t.Errorf("OutboxDepth after one Dequeue: %d, %v; want 2", depth, err)
		}
		return nil
	})
	checkEntries(t, outbox(t, s, 10), []ledger.OutboxEntry{entry(1), entry(2)})
}

// testRecordUploads: RecordUploads records each entry still queued once
// (an entry that left before, or earlier in the same call, records
// nothing), counts a segment's new members once, and what it recorded is
// read back in the same transaction and after it.
func testRecordUploads(t *testing.T, open opener) {
	s := open.fresh(t)
	q := enqueued(t, s, 3, 10)
	update(t, s, func(tx ledger.Tx) error {
		_, err := tx.Dequeue(q[1].Seq)
		return err
	})
	const segment = "segments/one.seg"
	inSegment := func(off uint32) ledger.Location {
		return ledger.Location{Store: "s3", Key: segment, Uploaded: true, Offset: off, Length: 10}
	}
	alone := ledger.Location{Store: "s3", Key: q[2].Key, Uploaded: true}
	update(t, s, func(tx ledger.Tx) error {
		// Not in Seq order, and an entry twice: the first time it is
		// recorded, the second finds it gone.
		es := []ledger.OutboxEntry{q[2], q[0], q[1], q[0]}
		locs := []ledger.Location{alone, inSegment(0), inSegment(10), inSegment(20)}
		if err := ledger.RecordUploads(tx, es, locs); err != nil {
			return err
		}
		if loc, err := tx.Object(q[0].Key); err != nil || !same(loc, inSegment(0)) {
			t.Errorf("Object of the first entry in the recording transaction: %s, %v; want %s", show(loc), err, show(inSegment(0)))
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		for _, c := range []struct {
			key  string
			want ledger.Location
		}{{q[0].Key, inSegment(0)}, {q[2].Key, alone}} {
			if loc, err := tx.Object(c.key); err != nil || !same(loc, c.want) {
				t.Errorf("Object %s: %s, %v; want %s", c.key, show(loc), err, show(c.want))
			}
		}
		_, err := tx.Object(q[1].Key)
		wantNotFound(t, "Object of the entry that left before", err)
		if depth, err := tx.OutboxDepth(); err != nil || depth != 0 {
			t.Errorf("OutboxDepth: %d, %v; want 0", depth, err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		if n, err := tx.Count(ledger.RefSegment, segment, 0); err != nil || n != 1 {
			t.Errorf("segment members: %d, %v; want 1", n, err)
		}
		return nil
	})
}

// OpsAheadOfPut rearranges the outbox in tx so that n operations (OpExtend,
// the i-th retained until now plus 90+i days) on the first evidence
// bundle's key come first and the bundle's put last, with the other
// entries between, as after the put was retried from the dead letters once
// the operations were queued. It returns the put and how many other
// entries lie between.
func OpsAheadOfPut(tx ledger.Tx, n int, now time.Time) (ledger.OutboxEntry, int, error) {
	all, err := tx.Outbox(100)
	if err != nil {
		return ledger.OutboxEntry{}, 0, err
	}
	var put ledger.OutboxEntry
	var rest []ledger.OutboxEntry
	for _, e := range all {
		if _, err := tx.Dequeue(e.Seq); err != nil {
			return put, 0, err
		}
		if put.Key == "" && e.Kind == ledger.ObjectEvidence && e.Op == "" && e.Segment {
			put = e
		} else {
			rest = append(rest, e)
		}
	}
	if put.Key == "" {
		return put, 0, fmt.Errorf("outbox %+v: no evidence bundle queued", all)
	}
	var q []ledger.OutboxEntry
	for i := range n {
		q = append(q, ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: put.Ref, Key: put.Key, Op: ledger.OpExtend, RetainUntil: now.Add(time.Duration(90+i) * 24 * time.Hour)})
	}
	for _, e := range append(append(q, rest...), put) {
		if err := tx.Enqueue(e, now); err != nil {
			return put, 0, err
		}
	}
	return put, len(rest), nil
}

// DrainOutbox runs upload rounds of l until its outbox is empty, as a
// ledger that has run for a while would have: a test that records rows
// back in time with ledgerd stopped then starts it with their objects in
// write-once storage. It gives up after 20 rounds.
func DrainOutbox(ctx context.Context, l *ledger.Ledger) error {
	for range 20 {
		depth, err := l.OutboxDepth(ctx)
		if err != nil || depth == 0 {
			return err
		}
		if _, err := l.UploadRound(ctx, 512, 4); err != nil {
			return err
		}
	}
	return errors.New("the outbox did not drain in 20 rounds")
}
