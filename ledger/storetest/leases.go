package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// shortTTL is the lease (and claim) time the suite waits out: long enough
// for a holder to act inside it, short enough to wait for.
const shortTTL = 50 * time.Millisecond

// within polls try until it returns true, failing the test when it has not
// by the deadline (judged by the test's clock: the store's may differ, so
// the deadline is far).
func within(t *testing.T, what string, try func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !try() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not by the deadline", what)
		}
		<-tick.C
	}
}

// fenced runs fn in an Update fenced by lease name under token.
func fenced(t *testing.T, s ledger.Store, name string, token uint64, fn func(ledger.Tx) error) error {
	return s.Update(ledger.WithFence(t.Context(), ledger.Fence{Lease: name, Token: token}), fn)
}

// testLeases: a lease is held by one holder at a time; another holder gets
// ErrLeaseHeld until it expires by the store's clock (a renewal may
// shorten it) and then takes it over with a larger token; the first
// holder's renewal then fails with ErrLeaseLost, and so does its fenced
// Update, which writes nothing, while the taker's fenced Update commits. A released lease is free at once; a
// release by a holder that lost the lease changes nothing. Leases of
// different names are independent.
func testLeases(t *testing.T, open opener) {
	s := open.fresh(t)
	ctx := t.Context()
	const name = "storetest-singleton"
	// Held for a minute while the checks that need it held run, however
	// slow the machine; then shortened to shortTTL, to be waited out.
	a, err := s.AcquireLease(ctx, name, "holder-a", time.Minute)
	if err != nil {
		t.Fatalf("acquire a free lease: %v", err)
	}
	if _, err := s.AcquireLease(ctx, name, "holder-b", time.Minute); !errors.Is(err, ledger.ErrLeaseHeld) {
		t.Fatalf("acquire a lease another holds: %v, want ErrLeaseHeld", err)
	}
	other, err := s.AcquireLease(ctx, "storetest-other", "holder-b", time.Minute)
	if err != nil {
		t.Fatalf("acquire a lease of another name: %v", err)
	}
	if err := fenced(t, s, name, a, func(tx ledger.Tx) error { return tx.PutDrill("fenced-a-1", []byte("a")) }); err != nil {
		t.Fatalf("fenced Update while holding the lease: %v", err)
	}
	if err := s.RenewLease(ctx, name, "holder-a", a, shortTTL); err != nil {
		t.Fatalf("renew the lease for a shorter time: %v", err)
	}

	var b uint64
	within(t, "holder b takes the lease over after it expired", func() bool {
		var err error
		b, err = s.AcquireLease(ctx, name, "holder-b", time.Minute)
		if err != nil && !errors.Is(err, ledger.ErrLeaseHeld) {
			t.Fatalf("acquire: %v", err)
		}
		return err == nil
	})
	if b <= a {
		t.Errorf("token after a takeover: %d, want above %d", b, a)
	}
	if err := s.RenewLease(ctx, name, "holder-a", a, shortTTL); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Errorf("renew a lease taken over: %v, want ErrLeaseLost", err)
	}
	ran := false
	err = fenced(t, s, name, a, func(tx ledger.Tx) error {
		ran = true
		if err := tx.PutDrill("fenced-a-2", []byte("a")); err != nil {
			return err
		}
		return tx.Enqueue(entry(1), base)
	})
	if !errors.Is(err, ledger.ErrLeaseLost) {
		t.Errorf("fenced Update after a takeover: %v, want ErrLeaseLost", err)
	}
	if err := fenced(t, s, name, b, func(tx ledger.Tx) error { return tx.PutDrill("fenced-b", []byte("b")) }); err != nil {
		t.Errorf("the taker's fenced Update: %v", err)
	}
	if err := s.RenewLease(ctx, name, "holder-b", b, time.Minute); err != nil {
		t.Errorf("the taker renews: %v", err)
	}
	view(t, s, func(tx ledger.Tx) error {
		for id, want := range map[string]bool{"fenced-a-1": true, "fenced-a-2": false, "fenced-b": true} {
			_, err := tx.Drill(id)
			if got := err == nil; got != want {
				t.Errorf("drill %s written: %v, want %v (fn ran: %v)", id, got, want, ran)
			}
		}
		if depth, err := tx.OutboxDepth(); err != nil || depth != 0 {
			t.Errorf("outbox after a lost fenced Update: depth %d, %v; want 0", depth, err)
		}
		return nil
	})

	// A release by the holder that lost it changes nothing.
	if err := s.ReleaseLease(ctx, name, "holder-a", a); err != nil {
		t.Errorf("release a lost lease: %v", err)
	}
	if _, err := s.AcquireLease(ctx, name, "holder-c", time.Minute); !errors.Is(err, ledger.ErrLeaseHeld) {
		t.Errorf("acquire after a stale release: %v, want ErrLeaseHeld", err)
	}
	if err := s.ReleaseLease(ctx, name, "holder-b", b); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := fenced(t, s, name, b, func(tx ledger.Tx) error { return nil }); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Errorf("fenced Update after release: %v, want ErrLeaseLost", err)
	}
	c, err := s.AcquireLease(ctx, name, "holder-c", time.Minute)
	if err != nil {
		t.Fatalf("acquire a released lease: %v", err)
	}
	if c <= b {
		t.Errorf("token after a release: %d, want above %d", c, b)
	}
	if err := s.RenewLease(ctx, "storetest-other", "holder-b", other, time.Minute); err != nil {
		t.Errorf("the lease of another name was disturbed: %v", err)
	}
}

