package brandlogin

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The counts are per account, leave the window as it passes, give back a
// code found known, and never follow more than maxGuessers accounts.
func TestGuessesAreCountedAndBounded(t *testing.T) {
	var g guesses
	now := time.Unix(1_800_000_000, 0)
	for i := range maxGuesses {
		at := now.Add(time.Duration(i) * time.Minute)
		if _, ok := g.try("a", at); !ok {
			t.Fatalf("refused after %d unknown codes", i)
		}
	}
	until, ok := g.try("a", now.Add(5*time.Minute))
	if ok || !until.Equal(now.Add(guessWindow)) {
		t.Fatalf("after %d unknown codes: allowed %v, until %v; want refused until %v", maxGuesses, ok, until, now.Add(guessWindow))
	}
	if _, ok := g.try("b", now); !ok {
		t.Fatal("another account refused")
	}
	// A known code is given back: the account may go on.
	g.known("a", now.Add(4*time.Minute))
	if _, ok := g.try("a", now.Add(6*time.Minute)); !ok {
		t.Fatal("refused after a known code was given back")
	}
	// The first guess leaves the window: one more is allowed.
	if _, ok := g.try("a", now.Add(guessWindow+time.Second)); !ok {
		t.Fatal("still refused once the first guess left the window")
	}
	for i := range 3 * maxGuessers {
		g.try(fmt.Sprintf("acct-%d", i), now.Add(time.Duration(i)*time.Millisecond))
	}
	if len(g.by) > maxGuessers {
		t.Fatalf("%d accounts followed, want at most %d", len(g.by), maxGuessers)
	}
	if _, ok := g.by[fmt.Sprintf("acct-%d", 3*maxGuessers-1)]; !ok {
		t.Fatal("the latest guesser was not kept")
	}
	// Past the window, the accounts followed are dropped for new ones.
	g.try("late", now.Add(guessWindow+time.Hour))
	if len(g.by) != 1 {
		t.Fatalf("%d accounts followed after the window, want the new one alone", len(g.by))
	}
}

// Codes sent at once from one account are counted at once: no more than
// maxGuesses of them are looked up, however many arrive together.
func TestGuessesSentAtOnceAreCountedAtOnce(t *testing.T) {
	var g guesses
	now := time.Unix(1_800_000_000, 0)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 30 {
		wg.Go(func() {
			<-start
			if _, ok := g.try("a", now); ok {
				allowed.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := allowed.Load(); n != maxGuesses {
		t.Fatalf("%d of 30 codes sent at once looked up, want %d", n, maxGuesses)
	}
}
