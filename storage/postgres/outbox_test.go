package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
)

// claimOn claims up to n outbox entries for holder on s.
func claimOn(t *testing.T, s ledger.Store, n int, holder string, ttl time.Duration) []uint64 {
	t.Helper()
	var seqs []uint64
	err := s.Update(t.Context(), func(tx ledger.Tx) error {
		es, err := tx.Claim(n, holder, ttl)
		seqs = seqs[:0]
		for _, e := range es {
			seqs = append(seqs, e.Seq)
		}
		return err
	})
	if err != nil {
		t.Fatalf("claim for %s: %v", holder, err)
	}
	return seqs
}

// TestHeldClaimsStayLockedUntilCommit: replica A's transaction finds, with
// HoldsClaim, that it still holds its claim on three entries, and asks
// about a fourth it never claimed. While that transaction is open, A's
// claim runs out (by the database's clock): replica B's Claim passes over
// A's three entries, which stay locked until A commits, and takes the
// fourth, which HoldsClaim left unlocked. Once A commits, B takes the
// three too.
func TestHeldClaimsStayLockedUntilCommit(t *testing.T) {
	dsn := migrated(t)
	a, b := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})
	err := a.Update(t.Context(), func(tx ledger.Tx) error {
		for i := range 4 {
			e := ledger.OutboxEntry{Kind: "bundle", Ref: fmt.Sprint("row-", i), Key: fmt.Sprint("evidence/", i)}
			if err := tx.Enqueue(e, time.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var all []uint64
	err = a.View(t.Context(), func(tx ledger.Tx) error {
		es, err := tx.Outbox(10)
		for _, e := range es {
			all = append(all, e.Seq)
		}
		return err
	})
	if err != nil || len(all) != 4 {
		t.Fatalf("outbox %v, %v; want 4 entries", all, err)
	}
	// A's claim must still hold when A asks, a moment after taking it;
	// should the machine stall longer than the claim, it is taken again
	// for longer.
	for ttl := time.Second; ; ttl *= 4 {
		if ttl > time.Minute {
			t.Fatal("A's claim ran out before A asked whether it held it, each time")
		}
		mine := claimOn(t, a, 3, "replica-a", ttl)
		if !slices.Equal(mine, all[:3]) {
			t.Fatalf("A claimed %v, want the first three entries", mine)
		}
		if lockedWhileOpen(t, dsn, a, b, mine, all[3]) {
			break
		}
	}
	if got := claimOn(t, b, 10, "replica-b", time.Minute); !slices.Equal(got, all) {
		t.Errorf("after A committed, B claimed %v, want %v: A's three, whose claim ran out, and its own", got, all)
	}
}

// lockedWhileOpen runs the open part of TestHeldClaimsStayLockedUntilCommit
// for A's claim on mine, other the entry A never claimed, and reports
// false when the claim had run out before A asked.
func lockedWhileOpen(t *testing.T, dsn string, a, b ledger.Store, mine []uint64, other uint64) bool {
	t.Helper()
	asked, release := make(chan bool, 1), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Update(context.Background(), func(tx ledger.Tx) error {
			held, err := tx.HoldsClaim("replica-a", mine)
			if err != nil || !held {
				asked <- false
				return err
			}
			if held, err := tx.HoldsClaim("replica-a", []uint64{mine[2], other}); err != nil || held {
				asked <- false
				return fmt.Errorf("HoldsClaim with an entry A never claimed: %v, %v; want false", held, err)
			}
			asked <- true
			<-release
			return nil
		})
	}()
	// A's transaction ends before this returns, whatever happens here, so
	// that the stores can close.
	var once sync.Once
	end := func() error {
		var err error
		once.Do(func() {
			close(release)
			err = <-done
		})
		return err
	}
	defer end()
	if !<-asked {
		if err := end(); err != nil {
			t.Fatalf("A's transaction: %v", err)
		}
		return false
	}
	poll(t, "A's claim runs out by the database's clock", time.Minute, func() bool {
		return sqlValue[bool](t, dsn, "SELECT bool_and(claim_until < clock_timestamp()) FROM outbox WHERE seq = ANY($1)", mine)
	})
	if got := claimOn(t, b, 10, "replica-b", time.Minute); len(got) != 1 || got[0] != other {
		t.Errorf("while A's transaction is open, B claimed %v, want only %d (A's are %v)", got, other, mine)
	}
	if err := end(); err != nil {
		t.Fatalf("A's transaction: %v", err)
	}
	return true
}

// OutboxEmpty says whether the outbox holds an entry without counting
// them, as OutboxDepth does: an upload round asks it at every start.
func TestOutboxEmptySaysWhetherAnEntryWaits(t *testing.T) {
	s := open(t, postgres.Config{DSN: migrated(t)})
	empty := func() bool {
		t.Helper()
		var got bool
		if err := s.View(t.Context(), func(tx ledger.Tx) error {
			var err error
			got, err = tx.(ledger.OutboxEmptier).OutboxEmpty()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if !empty() {
		t.Fatal("a new store's outbox is not empty")
	}
	if err := s.Update(t.Context(), func(tx ledger.Tx) error {
		return tx.Enqueue(ledger.OutboxEntry{Kind: "bundle", Ref: "row-1", Key: "evidence/1"}, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if empty() {
		t.Fatal("an outbox holding an entry reads as empty")
	}
	if err := s.Update(t.Context(), func(tx ledger.Tx) error {
		es, err := tx.Outbox(10)
		if err != nil {
			return err
		}
		_, err = tx.Dequeue(es[0].Seq)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !empty() {
		t.Fatal("an outbox whose entry left reads as holding one")
	}
}
