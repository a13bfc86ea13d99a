package provider

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/pactledger/pactledger/pact/brand"
)

// refusalWarnEvery is the least time between two warnings of one brand
// that identity refusals were not put on record.
const refusalWarnEvery = time.Minute

// NotRecorded counts the identity refusals of a brand (an account action
// asked under PACT §3 alone, refused in chat or with a step-up) that the
// personal agent was answered as ever but that were not queued for the
// ledger.
type NotRecorded struct {
	// OverRate were past the brand's Config.RefusalLimit.
	OverRate uint64
	// OverRoom found no room in the outbox: the identity refusals held
	// their share of it (store.Store.LimitIdentityRefusals), or the
	// outbox was full.
	OverRoom uint64
}

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
	bucket *rate.Limiter // nil: no limit
	// returned counts the tokens given back by refusals not queued after
	// all, at most the bucket's burst: the next takes spend them first.
	returned atomic.Int64

	overRate, overRoom atomic.Uint64

	mu       sync.Mutex
	unwarned uint64    // not recorded since the last warning
	warned   time.Time // when the last warning was logged; zero: never
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
			br.bucket = rate.NewLimiter(rate.Limit(l.Rate), burst)
		}
		c.brands[id] = br
	}
	return c
}

// take takes a token from brand's bucket at now: ok is false when there
// is none, the refusal then not to be queued. giveBack returns the token,
// for a refusal that was not queued after all (no room in the outbox, or
// the turn failed): only refusals put on record spend the brand's bound.
// A token given back is kept apart from the bucket, which cannot take
// one back once later takes spent or were refused its tokens, and spent
// by the next take first.
func (c *refusalCap) take(brand string, now time.Time) (giveBack func(), ok bool) {
	br := c.brands[brand]
	if br == nil || br.bucket == nil {
		return func() {}, true
	}
	for {
		n := br.returned.Load()
		if n <= 0 {
			break
		}
		if br.returned.CompareAndSwap(n, n-1) {
			return br.giveBackOnce(), true
		}
	}
	if !br.bucket.AllowN(now, 1) {
		return nil, false
	}
	return br.giveBackOnce(), true
}

// giveBackOnce is giveBack for one token: called again, it does nothing.
func (br *brandRefusals) giveBackOnce() func() {
	var once sync.Once
	return func() { once.Do(br.giveBack) }
}

// giveBack returns a token taken, up to the bucket's burst.
func (br *brandRefusals) giveBack() {
	for {
		n := br.returned.Load()
		if n >= int64(br.bucket.Burst()) || br.returned.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// dropped counts an identity refusal of brand not queued (over the rate
// when overRate, else for want of room) and warns, at most once every
// refusalWarnEvery for the brand, how many were not since the last
// warning.
func (c *refusalCap) dropped(ctx context.Context, brand string, overRate bool, now time.Time) {
	br := c.brands[brand]
	if br == nil {
		return
	}
	why := "no room in the outbox"
	if overRate {
		br.overRate.Add(1)
		why = "over provider.refusalLimit"
	} else {
		br.overRoom.Add(1)
	}
	br.mu.Lock()
	br.unwarned++
	n := br.unwarned
	warn := br.warned.IsZero() || now.Sub(br.warned) >= refusalWarnEvery || now.Before(br.warned)
	if warn {
		br.unwarned, br.warned = 0, now
	}
	br.mu.Unlock()
	if warn {
		c.log.WarnContext(ctx, "refusals of account actions asked without a delegation grant were answered but not put on record for the ledger",
			slog.String("brand", brand), slog.Uint64("not_recorded", n), slog.String("latest", why),
			slog.Uint64("not_recorded_over_rate_total", br.overRate.Load()), slog.Uint64("not_recorded_no_room_total", br.overRoom.Load()))
	}
}

// counts returns every brand's counts.
func (c *refusalCap) counts() map[string]NotRecorded {
	out := make(map[string]NotRecorded, len(c.brands))
	for id, br := range c.brands {
		out[id] = NotRecorded{OverRate: br.overRate.Load(), OverRoom: br.overRoom.Load()}
	}
	return out
}
