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
	// Every, above zero, spaces the rounds that do work: the round after
	// one that did work starts Every after that one started, not at once,
	// unless Full says that round took all it could (a backlog is drained
	// back to back). Work that arrives meanwhile waits for that round, so
	// rounds are fewer and each carries more. Default 0: back to back.
	Every time.Duration
	// Full reports whether a round that did n units of work took a full
	// batch; nil: never.
	Full func(n int) bool
}

// Drain calls round until ctx is done. After a round that did work it calls
// round again at once, or with Every set when the round's start is Every
// ago (a wake does not cut that short); after an idle round it waits Idle or
// until wake; after a failed round it calls onErr and waits the backoff (new
// work does not cut a backoff short).
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
		started := time.Now()
		n, err := round(ctx)
		if ctx.Err() != nil {
			return
		}
		wait, w := cfg.Idle, wake
		switch {
		case err != nil:
			backoff = min(max(2*backoff, cfg.MinBackoff), cfg.MaxBackoff)
			wait = backoff
			onErr(err, wait)
			w = nil // keep the backoff even when new work arrives
		case n > 0:
			backoff = 0
			if cfg.Every <= 0 || (cfg.Full != nil && cfg.Full(n)) {
				continue
			}
			if wait = cfg.Every - time.Since(started); wait <= 0 {
				continue
			}
			w = nil // the work that arrives meanwhile waits for the next round
		default:
			backoff = 0
		}
		t := time.NewTimer(wait)
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