// testFencedBatch: a fenced Update whose lease was lost fails alone; writes
// from other writers committing at the same time are not held back by it.
func testFencedBatch(t *testing.T, open opener) {
	s := open.fresh(t)
	ctx := t.Context()
	const name = "storetest-batch"
	lost, err := s.AcquireLease(ctx, name, "holder-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, name, "holder-a", lost); err != nil {
		t.Fatal(err)
	}
	held, err := s.AcquireLease(ctx, name, "holder-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	errs := atOnce(writers, func(i int) error {
		put := func(tx ledger.Tx) error { return tx.PutDrill(fmt.Sprintf("drill-%03d", i), []byte("{}")) }
		switch i % 3 {
		case 0:
			return fenced(t, s, name, lost, put)
		case 1:
			return fenced(t, s, name, held, put)
		}
		return s.Update(ctx, put)
	})
	view(t, s, func(tx ledger.Tx) error {
		for i, err := range errs {
			_, derr := tx.Drill(fmt.Sprintf("drill-%03d", i))
			switch {
			case i%3 == 0 && !errors.Is(err, ledger.ErrLeaseLost):
				t.Errorf("writer %d fenced by a lost lease: %v, want ErrLeaseLost", i, err)
			case i%3 == 0 && derr == nil:
				t.Errorf("writer %d fenced by a lost lease: its write persisted", i)
			case i%3 != 0 && (err != nil || derr != nil):
				t.Errorf("writer %d: Update %v, its write %v", i, err, derr)
			}
		}
		return nil
	})
}

// claim claims up to n outbox entries for holder in its own Update.
func claim(t *testing.T, s ledger.Store, n int, holder string, ttl time.Duration) []ledger.OutboxEntry {
	t.Helper()
	var out []ledger.OutboxEntry
	update(t, s, func(tx ledger.Tx) error {
		var err error
		out, err = tx.Claim(n, holder, ttl)
		return err
	})
	return out
}

