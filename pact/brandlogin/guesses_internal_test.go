package brandlogin

import (
	"fmt"
	"testing"
	"time"
)

// The counts are per account, leave the window as it passes, and never
// follow more than maxGuessers accounts.
func TestGuessesAreCountedAndBounded(t *testing.T) {
	var g guesses
	now := time.Unix(1_800_000_000, 0)
	for i := range maxGuesses {
		if _, ok := g.blocked("a", now); ok {
			t.Fatalf("blocked after %d unknown codes", i)
		}
		g.miss("a", now.Add(time.Duration(i)*time.Minute))
	}
	until, ok := g.blocked("a", now.Add(5*time.Minute))
	if !ok || !until.Equal(now.Add(guessWindow)) {
		t.Fatalf("after %d unknown codes: blocked %v until %v, want until %v", maxGuesses, ok, until, now.Add(guessWindow))
	}
	if _, ok := g.blocked("b", now); ok {
		t.Fatal("another account blocked")
	}
	// The first guess leaves the window: one more is allowed.
	if _, ok := g.blocked("a", now.Add(guessWindow)); ok {
		t.Fatal("still blocked once the first guess left the window")
	}
	for i := range 3 * maxGuessers {
		g.miss(fmt.Sprintf("acct-%d", i), now.Add(time.Duration(i)*time.Millisecond))
	}
	if len(g.by) > maxGuessers {
		t.Fatalf("%d accounts followed, want at most %d", len(g.by), maxGuessers)
	}
	if _, ok := g.by[fmt.Sprintf("acct-%d", 3*maxGuessers-1)]; !ok {
		t.Fatal("the latest guesser was not kept")
	}
	// Past the window, the accounts followed are dropped for new ones.
	later := now.Add(guessWindow + time.Hour)
	g.miss("late", later)
	if len(g.by) != 1 {
		t.Fatalf("%d accounts followed after the window, want the new one alone", len(g.by))
	}
}
