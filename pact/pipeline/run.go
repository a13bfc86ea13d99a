package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/pactledger/pactledger/internal/retry"
)

// Outbox is the durable queue Run drains, oldest entry first.
type Outbox interface {
	// Oldest returns the oldest entry and its sequence number; ok is false
	// when the outbox is empty.
	Oldest() (seq uint64, item Item, ok bool, err error)
	// Remove deletes the entry seq: the ledger has it.
	Remove(seq uint64) error
	// SetAside moves the entry seq out of the queue, kept for an operator:
	// the ledger refused it as invalid.
	SetAside(seq uint64) error
	// Depth is the number of entries waiting.
	Depth() int
}

// Run posts the outbox to sink in order until ctx is done. An entry leaves
// the outbox only when the ledger has it (or refused it as invalid: it is
// then set aside and logged); while the ledger is down the outbox waits and
// retries with backoff, losing nothing. wake, sent on whenever entries are
// queued, cuts the idle wait short.
func Run(ctx context.Context, outbox Outbox, sink Sink, wake <-chan struct{}, log *slog.Logger) {
	retry.Drain(ctx, retry.Config{}, wake,
		func(ctx context.Context) (int, error) { return drain(ctx, outbox, sink, log) },
		func(err error, wait time.Duration) {
			log.WarnContext(ctx, "posting receipts to the ledger failed; will retry", slog.String("error", err.Error()),
				slog.Duration("retry_in", wait), slog.Int("waiting", outbox.Depth()))
		})
}

// drain posts waiting entries in order until the outbox is empty or a post
// fails.
func drain(ctx context.Context, outbox Outbox, sink Sink, log *slog.Logger) (int, error) {
	sent := 0
	for {
		seq, item, ok, err := outbox.Oldest()
		if err != nil || !ok {
			return sent, err
		}
		perr := sink.Post(ctx, item)
		switch {
		case perr == nil:
			err = outbox.Remove(seq)
		case errors.Is(perr, ErrRejected):
			log.ErrorContext(ctx, "the ledger rejected an outbox entry; kept aside", slog.String("error", perr.Error()))
			err = outbox.SetAside(seq)
		default:
			return sent, perr
		}
		if err != nil {
			return sent, err
		}
		sent++
	}
}
