package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pactledger/pactledger/ledger"
)

// errMember is what the failing member of a group commit returns.
var errMember = errors.New("this member fails")

// testGroupCommitFailingMember: many writers commit at once while one of
// them fails after writing a row, an outbox entry, a drill report and a
// queued leaf. Its Update returns its error and none of its writes
// persist; every other writer's Update returns nil and all of theirs do.
// Each fn may run more than once (the suite counts, and allows, re-runs).
// A writer parked in fn holds the batch open so that the others queue
// behind it and, on a backend that batches, share a transaction with the
// failing member.
func testGroupCommitFailingMember(t *testing.T, open opener) {
	s := open.fresh(t)
	const failing = writers / 2
	rows := fixtureRows(writers)
	var runs [writers]atomic.Int32
	release := make(chan struct{})
	write := func(i int) func(ledger.Tx) error {
		return func(tx ledger.Tx) error {
			runs[i].Add(1)
			if i == 0 {
				// Hold the first transaction until every writer has been
				// started, so the rest arrive while it is open.
				<-release
			}
			if err := tx.CreateRow(rows[i]); err != nil {
				return err
			}
			if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: rows[i].ID, Key: ledger.EvidenceKey(rows[i].ID)}, base); err != nil {
				return err
			}
			if err := tx.PutDrill(fmt.Sprintf("drill-%03d", i), []byte("{}")); err != nil {
				return err
			}
			if err := tx.QueueLeaf(rows[i].ID, []byte(rows[i].ID)); err != nil {
				return err
			}
			if i == failing {
				return errMember
			}
			return nil
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	started := make(chan struct{}, writers)
	for i := range writers {
		wg.Go(func() {
			started <- struct{}{}
			errs[i] = s.Update(t.Context(), write(i))
		})
	}
	for range writers {
		<-started
	}
	close(release)
	wg.Wait()

	for i, err := range errs {
		if i == failing {
			if !errors.Is(err, errMember) {
				t.Errorf("failing member: Update returned %v, want its own error", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	again := 0
	for i := range runs {
		switch n := runs[i].Load(); {
		case n < 1:
			t.Errorf("writer %d: fn never ran", i)
		case n > 1:
			again++
		}
	}
	// On a backend that retries the members of a failed batch alone, the
	// writers that shared the failing member's batch ran twice.
	t.Logf("%d of %d writers ran fn more than once", again, writers)
	view(t, s, func(tx ledger.Tx) error {
		for i, r := range rows {
			_, err := tx.Row(r.ID)
			switch {
			case i == failing && !errors.Is(err, ledger.ErrNotFound):
				t.Errorf("the failing member's row: Row returned %v, want ErrNotFound", err)
			case i != failing && err != nil:
				t.Errorf("writer %d's row: %v", i, err)
			}
			_, err = tx.Drill(fmt.Sprintf("drill-%03d", i))
			switch {
			case i == failing && !errors.Is(err, ledger.ErrNotFound):
				t.Errorf("the failing member's drill: Drill returned %v, want ErrNotFound", err)
			case i != failing && err != nil:
				t.Errorf("writer %d's drill: %v", i, err)
			}
		}
		listed, _, err := tx.List(ledger.Query{PageSize: 1000})
		if err != nil {
			return err
		}
		if len(listed) != writers-1 {
			t.Errorf("List: %d rows, want %d", len(listed), writers-1)
		}
		depth, err := tx.OutboxDepth()
		if err != nil {
			return err
		}
		entries, err := tx.Outbox(1000)
		if err != nil {
			return err
		}
		if depth != writers-1 || len(entries) != writers-1 {
			t.Errorf("outbox: depth %d, %d entries; want %d", depth, len(entries), writers-1)
		}
		for _, e := range entries {
			if e.Ref == rows[failing].ID {
				t.Errorf("the failing member's outbox entry persisted: %s", show(e))
			}
		}
		leaves, err := tx.PendingLeaves(1000)
		if err != nil {
			return err
		}
		if len(leaves) != writers-1 {
			t.Errorf("%d queued leaves, want %d", len(leaves), writers-1)
		}
		for _, l := range leaves {
			if l.Ref == rows[failing].ID {
				t.Errorf("the failing member's leaf persisted")
			}
		}
		return nil
	})
}

// testUpdateAfterClose: once the store is closed, Update returns an error
// wrapping ledger.ErrClosed and does not run fn.
func testUpdateAfterClose(t *testing.T, open opener) {
	s := open.fresh(t)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ran := false
	err := s.Update(t.Context(), func(ledger.Tx) error { ran = true; return nil })
	if !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Update after Close: %v, want an error wrapping ledger.ErrClosed", err)
	}
	if ran {
		t.Errorf("Update after Close ran fn")
	}
}
