package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
)

// memOutbox is an Outbox in memory.
type memOutbox struct {
	entries []Entry
	aside   []uint64
	removes int // Remove calls
}

func (o *memOutbox) Head(n int) ([]Entry, error) {
	return slices.Clone(o.entries[:min(n, len(o.entries))]), nil
}

func (o *memOutbox) Remove(seqs ...uint64) error {
	o.removes++
	o.entries = slices.DeleteFunc(o.entries, func(e Entry) bool { return slices.Contains(seqs, e.Seq) })
	return nil
}

func (o *memOutbox) SetAside(seq uint64) error {
	o.aside = append(o.aside, seq)
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
	s.calls = append(s.calls, []string{name(it)})
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
