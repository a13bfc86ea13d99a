package pact

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// DefaultPruneInterval is Config.PruneInterval's default.
const DefaultPruneInterval = 10 * time.Minute

// ErrClosed: the Provider was closed.
var ErrClosed = errors.New("pact: the Provider is closed")

// RunPruner prunes what has come due in the Provider's store
// (docs/design/040) as it starts and then every Config.PruneInterval,
// until ctx is done or Close is called. The writes that add to the store
// prune some of what is due as well, but a Provider that no turn, token or
// device authorization comes to would keep all of it until one does; with
// RunPruner, nothing stays longer than an interval past when it is due.
// Each pass carries out what is due in short write transactions of a
// bounded batch each, one after another while a batch was full
// (store.Prune), and logs what it removed: at INFO when it removed
// anything, at DEBUG when it did not. A pass that fails is logged at
// ERROR and tried again at the next interval. RunPruner returns nil once
// stopped, and ErrClosed when the Provider was closed before it started.
func (p *Provider) RunPruner(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.runs.Add(1)
	p.mu.Unlock()
	defer p.runs.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Close stops a pass between two of its transactions, as ctx does.
	p.runs.Go(func() {
		select {
		case <-p.closing:
			cancel()
		case <-ctx.Done():
		}
	})
	t := time.NewTicker(p.pruneEvery)
	defer t.Stop()
	for {
		p.prune(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// prune is one pass of RunPruner.
func (p *Provider) prune(ctx context.Context) {
	start := time.Now()
	got, err := p.server.Prune(ctx, p.now().UTC())
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		p.log.ErrorContext(ctx, "pruning the Provider's store failed; will retry", slog.String("error", err.Error()), slog.Duration("retry_in", p.pruneEvery))
		return
	}
	level := slog.LevelDebug
	if got.Total() > 0 {
		level = slog.LevelInfo
	}
	p.log.Log(ctx, level, "provider store pruned what came due", slog.Int("device_entries", got.Devices), slog.Int("kept_steps", got.Kept),
		slog.Int("consent", got.Consent), slog.Int("sessions", got.Sessions), slog.Int("ended_grant_attempts", got.EndedAttempts),
		slog.Int("transactions", got.Transactions), slog.Duration("took", time.Since(start)))
}
