package brandlogin

import (
	"slices"
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

// try counts a code from who at now as unknown, before it is looked up,
// so that codes sent at once are counted at once: it reports false, and
// until when, when who has presented maxGuesses unknown codes within the
// window. A code found known is taken back with known.
func (g *guesses) try(who string, now time.Time) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := recent(g.by[who], now)
	if len(ts) >= maxGuesses {
		g.by[who] = ts
		return ts[len(ts)-maxGuesses].Add(guessWindow), false
	}
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
	g.by[who] = append(ts, now)
	return time.Time{}, true
}

// known takes back the code try counted from who at at: it was found.
func (g *guesses) known(who string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.by[who]
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].Equal(at) {
			ts = slices.Delete(ts, i, i+1)
			break
		}
	}
	if len(ts) == 0 {
		delete(g.by, who)
		return
	}
	g.by[who] = ts
}
