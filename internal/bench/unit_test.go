package bench

import "testing"

// TestVerificationUnit checks that the unit is measured from thread CPU
// time: one reading per batch, none of them zero (a clock that did not
// advance would make every cost infinite).
func TestVerificationUnit(t *testing.T) {
	u, err := measureVerification(10 * unitBatch)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.cpu) != 10 || len(u.wall) != 10*unitBatch {
		t.Fatalf("%d CPU batches and %d wall samples, want 10 and %d", len(u.cpu), len(u.wall), 10*unitBatch)
	}
	for i, d := range u.cpu {
		if d <= 0 {
			t.Fatalf("batch %d: thread CPU per verification %s", i, d)
		}
	}
	if got := u.units(2 * u.median().Seconds()); got < 1.99 || got > 2.01 {
		t.Fatalf("twice the unit is %.3f units", got)
	}
}
