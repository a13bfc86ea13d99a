package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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

// MoveBacker is an Outbox that can move an entry the ledger answered
// undecided for keys (ErrKeysUnavailable) to its end, so that the entries
// queued after it are not held up by a signer whose keys cannot be
// fetched (docs/design/051).
type MoveBacker interface {
	// MoveBack moves the receipt or refusal seq, with every later receipt
	// and refusal of its grant (Item.Grant), to the outbox's end in their
	// order, each under a new sequence number and with the room it held
	// (under the outbox's bound and its share). It returns the new
	// sequence numbers, or ErrMustWait, moving nothing, when one of them
	// may not pass a revocation queued after it (Item.MayPass). An entry
	// no longer in the outbox moves nothing.
	MoveBack(seq uint64) ([]uint64, error)
}

// ErrMustWait: an entry may not be moved back, as its place before a
// revocation decides the ledger's verdict on it or on its grant's
// entries; it waits at the head.
var ErrMustWait = errors.New("the entry must be recorded before a revocation queued after it")

// Entry is an outbox entry with its sequence number.
type Entry struct {
	Seq  uint64
	Item Item
}

// MaxBatch is the most receipts Run posts in one call to a BatchSink.
const MaxBatch = 64

// MaxMovesPerRound bounds the entries a drain moves to the outbox's end
// (MoveBacker): each move but a refusal's without a grant reads the whole
// outbox in a write transaction, so a round with many entries undecided
// for keys (a signer's keys down, or the ledger's network) reads it a
// bounded number of times; the entries past the bound wait at the head
// for the next round.
const MaxMovesPerRound = 64

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

// keysHeld is the error of a post the ledger answered undecided because
// a signer's keys could not be fetched (ErrKeysUnavailable): the entry
// seq, a receipt or a refusal, can be moved back (MoveBacker).
type keysHeld struct {
	Seq uint64
	Err error
}

func (e *keysHeld) Error() string { return e.Err.Error() }
func (e *keysHeld) Unwrap() error { return e.Err }

// held wraps perr, the ledger's answer to e, as keysHeld when the ledger
// answered e undecided for keys and e is not a revocation (which is never
// moved back: the refusals after it are checked against it).
func held(e Entry, perr error) error {
	if e.Item.Revocation == nil && errors.Is(perr, ErrKeysUnavailable) {
		return &keysHeld{Seq: e.Seq, Err: perr}
	}
	return perr
}

// heldIn is every keysHeld in err's tree, in order: the entries a post
// left undecided for keys; and the other errors joined with them (a
// failed removal of what the ledger recorded), nil when there are none.
func heldIn(err error) (held []*keysHeld, other error) {
	var others []error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *keysHeld:
			held = append(held, e)
		case interface{ Unwrap() []error }:
			for _, e := range e.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if _, ok := errors.AsType[*keysHeld](err); ok {
				walk(e.Unwrap())
				return
			}
			others = append(others, err)
		default:
			others = append(others, err)
		}
	}
	walk(err)
	return held, errors.Join(others...)
}

// mover is what Run keeps across drains for moving entries back: when it
// last logged a move, so that it warns at most once a minute, and how
// many it moved since.
type mover struct {
	lastWarn time.Time
	since    int
}

// warnEvery is how often at most Run logs that it moved entries back.
const warnEvery = time.Minute

// Run posts the outbox to sink in order until ctx is done. An entry leaves
// the outbox only when the ledger has it (or refused it as invalid: it is
// then set aside and logged); while the ledger is down the outbox waits and
// retries with backoff, losing nothing. An entry the ledger answers
// undecided because a signer's keys cannot be fetched is moved to the
// outbox's end, when outbox is a MoveBacker, and posted again later with
// backoff: it does not hold up the entries after it. wake, sent on
// whenever entries are queued, cuts the idle wait short.
func Run(ctx context.Context, outbox Outbox, sink Sink, wake <-chan struct{}, log *slog.Logger) {
	m := &mover{}
	retry.Drain(ctx, retry.Config{}, wake,
		func(ctx context.Context) (int, error) { return m.drain(ctx, outbox, sink, log) },
		func(err error, wait time.Duration) {
			log.WarnContext(ctx, "posting receipts to the ledger failed; will retry", slog.String("error", err.Error()),
				slog.Duration("retry_in", wait), slog.Int("waiting", outbox.Depth()))
		})
}

// drain is a drain of Run's with a mover of its own.
func drain(ctx context.Context, outbox Outbox, sink Sink, log *slog.Logger) (int, error) {
	return (&mover{}).drain(ctx, outbox, sink, log)
}

