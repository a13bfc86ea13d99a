package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// TestSweepTakesTheSweepersLease (bbolt): a sweep asked for while no
// sweeper of this ledger runs takes the sweeper's lease for its run and
// releases it after; while another holder has the lease it deletes
// nothing and names that holder; a dry run takes no lease.
func TestSweepTakesTheSweepersLease(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	if _, err := h.l.Sweep(ctx, false); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, held := h.l.LeaseHeld(ledger.LeaseSweeper); held {
		t.Error("the sweep's lease is still held after it")
	}
	// Released: another holder takes it at once.
	if _, err := h.store.AcquireLease(ctx, ledger.LeaseSweeper, "other", time.Minute); err != nil {
		t.Fatalf("take the lease after the sweep: %v", err)
	}
	_, err := h.l.Sweep(ctx, false)
	var held *ledger.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != "other" || !errors.Is(err, ledger.ErrLeaseHeld) {
		t.Fatalf("sweep while another holder has the lease: %v, want a *LeaseHeldError naming other", err)
	}
	if time.Until(held.Expires) <= 0 || time.Until(held.Expires) > time.Minute {
		t.Errorf("the lease ends at %s, want within the minute ahead", held.Expires)
	}
	if _, err := h.l.Sweep(ctx, true); err != nil {
		t.Errorf("dry run while another holder has the lease: %v", err)
	}
}