// testClaims: uploaders claiming at the same time never get the same
// entry while its claim lasts, each gets the lowest Seqs free; a claim
// that expired is taken by another holder; a dequeued entry is not
// claimed again. Skipped for a store with a single uploader.
func testClaims(t *testing.T, open opener) {
	s := open.fresh(t)
	const total = 40
	all := enqueued(t, s, total, total)

	// Eight holders claim five at a time, at once: the entries are
	// shared out with none twice.
	got := make([][]ledger.OutboxEntry, 8)
	errs := atOnce(len(got), func(i int) error {
		return s.Update(t.Context(), func(tx ledger.Tx) error {
			var err error
			got[i], err = tx.Claim(5, fmt.Sprintf("holder-%d", i), time.Minute)
			return err
		})
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for i, g := range got {
		if len(g) > 5 {
			t.Errorf("holder %d claimed %d entries, asked for 5", i, len(g))
		}
		for j, e := range g {
			if j > 0 && e.Seq <= g[j-1].Seq {
				t.Errorf("holder %d: claimed Seq %d after %d: want lowest first", i, e.Seq, g[j-1].Seq)
			}
			if h, dup := seen[e.Seq]; dup {
				t.Errorf("entry %d claimed by holders %d and %d", e.Seq, h, i)
			}
			seen[e.Seq] = i
		}
	}
	if len(seen) != total {
		t.Errorf("%d entries claimed by 8 holders of 5, want all %d", len(seen), total)
	}
	if rest := claim(t, s, 5, "holder-late", time.Minute); len(rest) != 0 {
		t.Errorf("a claim while every entry is claimed returned %d entries", len(rest))
	}

	// Dequeue the first holder's entries; enqueue more and claim them
	// briefly: once that claim expires another holder takes them.
	update(t, s, func(tx ledger.Tx) error {
		for _, e := range got[0] {
			if _, err := tx.Dequeue(e.Seq); err != nil {
				return err
			}
		}
		for i := total; i < total+3; i++ {
			if err := tx.Enqueue(entry(i), base); err != nil {
				return err
			}
		}
		return nil
	})
	brief := claim(t, s, 10, "holder-brief", shortTTL)
	if len(brief) != 3 || brief[0].Seq <= all[total-1].Seq {
		t.Fatalf("claim of the new entries: %s", show(brief))
	}
	var taken []ledger.OutboxEntry
	within(t, "another holder takes the expired claim", func() bool {
		taken = claim(t, s, 10, "holder-next", time.Minute)
		return len(taken) > 0
	})
	checkEntries(t, taken, []ledger.OutboxEntry{entry(total), entry(total + 1), entry(total + 2)})
}

// holdsClaim asks HoldsClaim in its own Update.
func holdsClaim(t *testing.T, s ledger.Store, holder string, seqs []uint64) bool {
	t.Helper()
	var held bool
	update(t, s, func(tx ledger.Tx) error {
		var err error
		held, err = tx.HoldsClaim(holder, seqs)
		return err
	})
	return held
}

func seqsOf(es []ledger.OutboxEntry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

// testQueued: Queued names the entries of those asked about still in the
// outbox, lowest first, in a read and in a write that queued or removed
// some of them earlier in the same transaction.
func testQueued(t *testing.T, open opener) {
	s := open.fresh(t)
	all := seqsOf(enqueued(t, s, 4, 4))
	queued := func(tx ledger.Tx, seqs ...uint64) []uint64 {
		t.Helper()
		got, err := tx.Queued(seqs)
		if err != nil {
			t.Errorf("Queued(%v): %v", seqs, err)
		}
		return got
	}
	unknown := all[3] + 1000
	view(t, s, func(tx ledger.Tx) error {
		if got := queued(tx, all[3], unknown, all[1], all[0]); !slices.Equal(got, []uint64{all[0], all[1], all[3]}) {
			t.Errorf("Queued of three queued entries and an unknown one = %v", got)
		}
		if got := queued(tx); len(got) != 0 {
			t.Errorf("Queued of no entries = %v", got)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Dequeue(all[1]); err != nil {
			return err
		}
		if err := tx.Enqueue(entry(4), base); err != nil {
			return err
		}
		if got := queued(tx, all...); !slices.Equal(got, []uint64{all[0], all[2], all[3]}) {
			t.Errorf("Queued after a dequeue in the same transaction = %v", got)
		}
		return nil
	})
	last := outbox(t, s, 10)
	if len(last) != 4 {
		t.Fatalf("outbox after the write: %s", show(last))
	}
	view(t, s, func(tx ledger.Tx) error {
		if got := queued(tx, last[3].Seq, all[1]); !slices.Equal(got, []uint64{last[3].Seq}) {
			t.Errorf("Queued of the entry queued since and the one removed = %v", got)
		}
		return nil
	})
}

// testQueuedPuts: QueuedPuts returns the first queued put of each key
// that has one, in a read and in a write that queued it earlier in the
// same transaction, and none for a key with only an operation queued, a
// key that only contains another, or one whose put left the outbox.
func testQueuedPuts(t *testing.T, open opener) {
	s := open.fresh(t)
	keysOf := func(tx ledger.Tx, keys ...string) []string {
		t.Helper()
		got, err := tx.QueuedPuts(keys)
		if err != nil {
			t.Errorf("QueuedPuts(%q): %v", keys, err)
		}
		var out []string
		for i, e := range got {
			if e.Op != "" || (i > 0 && e.Seq <= got[i-1].Seq) {
				t.Errorf("QueuedPuts(%q) = %s: want puts in Seq order", keys, show(got))
			}
			out = append(out, e.Key)
		}
		return out
	}
	// One key has characters JSON escapes; key's put is queued twice.
	const key, longer, odd = "evidence/b.json", "evidence/b.json.old", `evidence/a "<&>" é.json`
	update(t, s, func(tx ledger.Tx) error {
		for _, e := range []ledger.OutboxEntry{
			{Kind: ledger.ObjectEvidence, Ref: "b", Key: key, Op: ledger.OpHold},
			{Kind: ledger.ObjectEvidence, Ref: "c", Key: longer},
		} {
			if err := tx.Enqueue(e, base); err != nil {
				return err
			}
		}
		if got := keysOf(tx, key, longer); !slices.Equal(got, []string{longer}) {
			t.Errorf("QueuedPuts with an operation on one key and the other's put queued earlier in the transaction: %q", got)
		}
		for _, k := range []string{odd, key, key} {
			if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: "b", Key: k}, base); err != nil {
				return err
			}
		}
		return nil
	})
	all := outbox(t, s, 10)
	if len(all) != 5 {
		t.Fatalf("outbox: %s", show(all))
	}
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.QueuedPuts([]string{key, "evidence/absent.json", odd})
		if err != nil || len(got) != 2 || got[0].Seq != all[2].Seq || got[1].Seq != all[3].Seq {
			t.Errorf("QueuedPuts of two keys with puts queued and one never queued: %s, %v; want %s", show(got), err, show(all[2:4]))
		}
		if got := keysOf(tx); len(got) != 0 {
			t.Errorf("QueuedPuts of no keys: %q", got)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		for _, e := range all[3:] {
			if _, err := tx.Dequeue(e.Seq); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		if got := keysOf(tx, key); len(got) != 0 {
			t.Errorf("QueuedPuts of a key whose puts left the outbox: %q", got)
		}
		return nil
	})
}

// testClaimEntries: ClaimEntries claims the entries asked for that are
// still queued, in Seq order, and, where the store keeps claims, not
// those another holder has a live claim on; its holder's own claims and
// claims that ran out are taken.
func testClaimEntries(t *testing.T, open opener, claims bool) {
	s := open.fresh(t)
	all := seqsOf(enqueued(t, s, 5, 5))
	claimEntries := func(holder string, seqs ...uint64) []uint64 {
		t.Helper()
		var got []ledger.OutboxEntry
		update(t, s, func(tx ledger.Tx) error {
			var err error
			got, err = tx.ClaimEntries(seqs, holder, time.Minute)
			return err
		})
		return seqsOf(got)
	}
	update(t, s, func(tx ledger.Tx) error {
		_, err := tx.Dequeue(all[4])
		return err
	})
	if got := claimEntries("holder-a", all[3], all[1], all[4]); !slices.Equal(got, []uint64{all[1], all[3]}) {
		t.Errorf("ClaimEntries of two queued entries and one that left: %v; want %v", got, []uint64{all[1], all[3]})
	}
	if !claims {
		return
	}
	if got := claimEntries("holder-b", all[0], all[1]); !slices.Equal(got, []uint64{all[0]}) {
		t.Errorf("ClaimEntries of a free entry and one holder-a holds: %v; want %v", got, []uint64{all[0]})
	}
	if got := claimEntries("holder-a", all[1], all[3]); !slices.Equal(got, []uint64{all[1], all[3]}) {
		t.Errorf("ClaimEntries of holder-a's own claims: %v; want them", got)
	}
	if !holdsClaim(t, s, "holder-b", []uint64{all[0]}) || holdsClaim(t, s, "holder-b", []uint64{all[1]}) {
		t.Error("after ClaimEntries, HoldsClaim does not name holder-b's entry as its own, or names holder-a's")
	}
	brief := claim(t, s, 1, "holder-c", time.Microsecond)
	if len(brief) != 1 || brief[0].Seq != all[2] {
		t.Fatalf("claim of the last free entry: %s", show(brief))
	}
	within(t, "holder-a takes the entry whose claim ran out", func() bool {
		return slices.Equal(claimEntries("holder-a", all[2]), []uint64{all[2]})
	})
}

// testHoldsClaimQueued: HoldsClaim holds for entries its holder claimed
// and for none at all, and not once one of them has left the outbox.
func testHoldsClaimQueued(t *testing.T, open opener) {
	s := open.fresh(t)
	enqueued(t, s, 3, 3)
	mine := claim(t, s, 3, "holder-a", time.Minute)
	if len(mine) != 3 {
		t.Fatalf("claimed %d of 3 entries", len(mine))
	}
	if !holdsClaim(t, s, "holder-a", seqsOf(mine)) {
		t.Error("HoldsClaim = false for the entries the holder just claimed")
	}
	if !holdsClaim(t, s, "holder-a", nil) {
		t.Error("HoldsClaim = false for no entries")
	}
	update(t, s, func(tx ledger.Tx) error {
		_, err := tx.Dequeue(mine[1].Seq)
		return err
	})
	if holdsClaim(t, s, "holder-a", seqsOf(mine)) {
		t.Error("HoldsClaim = true with one of the entries dequeued")
	}
	if !holdsClaim(t, s, "holder-a", []uint64{mine[0].Seq, mine[2].Seq}) {
		t.Error("HoldsClaim = false for the two entries still queued under the claim")
	}
}

// testHoldsClaimHolders: HoldsClaim holds only for the holder of a claim
// not yet past.
func testHoldsClaimHolders(t *testing.T, open opener) {
	s := open.fresh(t)
	enqueued(t, s, 4, 4)
	mine := claim(t, s, 2, "holder-a", time.Minute)
	if len(mine) != 2 {
		t.Fatalf("claimed %d of 2 entries", len(mine))
	}
	if holdsClaim(t, s, "holder-b", seqsOf(mine)) {
		t.Error("HoldsClaim = true for a holder whose entries another claimed")
	}
	unclaimed := outbox(t, s, 4)[2:]
	if holdsClaim(t, s, "holder-a", seqsOf(unclaimed)) {
		t.Error("HoldsClaim = true for entries nobody claimed")
	}
	// A claim of a microsecond has run out by the time it is asked about.
	brief := claim(t, s, 2, "holder-c", time.Microsecond)
	if len(brief) != 2 {
		t.Fatalf("claimed %d of the 2 unclaimed entries", len(brief))
	}
	if holdsClaim(t, s, "holder-c", seqsOf(brief)) {
		t.Error("HoldsClaim = true for a claim that ran out")
	}
}
