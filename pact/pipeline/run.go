package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pactledger/pactledger/internal/retry"
)

// Outbox is the durable queue Run drains, oldest entry first.
type Outbox interface {
	// Head returns up to n of the oldest entries, oldest first; none when
	// the outbox is empty. It stops before an entry it cannot read; when
	// that entry is the oldest it returns an *UnreadableError naming it.
	Head(n int) ([]Entry, error)
	// Remove deletes the entries seqs, in one write: the ledger has them.
	Remove(seqs ...uint64) error
	// SetAside moves the entry seq out of the queue, kept for an operator
	// with why (SetAsideWhy): the ledger refused it as invalid, or it
	// cannot be read.
	SetAside(seq uint64, why string) error
	// Depth is the number of entries waiting.
	Depth() int
}

// Entry is an outbox entry with its sequence number.
type Entry struct {
	Seq  uint64
	Item Item
}

// MaxBatch is the most receipts Run posts in one call to a BatchSink.
const MaxBatch = 64

// RefusalsAtOnce is the most refusals Run has in flight at once: a run of
// refusals at the outbox's head is posted this many at a time, each in
// a call of its own, and what the ledger has leaves the outbox in one
// write. Refusals are rows of their own, none read by another's checks,
// so their order among themselves does not matter; a revocation, which
// the refusals after it are checked against, goes alone in its place.
const RefusalsAtOnce = 8

