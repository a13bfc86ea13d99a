package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// memOutbox is an Outbox in memory.
type memOutbox struct {
	entries []Entry
	aside   []uint64
	why     []string // SetAside's reasons, in aside's order
	removes int      // Remove calls
	// unreadable names entries Head cannot read.
	unreadable map[uint64]bool
}

func (o *memOutbox) Head(n int) ([]Entry, error) {
	var out []Entry
	for _, e := range o.entries[:min(n, len(o.entries))] {
		if o.unreadable[e.Seq] {
			if len(out) == 0 {
				return nil, &UnreadableError{Seq: e.Seq, Err: errors.New("invalid character")}
			}
			break
		}
		out = append(out, e)
	}
	return out, nil
}

func (o *memOutbox) Remove(seqs ...uint64) error {
	o.removes++
	o.entries = slices.DeleteFunc(o.entries, func(e Entry) bool { return slices.Contains(seqs, e.Seq) })
	return nil
}

func (o *memOutbox) SetAside(seq uint64, why string) error {
	o.aside = append(o.aside, seq)
	o.why = append(o.why, why)
	o.entries = slices.DeleteFunc(o.entries, func(e Entry) bool { return e.Seq == seq })
	return nil
}

func (o *memOutbox) Depth() int { return len(o.entries) }

func (o *memOutbox) seqs() []uint64 {
	var out []uint64
	for _, e := range o.entries {
		out = append(out, e.Seq)
	}
	return out
}

// batchSink records the calls it gets, as the names of the entries, and
// answers each receipt by answer (nil: recorded).
type batchSink struct {
	mu     sync.Mutex // refusals are posted at once
	calls  [][]string
	answer func(name string) error
	whole  error // answered to every batch call instead, when set
}

func name(it Item) string {
	switch {
	case it.Receipt != nil:
		return it.Receipt.ReceiptJWS
	case it.Refusal != nil:
		return it.Refusal.Reason
	}
	return "?"
}

func (s *batchSink) Post(_ context.Context, it Item) error {
	s.mu.Lock()
	s.calls = append(s.calls, []string{name(it)})
	s.mu.Unlock()
	if s.answer != nil {
		return s.answer(name(it))
	}
	return nil
}

func (s *batchSink) PostReceipts(_ context.Context, items []Item) ([]error, error) {
	var call []string
	errs := make([]error, len(items))
	for i, it := range items {
		call = append(call, name(it))
		if s.answer != nil {
			errs[i] = s.answer(name(it))
		}
	}
	s.calls = append(s.calls, call)
	if s.whole != nil {
		return nil, s.whole
	}
	return errs, nil
}

// outbox queues receipts and refusals by name: "F..." a refusal.
func outbox(names ...string) *memOutbox {
	o := &memOutbox{}
	for i, n := range names {
		it := Item{Receipt: &Receipt{ReceiptJWS: n}}
		if n[0] == 'F' {
			it = Item{Refusal: &Refusal{Reason: n}}
		}
		o.entries = append(o.entries, Entry{Seq: uint64(i + 1), Item: it})
	}
	return o
}

// The receipts at the head go together, up to MaxBatch a call; a refusal
// goes alone, in its place; each batch leaves the outbox in one write.
func TestDrainBatchesReceipts(t *testing.T) {
	var names []string
	for i := range MaxBatch + 3 {
		names = append(names, fmt.Sprintf("R%d", i))
	}
	names = slices.Insert(names, 2, "F1")
	o, s := outbox(names...), &batchSink{}
	n, err := drain(context.Background(), o, s, slog.New(slog.DiscardHandler))
	if err != nil || n != len(names) || o.Depth() != 0 {
		t.Fatalf("drain: %d sent, %v, %d left", n, err, o.Depth())
	}
	want := [][]string{{"R0", "R1"}, {"F1"}, names[3 : 3+MaxBatch], names[3+MaxBatch:]}
	if !slices.EqualFunc(s.calls, want, slices.Equal) {
		t.Fatalf("calls %v, want %v", s.calls, want)
	}
	if o.removes != 4 {
		t.Fatalf("%d writes to remove entries, want one a call", o.removes)
	}
}

// In a batch, what the ledger has leaves the outbox and what it refused is
// set aside, up to the first receipt to post again: that one and every
// one after it stay, in order.
func TestDrainStopsAtTheFirstReceiptToPostAgain(t *testing.T) {
	o := outbox("R1", "R2", "R3", "R4", "R5")
	s := &batchSink{answer: func(n string) error {
		switch n {
		case "R2":
			return fmt.Errorf("%w: unparseable", ErrRejected)
		case "R3":
			return errors.New("keys unavailable")
		}
		return nil
	}}
	n, err := drain(context.Background(), o, s, slog.New(slog.DiscardHandler))
	if err == nil || n != 2 {
		t.Fatalf("drain: %d sent, %v; want 2 and the error", n, err)
	}
	if !slices.Equal(o.seqs(), []uint64{3, 4, 5}) || !slices.Equal(o.aside, []uint64{2}) {
		t.Fatalf("left %v, set aside %v; want [3 4 5] and [2]", o.seqs(), o.aside)
	}
	if want := "rejected by the ledger: unparseable"; o.why[0] != want {
		t.Fatalf("set aside because %q, want the ledger's answer %q", o.why[0], want)
	}
}

