package provider

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pactledger/pactledger/pact/brand"
)

// refusalWarnEvery is the least time between two warnings of one brand
// that identity refusals, or denied consents, were not put on record.
const refusalWarnEvery = time.Minute

// NotRecorded counts the refusals of a brand that were answered as ever
// but not queued for the ledger: identity refusals (an account action
// asked under PACT §3 alone, refused in chat or with a step-up), and
// denied consents (the User's denial was honoured).
type NotRecorded struct {
	// OverRate were identity refusals past the brand's
	// Config.RefusalLimit.
	OverRate uint64
	// OverRoom were identity refusals that found no room in the outbox:
	// the identity refusals held their share of it
	// (store.Store.LimitIdentityRefusals), or the outbox was full.
	OverRoom uint64
	// DenialsOverRoom were denied consents whose refusal found no room:
	// the denied consents held their share of the outbox
	// (store.Store.LimitDeniedConsents), or the outbox was full.
	DenialsOverRoom uint64
}

// notRecordedWhy is why a refusal was not queued.
type notRecordedWhy int

const (
	// overRate: an identity refusal past the brand's RefusalLimit.
	overRate notRecordedWhy = iota
	// overRoom: an identity refusal with no room in the outbox.
	overRoom
	// denialOverRoom: a denied consent's refusal with no room in the
	// outbox.
	denialOverRoom
)

// refusalCap bounds, per brand, the identity refusals a Provider queues
// for the ledger. Personal agents and their subs cost nothing to make
// (provider.openAgents), so a bound per agent or per User does not bound
// them; the brands are the Provider's configuration, so a bound per brand
// bounds them all, and one brand's flood leaves the other brands' records
// as they are.
type refusalCap struct {
	log    *slog.Logger
	brands map[string]*brandRefusals // every configured brand, fixed at New
}

// brandRefusals is one brand's bucket and counts.
type brandRefusals struct {
	bucket *tokenBucket // nil: no limit

	overRate, overRoom, denialsOverRoom atomic.Uint64

	// identity and denials are the warnings of identity refusals and of
	// denied consents not recorded, each at most once every
	// refusalWarnEvery.
	identity, denials warner
}

// warner warns of one kind of refusal not recorded.
type warner struct {
	mu       sync.Mutex
	unwarned uint64    // not recorded since the last warning
	warned   time.Time // when the last warning was logged; zero: never
}

// due counts one more not recorded at now and reports whether to warn,
// with how many were not recorded since the last warning.
func (w *warner) due(now time.Time) (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unwarned++
	n := w.unwarned
	warn := w.warned.IsZero() || now.Sub(w.warned) >= refusalWarnEvery || now.Before(w.warned)
	if warn {
		w.unwarned, w.warned = 0, now
	}
	return n, warn
}

// tokenBucket holds up to burst tokens, refilled at rate a second. A
// token can be given back (rate.Limiter cannot take one back once a
// later take spent or was refused its tokens), never past burst.
type tokenBucket struct {
	rate, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time // when tokens was last brought up to date
}

func newTokenBucket(rate float64, burst int) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// take takes a token at now: false when there is none.
func (b *tokenBucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.last = now
	}
	if now.After(b.last) {
		// A clock that steps back refills nothing.
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// giveBack returns a token taken, up to burst.
func (b *tokenBucket) giveBack() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+1)
	b.mu.Unlock()
}

func newRefusalCap(brands map[string]*brand.Brand, l Limit, log *slog.Logger) *refusalCap {
	c := &refusalCap{log: log, brands: make(map[string]*brandRefusals, len(brands))}
	for id := range brands {
		br := &brandRefusals{}
		if l.Rate > 0 {
			burst := l.Burst
			if burst <= 0 {
				burst = max(1, int(l.Rate))
			}
			br.bucket = newTokenBucket(l.Rate, burst)
		}
		c.brands[id] = br
	}
	return c
}

// take takes a token from brand's bucket at now: ok is false when there
// is none, the refusal then not to be queued. giveBack returns the token,
// once however often it is called, for a refusal that was not queued
// after all (no room in the outbox, or the turn failed): only refusals
// put on record spend the brand's bound.
func (c *refusalCap) take(brand string, now time.Time) (giveBack func(), ok bool) {
	br := c.brands[brand]
	if br == nil || br.bucket == nil {
		return func() {}, true
	}
	if !br.bucket.take(now) {
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(br.bucket.giveBack) }, true
}

// dropped counts a refusal of brand not queued, for why, and warns, at
// most once every refusalWarnEvery for the brand and kind (identity
// refusals, denied consents), how many were not since the last warning.
func (c *refusalCap) dropped(ctx context.Context, brand string, why notRecordedWhy, now time.Time) {
	br := c.brands[brand]
	if br == nil {
		return
	}
	if why == denialOverRoom {
		br.denialsOverRoom.Add(1)
		if n, warn := br.denials.due(now); warn {
			c.log.WarnContext(ctx, "denied consents were honoured but not put on record for the ledger: no room left for them in the outbox",
				slog.String("brand", brand), slog.Uint64("not_recorded", n), slog.Uint64("not_recorded_total", br.denialsOverRoom.Load()))
		}
		return
	}
	latest := "no room in the outbox"
	if why == overRate {
		br.overRate.Add(1)
		latest = "over provider.refusalLimit"
	} else {
		br.overRoom.Add(1)
	}
	if n, warn := br.identity.due(now); warn {
		c.log.WarnContext(ctx, "refusals of account actions asked without a delegation grant were answered but not put on record for the ledger",
			slog.String("brand", brand), slog.Uint64("not_recorded", n), slog.String("latest", latest),
			slog.Uint64("not_recorded_over_rate_total", br.overRate.Load()), slog.Uint64("not_recorded_no_room_total", br.overRoom.Load()))
	}
}

// counts returns every brand's counts.
func (c *refusalCap) counts() map[string]NotRecorded {
	out := make(map[string]NotRecorded, len(c.brands))
	for id, br := range c.brands {
		out[id] = NotRecorded{OverRate: br.overRate.Load(), OverRoom: br.overRoom.Load(), DenialsOverRoom: br.denialsOverRoom.Load()}
	}
	return out
}