// UnreadableError is Head's error when the oldest entry cannot be read
// (its bytes are not an entry of this version): Run sets it aside rather
// than stop every entry queued after it.
type UnreadableError struct {
	Seq uint64
	Err error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("outbox entry %d cannot be read: %v", e.Seq, e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// MaxWhy bounds the reason kept with an entry set aside (SetAsideWhy).
const MaxWhy = 2048

// SetAsideWhy is err as the reason kept with an entry set aside: valid
// UTF-8, at most MaxWhy bytes, cut between characters.
func SetAsideWhy(err error) string {
	why := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if len(why) <= MaxWhy {
		return why
	}
	cut := MaxWhy - len("…")
	for cut > 0 && !utf8.RuneStart(why[cut]) {
		cut--
	}
	return why[:cut] + "…"
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
// fails. The receipts at the outbox's head go together to a BatchSink,
// up to MaxBatch a call; the refusals at its head go RefusalsAtOnce at
// a time; a revocation goes alone, and so does every receipt for the
// rest of the drain once the ledger refused a batch call itself.
func drain(ctx context.Context, outbox Outbox, sink Sink, log *slog.Logger) (int, error) {
	batches, _ := sink.(BatchSink)
	sent := 0
	for {
		n := RefusalsAtOnce // read no more than may be posted
		if batches != nil {
			n = MaxBatch
		}
		head, err := outbox.Head(n)
		if u := (*UnreadableError)(nil); errors.As(err, &u) {
			// Kept, not dropped; the entries after it are not held up.
			log.ErrorContext(ctx, "an outbox entry cannot be read; kept aside", slog.Uint64("seq", u.Seq), slog.String("error", u.Err.Error()))
			if err := outbox.SetAside(u.Seq, SetAsideWhy(u)); err != nil {
				return sent, err
			}
			continue
		}
		if err != nil || len(head) == 0 {
			return sent, err
		}
		run := 0
		for run < len(head) && head[run].Item.Receipt != nil {
			run++
		}
		if batches != nil && run > 1 {
			n, whole, err := postBatch(ctx, outbox, batches, head[:run], log)
			sent += n
			if err != nil && !whole {
				return sent, err
			}
			if err == nil {
				continue
			}
			// The ledger refused the call itself (an older ledger without
			// AppendReceipts, a body over its limit): one at a time until
			// this drain ends.
			log.WarnContext(ctx, "the ledger refused a batch of receipts; posting them one at a time", slog.String("error", err.Error()))
			batches = nil
		}
		refusals := 0
		for refusals < min(len(head), RefusalsAtOnce) && head[refusals].Item.Refusal != nil {
			refusals++
		}
		if refusals > 1 {
			n, err := postRefusals(ctx, outbox, sink, head[:refusals], log)
			sent += n
			if err != nil {
				return sent, err
			}
			continue
		}
		if err := postOne(ctx, outbox, sink, head[0], log); err != nil {
			return sent, err
		}
		sent++
	}
}

// postOne posts e and takes it out of the outbox: removed when the ledger
// has it, set aside when the ledger refused it as invalid.
func postOne(ctx context.Context, outbox Outbox, sink Sink, e Entry, log *slog.Logger) error {
	perr := sink.Post(ctx, e.Item)
	switch {
	case perr == nil:
		return outbox.Remove(e.Seq)
	case errors.Is(perr, ErrRejected):
		log.ErrorContext(ctx, "the ledger rejected an outbox entry; kept aside", slog.Uint64("seq", e.Seq), slog.String("error", perr.Error()))
		return outbox.SetAside(e.Seq, SetAsideWhy(perr))
	}
	return perr
}

// postRefusals posts refusals at once, each in a call of its own, and
// takes out of the outbox those the ledger has (removed, in one write)
// or refused as invalid (set aside). Any other answer leaves its refusal
// in its place, to be posted again (one the ledger recorded meanwhile is
// then found, not recorded twice), and the first such error is returned
// with how many left the outbox.
func postRefusals(ctx context.Context, outbox Outbox, sink Sink, refusals []Entry, log *slog.Logger) (int, error) {
	errs := make([]error, len(refusals))
	var wg sync.WaitGroup
	for i, e := range refusals {
		wg.Go(func() { errs[i] = sink.Post(ctx, e.Item) })
	}
	wg.Wait()
	var done []uint64
	var again error
	n := 0
	for i, e := range refusals {
		switch perr := errs[i]; {
		case perr == nil:
			done = append(done, e.Seq)
		case errors.Is(perr, ErrRejected):
			log.ErrorContext(ctx, "the ledger rejected an outbox entry; kept aside", slog.Uint64("seq", e.Seq), slog.String("error", perr.Error()))
			if err := outbox.SetAside(e.Seq, SetAsideWhy(perr)); err != nil {
				return n, err
			}
			n++
		default:
			if again == nil {
				again = perr
			}
		}
	}
	if len(done) > 0 {
		if err := outbox.Remove(done...); err != nil {
			return n, err
		}
		n += len(done)
	}
	return n, again
}

// postBatch posts receipts in one call and takes out of the outbox, in
// order, those the ledger has (removed) or refused as invalid (set aside),
// up to the first it answered with anything else: that one and those after
// it stay, to be posted again (a receipt recorded meanwhile is then found,
// not recorded twice). It returns how many left the outbox and, when the
// call itself failed, whole true if the ledger refused the call (the error
// wraps ErrRejected).
func postBatch(ctx context.Context, outbox Outbox, sink BatchSink, receipts []Entry, log *slog.Logger) (int, bool, error) {
	items := make([]Item, len(receipts))
	for i, e := range receipts {
		items[i] = e.Item
	}
	errs, err := sink.PostReceipts(ctx, items)
	if err != nil {
		return 0, errors.Is(err, ErrRejected), err
	}
	var done []uint64
	flush := func() error {
		if len(done) == 0 {
			return nil
		}
		err := outbox.Remove(done...)
		done = done[:0]
		return err
	}
	n := 0
	for i, e := range receipts {
		perr := errs[i]
		switch {
		case perr == nil:
			done = append(done, e.Seq)
		case errors.Is(perr, ErrRejected):
			if err := flush(); err != nil {
				return n, false, err
			}
			log.ErrorContext(ctx, "the ledger rejected an outbox entry; kept aside", slog.Uint64("seq", e.Seq), slog.String("error", perr.Error()))
			if err := outbox.SetAside(e.Seq, SetAsideWhy(perr)); err != nil {
				return n, false, err
			}
		default:
			return n, false, errors.Join(flush(), perr)
		}
		n++
	}
	return n, false, flush()
}
