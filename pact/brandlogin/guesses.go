package brandlogin

import (
	"sync"
	"time"
)

// A signed-in Brand User can have a login assertion signed for any user
// code, so without a limit they could try codes at the consent page until
// one is another User's pending request (RFC 8628 §5.1: rate-limit user
// code attempts). A user code has about 34 bits; maxGuesses unknown codes
// a guessWindow leave an account years from one hit.
const (
	maxGuesses  = 5
	guessWindow = 15 * time.Minute
	// maxGuessers bounds the accounts followed; past it, those whose
	// guesses have all left the window are forgotten first.
	maxGuessers = 10000
)

// guesses counts the unknown user codes each Brand User presented within
// the window.
type guesses struct {
	mu     sync.Mutex
	by     map[string][]time.Time // brand + NUL + user: when each unknown code came, oldest first
	pruned time.Time              // when accounts out of the window were last dropped
}

// recent drops the times before the window from ts.
func recent(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-guessWindow)) {
		i++
	}
	return ts[i:]
}

// blocked reports whether who has presented maxGuesses unknown codes
// within the window, and until when.
func (g *guesses) blocked(who string, now time.Time) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := recent(g.by[who], now)
	if len(ts) < maxGuesses {
		return time.Time{}, false
	}
	return ts[len(ts)-maxGuesses].Add(guessWindow), true
}

// miss records an unknown code from who at now.
func (g *guesses) miss(who string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.by == nil {
		g.by = map[string][]time.Time{}
	}
	if _, ok := g.by[who]; !ok && len(g.by) >= maxGuessers {
		if now.Sub(g.pruned) >= time.Minute {
			g.pruned = now
			for k, ts := range g.by {
				if len(recent(ts, now)) == 0 {
					delete(g.by, k)
				}
			}
		}
		for k := range g.by {
			if len(g.by) < maxGuessers {
				break
			}
			delete(g.by, k) // any one: so many accounts guessing at once is an attack of its own
		}
	}
	ts := append(recent(g.by[who], now), now)
	if len(ts) > maxGuesses {
		ts = ts[len(ts)-maxGuesses:]
	}
	g.by[who] = ts
}
