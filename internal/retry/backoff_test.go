package retry

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := Backoff{Min: 500 * time.Millisecond, Max: 3 * time.Second}
	t0 := time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)
	if !b.Due(t0) {
		t.Fatal("a new backoff is not due")
	}
	if n, since := b.Succeeded(); n != 0 || !since.IsZero() {
		t.Fatalf("a success with no failure before it: %d since %v", n, since)
	}
	now := t0
	for i, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		wait, n := b.Failed(now)
		if wait != want || n != i+1 {
			t.Fatalf("failure %d: wait %v, %d in a row; want %v, %d", i+1, wait, n, want, i+1)
		}
		if b.Due(now.Add(wait - time.Nanosecond)) {
			t.Fatalf("failure %d: due before its wait", i+1)
		}
		now = now.Add(wait)
		if !b.Due(now) {
			t.Fatalf("failure %d: not due after its wait", i+1)
		}
	}
	if n, since := b.Succeeded(); n != 5 || !since.Equal(t0) {
		t.Fatalf("success after five failures: %d since %v, want 5 since %v", n, since, t0)
	}
	if !b.Due(now) {
		t.Fatal("not due after a success")
	}
	if wait, n := b.Failed(now); wait != 500*time.Millisecond || n != 1 {
		t.Fatalf("a failure after a success: wait %v, %d in a row; want the minimum again", wait, n)
	}
}

func TestPostponeCountsNoFailure(t *testing.T) {
	b := Backoff{Min: 500 * time.Millisecond, Max: 3 * time.Second}
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	for i := range 3 {
		now := t0.Add(time.Duration(i) * 500 * time.Millisecond)
		b.Postpone(now)
		if b.Due(now.Add(499 * time.Millisecond)) {
			t.Fatalf("postponement %d: due before the minimum", i+1)
		}
		if !b.Due(now.Add(500 * time.Millisecond)) {
			t.Fatalf("postponement %d: not due after the minimum (the wait grew)", i+1)
		}
	}
	if n, _ := b.Succeeded(); n != 0 {
		t.Fatalf("a success after postponements only: %d failures before it, want 0", n)
	}
	if wait, n := b.Failed(t0); wait != 500*time.Millisecond || n != 1 {
		t.Fatalf("the first failure after postponements: wait %v, %d in a row", wait, n)
	}
}