// An entry that cannot be read is set aside, saying why, and holds up
// none of the entries queued after it; those before it go first.
func TestDrainSetsAsideAnEntryItCannotRead(t *testing.T) {
	for _, batches := range []bool{true, false} {
		o := outbox("R1", "R2", "F3", "R4")
		o.unreadable = map[uint64]bool{2: true, 4: true}
		var sink Sink = &batchSink{}
		if !batches {
			sink = oneAtATime{sink.(*batchSink)}
		}
		n, err := drain(context.Background(), o, sink, slog.New(slog.DiscardHandler))
		if err != nil || n != 2 || o.Depth() != 0 {
			t.Fatalf("batches %v: drain: %d sent, %v, %d left; want 2 sent and none left", batches, n, err, o.Depth())
		}
		if !slices.Equal(o.aside, []uint64{2, 4}) {
			t.Fatalf("batches %v: set aside %v, want [2 4]", batches, o.aside)
		}
		if want := "outbox entry 2 cannot be read: invalid character"; o.why[0] != want {
			t.Fatalf("batches %v: set aside because %q, want %q", batches, o.why[0], want)
		}
	}
}

// oneAtATime is a Sink that is not a BatchSink.
type oneAtATime struct{ s *batchSink }

func (o oneAtATime) Post(ctx context.Context, it Item) error { return o.s.Post(ctx, it) }

// The reason kept is valid UTF-8 and at most MaxWhy bytes.
func TestSetAsideWhyIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxWhy)
	for _, msg := range []string{"short", "bad \xff byte", long} {
		why := SetAsideWhy(errors.New(msg))
		if len(why) > MaxWhy || !utf8.ValidString(why) {
			t.Fatalf("%.20q: kept %d bytes, valid UTF-8 %v", msg, len(why), utf8.ValidString(why))
		}
	}
	if why := SetAsideWhy(errors.New(long)); !strings.HasSuffix(why, "…") {
		t.Fatalf("a reason cut does not say so: ...%q", why[len(why)-8:])
	}
}

// A ledger that refuses the batch call itself (one without AppendReceipts,
// or a body over its limit) gets the receipts one at a time for the rest
// of the drain.
func TestDrainFallsBackToOneAtATime(t *testing.T) {
	o := outbox("R1", "R2", "R3")
	s := &batchSink{whole: fmt.Errorf("%w: HTTP 404", ErrRejected)}
	n, err := drain(context.Background(), o, s, slog.New(slog.DiscardHandler))
	if err != nil || n != 3 || o.Depth() != 0 {
		t.Fatalf("drain: %d sent, %v, %d left", n, err, o.Depth())
	}
	want := [][]string{{"R1", "R2", "R3"}, {"R1"}, {"R2"}, {"R3"}}
	if !slices.EqualFunc(s.calls, want, slices.Equal) {
		t.Fatalf("calls %v, want %v", s.calls, want)
	}
}

// inFlight is a Sink that holds each post until want posts are in flight
// at once, or a deadline passes; it records the most it saw at once.
type inFlight struct {
	batchSink
	want    int
	mu      sync.Mutex
	now     int
	most    int
	all     chan struct{} // closed once want posts were in flight at once
	closeMu sync.Once
}

func (f *inFlight) Post(ctx context.Context, it Item) error {
	f.mu.Lock()
	f.now++
	f.most = max(f.most, f.now)
	if f.now >= f.want {
		f.closeMu.Do(func() { close(f.all) })
	}
	f.mu.Unlock()
	select {
	case <-f.all:
	case <-time.After(10 * time.Second):
		// Fewer are posted at once: the test fails on most, and no
		// later post waits.
		f.closeMu.Do(func() { close(f.all) })
	}
	f.mu.Lock()
	f.now--
	f.mu.Unlock()
	return f.batchSink.Post(ctx, it)
}

// The refusals at the outbox's head are posted RefusalsAtOnce at a time,
// and what the ledger has of them leaves the outbox in one write; a
// receipt after them waits its turn.
func TestDrainPostsRefusalsAtOnce(t *testing.T) {
	var names []string
	for i := range RefusalsAtOnce + 2 {
		names = append(names, fmt.Sprintf("F%d", i))
	}
	o := outbox(append(names, "R1")...)
	s := &inFlight{want: RefusalsAtOnce, all: make(chan struct{})}
	n, err := drain(context.Background(), o, s, slog.New(slog.DiscardHandler))
	if err != nil || n != len(names)+1 || o.Depth() != 0 {
		t.Fatalf("drain: %d sent, %v, %d left", n, err, o.Depth())
	}
	if s.most != RefusalsAtOnce {
		t.Fatalf("at most %d refusals in flight at once, want %d", s.most, RefusalsAtOnce)
	}
	if last := s.calls[len(s.calls)-1]; !slices.Equal(last, []string{"R1"}) {
		t.Fatalf("the last call %v, want the receipt after the refusals", last)
	}
	if o.removes != 3 {
		t.Fatalf("%d writes to remove entries, want 3 (8 refusals, 2, the receipt)", o.removes)
	}
}

// Of refusals posted at once, what the ledger has leaves the outbox and
// what it refused is set aside; one to post again stays in its place,
// before the entries after the refusals, and the drain returns its error.
func TestDrainKeepsARefusalToPostAgainInItsPlace(t *testing.T) {
	o := outbox("F1", "F2", "F3", "F4", "R5")
	s := &batchSink{answer: func(n string) error {
		switch n {
		case "F2":
			return fmt.Errorf("%w: unparseable", ErrRejected)
		case "F3":
			return errors.New("keys unavailable")
		}
		return nil
	}}
	n, err := drain(context.Background(), o, s, slog.New(slog.DiscardHandler))
	if err == nil || err.Error() != "keys unavailable" || n != 3 {
		t.Fatalf("drain: %d sent, %v; want 3 and the error", n, err)
	}
	if !slices.Equal(o.seqs(), []uint64{3, 5}) || !slices.Equal(o.aside, []uint64{2}) {
		t.Fatalf("left %v, set aside %v; want [3 5] and [2]", o.seqs(), o.aside)
	}
}
