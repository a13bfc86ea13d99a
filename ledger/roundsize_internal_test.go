package ledger

import (
	"errors"
	"fmt"
	"testing"
)

// TestRoundSize: a round that outlasted its claim halves the size, from
// what it claimed (when it claimed anything), down to one; growAfter full rounds in a row that
// uploaded everything double it, up to the batch; any other failure, or a
// round short of the size, restarts the count without changing the size.
func TestRoundSize(t *testing.T) {
	lost := func(claimed int) error {
		return fmt.Errorf("record segment plans: %w", &outlasted{claimed: claimed, err: errClaimRanOut})
	}
	s := roundSize{batch: 512, now: 512}
	step := func(moved int, err error, change, now int) {
		t.Helper()
		if got := s.after(moved, err); got != change || s.now != now {
			t.Fatalf("after (%d, %v): change %d, size %d; want %d, %d", moved, err, got, s.now, change, now)
		}
	}
	step(0, lost(40), -1, 20) // from what the round claimed, not the batch
	step(0, lost(20), -1, 10)
	step(0, lost(10), -1, 5)
	step(0, lost(5), -1, 2)
	step(0, lost(2), -1, 1)
	step(0, lost(1), 0, 1) // never below one
	for range growAfter - 1 {
		step(1, nil, 0, 1)
	}
	step(1, nil, 1, 2)
	for range growAfter - 2 {
		step(2, nil, 0, 2)
	}
	step(1, nil, 0, 2) // a round short of the size restarts the count
	for range growAfter - 1 {
		step(2, nil, 0, 2)
	}
	step(2, errors.New("put failed"), 0, 2) // and so does another failure
	for range growAfter - 1 {
		step(2, nil, 0, 2)
	}
	step(2, nil, 1, 4)
	step(0, lost(0), 0, 4) // a round that claimed nothing says nothing of the size
	s.now = 300
	for range growAfter - 1 {
		step(300, nil, 0, 300)
	}
	step(300, nil, 1, 512) // up to the batch
	step(512, nil, 0, 512)
	// A claim that ran out during the puts (the round recorded its plans
	// and uploaded the rest) is not a reason to shrink.
	step(3, fmt.Errorf("put: %w", errClaimRanOut), 0, 512)

}
