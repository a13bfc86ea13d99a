package storetest

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// testEdgeArguments: arguments the ledger never passes get the same
// answers from every store. Removing a row not stored is ErrNotFound and
// leaves no tombstone; a reference kind not known is invalid; no
// incidents are asked for with n <= 0, and a bound past every number
// lists from the newest; a lease for no time is invalid.
func testEdgeArguments(t *testing.T, open opener) {
	s := open.fresh(t)
	missing := fixtureRows(1)[0]
	err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.RemoveRow(missing, tombstoneOf(missing)) })
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("RemoveRow of a row not stored: %v, want ErrNotFound", err)
	}
	err = s.Update(t.Context(), func(tx ledger.Tx) error {
		_, err := tx.Count(ledger.RefKind("no such kind"), "key", 1)
		return err
	})
	if !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Count of an unknown kind: %v, want ErrInvalid", err)
	}
	update(t, s, func(tx ledger.Tx) error {
		for range 3 {
			if _, err := newIncident(tx, "scope beyond grant"); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Tombstone(missing.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("the tombstone of a row never stored: %v, want ErrNotFound", err)
		}
		if n, err := tx.Count(ledger.RefHold, "never counted", 0); err != nil || n != 0 {
			t.Errorf("Count(hold, +0) in a read transaction: %d, %v; want 0", n, err)
		}
		for _, n := range []int{0, -1} {
			if got, err := tx.Incidents(n, 0); err != nil || len(got) != 0 {
				t.Errorf("Incidents(%d, 0): %d, %v; want none", n, len(got), err)
			}
		}
		for _, before := range []uint64{math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64} {
			if got, err := tx.Incidents(10, before); err != nil || len(got) != 3 {
				t.Errorf("Incidents(10, %d): %d, %v; want all 3", before, len(got), err)
			}
		}
		return nil
	})
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := s.AcquireLease(t.Context(), "edge", "holder", ttl); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("AcquireLease for %v: %v, want ErrInvalid", ttl, err)
		}
	}
	token, err := s.AcquireLease(t.Context(), "edge", "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(t.Context(), "edge", "holder", token, 0); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("RenewLease for 0: %v, want ErrInvalid", err)
	}
}
