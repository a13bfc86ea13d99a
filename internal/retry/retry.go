// Package retry runs a draining loop: a round of work repeated at once
// while it makes progress, paused while there is nothing to do (woken early
// by a signal), and backed off exponentially after failures.
package retry

import (
	"context"
	"time"
)

// Config tunes Drain. The zero value is the default.
type Config struct {
	// Idle is the pause after a round that did nothing; default 1 s.
	Idle time.Duration
	// MinBackoff and MaxBackoff bound the pause after a failed round;
	// default 250 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
}

// Drain calls round until ctx is done. After a round that did work it calls
// round again at once; after an idle round it waits Idle or until wake; after
// a failed round it calls onErr and waits the backoff (new work does not cut
// a backoff short).
func Drain(ctx context.Context, cfg Config, wake <-chan struct{}, round func(context.Context) (int, error), onErr func(err error, retryIn time.Duration)) {
	if cfg.Idle <= 0 {
		cfg.Idle = time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 250 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	backoff := time.Duration(0)
	for {
		n, err := round(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := cfg.Idle
		switch {
		case err != nil:
			backoff = min(max(2*backoff, cfg.MinBackoff), cfg.MaxBackoff)
			wait = backoff
			onErr(err, wait)
		case n > 0:
			backoff = 0
			continue
		default:
			backoff = 0
		}
		t := time.NewTimer(wait)
		w := wake
		if err != nil {
			w = nil // keep the backoff even when new work arrives
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w:
			t.Stop()
		case <-t.C:
		}
	}
}
