package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// UploaderConfig tunes RunUploader. The zero value is the default.
type UploaderConfig struct {
	// Batch is how many outbox entries one round takes; default 256.
	Batch int
	// Workers is how many uploads run at once; default 16.
	Workers int
	// Idle is how long to wait for new rows when the outbox is empty; default 1 s.
	Idle time.Duration
	// MaxBackoff caps the wait after a failed round; default 30 s.
	MaxBackoff time.Duration
}

// RunUploader drains the outbox into evidence storage until ctx is done:
// each object is put create-only with its retain-until, then removed from
// the outbox together with its recorded location. Failures are retried with
// exponential backoff; nothing leaves the outbox before the store has it.
func (l *Ledger) RunUploader(ctx context.Context, cfg UploaderConfig) error {
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.Idle <= 0 {
		cfg.Idle = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	backoff := time.Duration(0)
	for {
		n, err := l.UploadRound(ctx, cfg.Batch, cfg.Workers)
		if ctx.Err() != nil {
			return nil
		}
		wait := time.Duration(0)
		switch {
		case err != nil:
			backoff = min(max(2*backoff, 250*time.Millisecond), cfg.MaxBackoff)
			wait = backoff
			l.cfg.Logger.WarnContext(ctx, "evidence upload failed; will retry", slog.String("error", err.Error()), slog.Duration("retry_in", wait))
		case n == 0:
			backoff = 0
			wait = cfg.Idle
		default:
			backoff = 0
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-l.notify:
				t.Stop()
				if err != nil {
					// After a failure, keep the backoff even when new rows arrive.
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(wait):
					}
				}
			case <-t.C:
			}
		}
	}
}

// UploadRound uploads up to batch outbox entries and returns how many were
// uploaded. It returns an error when any upload failed.
func (l *Ledger) UploadRound(ctx context.Context, batch, workers int) (int, error) {
	var entries []OutboxEntry
	var depth int
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if entries, err = tx.Outbox(batch); err != nil {
			return err
		}
		depth, err = tx.OutboxDepth()
		return err
	})
	if err != nil {
		return 0, err
	}
	l.cfg.Metrics.depth(depth)
	if len(entries) == 0 {
		return 0, nil
	}
	type done struct {
		seq uint64
		loc Location
	}
	var (
		mu       sync.Mutex
		finished []done
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, workers)
	)
	for _, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			loc, err := l.uploadOne(ctx, e)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			finished = append(finished, done{e.Seq, loc})
		}()
	}
	wg.Wait()
	if len(finished) > 0 {
		err := l.store.Update(ctx, func(tx Tx) error {
			for _, d := range finished {
				if err := tx.Uploaded(d.seq, d.loc); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("record uploads: %w", err)
		}
	}
	l.cfg.Metrics.uploaded("ok", len(finished))
	l.cfg.Metrics.uploaded("error", len(entries)-len(finished))
	l.cfg.Metrics.depth(depth - len(finished))
	return len(finished), firstErr
}

func (l *Ledger) uploadOne(ctx context.Context, e OutboxEntry) (Location, error) {
	var body []byte
	err := l.store.View(ctx, func(tx Tx) error {
		switch e.Kind {
		case ObjectEvidence:
			b, err := tx.Evidence(e.Ref)
			body = b
			return err
		case ObjectJWKS:
			s, err := tx.Snapshot(e.Ref)
			body = s.Body
			return err
		}
		return fmt.Errorf("outbox entry %d: unknown kind %q", e.Seq, e.Kind)
	})
	if err != nil {
		return Location{}, err
	}
	loc, err := l.objects.Put(ctx, e.Key, body, e.RetainUntil)
	if err != nil {
		return Location{}, fmt.Errorf("put %s: %w", e.Key, err)
	}
	loc.Uploaded = true
	return loc, nil
}

// OutboxDepth returns the number of objects waiting for evidence storage.
func (l *Ledger) OutboxDepth(ctx context.Context) (int, error) {
	var n int
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		n, err = tx.OutboxDepth()
		return err
	})
	return n, err
}

// Ready reports whether the row store and evidence storage answer.
func (l *Ledger) Ready(ctx context.Context) error {
	if _, err := l.OutboxDepth(ctx); err != nil {
		return fmt.Errorf("row store: %w", err)
	}
	if err := l.objects.Ping(ctx); err != nil {
		return errors.Join(ErrUnavailable, fmt.Errorf("evidence store: %w", err))
	}
	return nil
}

// ReadObject returns the bytes of an evidence object as the write-once store
// holds them.
func (l *Ledger) ReadObject(ctx context.Context, key string) ([]byte, error) {
	return l.objects.Get(ctx, key)
}