// drain posts waiting entries in order until the outbox is empty or a post
// fails. The receipts at the outbox's head go together to a BatchSink,
// up to MaxBatch a call; the refusals at its head go RefusalsAtOnce at
// a time; a revocation goes alone, and so does every receipt for the
// rest of the drain once the ledger refused a batch call itself.
//
// A receipt or refusal the ledger answers undecided for keys is moved to
// the outbox's end with its grant's later entries (MoveBacker), and the
// drain goes on with the next: it waits for nobody else's. Once an entry
// it moved back comes to the head again, the drain ends with that answer,
// so that Run posts it again after its backoff, not at once; each drain
// goes round the outbox at most once.
//
// Moving an entry later never changes a row's verdict: the ledger checks a
// receipt or a refusal as of its own time, and the only rows its checks
// read are its own grant's (a receipt's count limit and duplicate check
// read the grant's receipts recorded before it, and its grant_not_revoked
// check, like a refusal's, the grant's revocation). So the entry moves
// with every later receipt and refusal of its grant, their order kept; a
// revocation never moves, so nothing queued after a revocation comes
// before it; and an entry moves past a revocation of its own grant only
// when it is dated before it, where the check passes recorded before or
// after (Item.MayPass). Otherwise (ErrMustWait) it waits at the head, as
// before. Entries of other grants are neither read by its checks nor
// read it. See docs/design/051.
func (m *mover) drain(ctx context.Context, outbox Outbox, sink Sink, log *slog.Logger) (int, error) {
	batches, _ := sink.(BatchSink)
	movable, _ := outbox.(MoveBacker)
	var (
		movedNow = map[uint64]bool{} // new seqs of the entries this drain moved
		lastHeld error               // the answer that moved the last of them
		moves    int                 // MoveBack calls this drain made
	)
	sent := 0
	// settle is err, a post's error: nil when it was the ledger's answer
	// undecided for keys to a receipt or refusal that is now moved back,
	// so that the drain goes on.
	settle := func(err error) error {
		hs, other := heldIn(err)
		if movable == nil || len(hs) == 0 {
			return err
		}
		if other != nil {
			// Another error came with them (a removal of what the ledger
			// recorded that failed): it is returned, and nothing moves.
			return err
		}
		moved := false
		for _, k := range hs {
			if movedNow[k.Seq] || moves >= MaxMovesPerRound {
				return err // round once, and bounded; again after the backoff
			}
			moves++
			seqs, merr := movable.MoveBack(k.Seq)
			if errors.Is(merr, ErrMustWait) {
				return err
			}
			if merr != nil {
				return errors.Join(err, merr)
			}
			if len(seqs) == 0 {
				continue // moved with an earlier one of its grant
			}
			for _, s := range seqs {
				movedNow[s] = true
			}
			moved, lastHeld = true, k.Err
			m.since += len(seqs)
			if now := time.Now(); now.Sub(m.lastWarn) >= warnEvery || now.Before(m.lastWarn) {
				log.WarnContext(ctx, "the ledger could not fetch the keys of an outbox entry's signer; moved it, with its grant's later entries, to the outbox's end, to be posted again later",
					slog.Uint64("seq", k.Seq), slog.String("error", k.Err.Error()), slog.Int("moved_since_last_warning", m.since), slog.Int("waiting", outbox.Depth()))
				m.lastWarn, m.since = now, 0
			}
		}
		if !moved {
			return err // nothing moved: do not post it again at once
		}
		return nil
	}
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
		if movedNow[head[0].Seq] {
			// Round the outbox once: what was moved back waits for the
			// backoff before it is posted again.
			return sent, lastHeld
		}
		if i := slices.IndexFunc(head, func(e Entry) bool { return movedNow[e.Seq] }); i > 0 {
			head = head[:i] // posted up to what was moved back
		}
		run := 0
		for run < len(head) && head[run].Item.Receipt != nil {
			run++
		}
		if batches != nil && run > 1 {
			n, whole, err := postBatch(ctx, outbox, batches, head[:run], log)
			sent += n
			if err != nil && !whole {
				if err := settle(err); err != nil {
					return sent, err
				}
				continue
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
			if err := settle(err); err != nil {
				return sent, err
			}
			continue
		}
		if err := postOne(ctx, outbox, sink, head[0], log); err != nil {
			if err := settle(err); err != nil {
				return sent, err
			}
			continue
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
	return held(e, perr)
}

// postRefusals posts refusals at once, each in a call of its own, and
// takes out of the outbox those the ledger has (removed, in one write)
// or refused as invalid (set aside). Any other answer leaves its refusal
// in its place, to be posted again (one the ledger recorded meanwhile is
// then found, not recorded twice), and the first such error is returned
// with how many left the outbox; when every such answer was undecided for
// keys, those answers joined (keysHeld each).
func postRefusals(ctx context.Context, outbox Outbox, sink Sink, refusals []Entry, log *slog.Logger) (int, error) {
	errs := make([]error, len(refusals))
	var wg sync.WaitGroup
	for i, e := range refusals {
		wg.Go(func() { errs[i] = sink.Post(ctx, e.Item) })
	}
	wg.Wait()
	var done []uint64
	var again error
	var keys []error // the refusals undecided for keys
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
			// Any other error (the ledger may be down) is returned
			// rather than those undecided for keys: moving refusals back
			// would not help.
			perr = held(e, perr)
			var k *keysHeld
			if errors.As(perr, &k) {
				keys = append(keys, perr)
			} else if again == nil {
				again = perr
			}
		}
	}
	if again == nil && len(keys) > 0 {
		again = errors.Join(keys...)
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
			return n, false, errors.Join(flush(), held(e, perr))
		}
		n++
	}
	return n, false, flush()
}
