package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// StreamInFlight is the most receipts of one AppendReceiptStream read and
// not yet answered. At that many the stream is not read until one is
// answered, and HTTP/2 flow control holds the writer back: a stream holds
// at most this many receipts (each within limits.maxBodyBytes) in memory.
// The bytes all streams hold together are bounded too (streamBudget).
const StreamInFlight = 64

// streamUnreadTimeout is how long an answer may wait to be sent on a
// stream whose writer reads none: then the stream is ended
// RESOURCE_EXHAUSTED and what it held is freed for the other streams.
var streamUnreadTimeout = time.Minute

// streamBudget bounds the bytes that every AppendReceiptStream together
// holds (limits.streamBytes): a receipt read takes twice its size (itself
// and room for its answer) before it is recorded; once answered it holds
// its size and its answer's, until the answer is sent or the stream ends.
// When the budget is spent, streams wait to read their next receipt, in
// the order they came, and HTTP/2 flow control holds their writers back;
// a receipt already read is always recorded and answered. One stream
// holds at most perStream bytes, so that a few streams whose writers read
// no answers cannot take the whole budget (and those are ended after
// streamUnreadTimeout).
//
// An answer larger than the room taken for it is taken all the same (it
// exists already): the bytes held may pass the budget by what answers
// exceed their receipts.
type streamBudget struct {
	max, perStream int64
	// maxOpen bounds the streams open at once, maxOpenByKey those of
	// one API key (limits.streams).
	maxOpen, maxOpenByKey int

	openMu sync.Mutex
	open   int
	byKey  map[string]int

	mu    sync.Mutex
	held  int64
	queue []*budgetWait // first come, first served
	// unread counts the streams ended because their answers were not
	// read (pactledger_streams_unread_ended_total).
	unread int64
}

// budgetWait is a stream waiting for n bytes; ready is closed once they
// are taken for it.
type budgetWait struct {
	n     int64
	ready chan struct{}
}

func newStreamBudget(bytes int64, streams int) *streamBudget {
	return &streamBudget{max: bytes, perStream: bytes / 16, maxOpen: streams, maxOpenByKey: max(1, streams/4), byKey: map[string]int{}}
}

// enter counts a stream of key open, or refuses it RESOURCE_EXHAUSTED
// when limits.streams are open, or a quarter of them under key: each
// stream waiting for room holds a receipt and its window outside the
// budget, so their number is bounded, and one key cannot take them all.
// The stream calls leave when it ends.
func (b *streamBudget) enter(key string) error {
	b.openMu.Lock()
	defer b.openMu.Unlock()
	switch {
	case b.open >= b.maxOpen:
		return status.Errorf(codes.ResourceExhausted, "%d receipt streams are open, the most limits.streams allows: send on a stream already open, or with AppendReceipts, or again later", b.open)
	case b.byKey[key] >= b.maxOpenByKey:
		return status.Errorf(codes.ResourceExhausted, "%d receipt streams of this API key are open, the most one key may hold (a quarter of limits.streams): send on one of them, or close one", b.byKey[key])
	}
	b.open++
	b.byKey[key]++
	return nil
}

// leave counts a stream of key closed.
func (b *streamBudget) leave(key string) {
	b.openMu.Lock()
	defer b.openMu.Unlock()
	b.open--
	if b.byKey[key]--; b.byKey[key] == 0 {
		delete(b.byKey, key)
	}
}

// fits reports whether n bytes can be taken now: within the budget, or
// anything when nothing is held (a receipt larger than the budget is
// still read, alone).
func (b *streamBudget) fits(n int64) bool { return b.held == 0 || b.held+n <= b.max }

// take waits until n bytes fit, behind those who waited first, and takes
// them; it returns ctx's error, taking nothing, if ctx ends first.
func (b *streamBudget) take(ctx context.Context, n int64) error {
	b.mu.Lock()
	if len(b.queue) == 0 && b.fits(n) {
		b.held += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWait{n: n, ready: make(chan struct{})}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // taken meanwhile: give it back
		b.held -= n
	default:
		for i, q := range b.queue {
			if q == w {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
	}
	b.wake()
	return ctx.Err()
}

// add takes n bytes without waiting (n < 0 gives some back).
func (b *streamBudget) add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held += n
	if n < 0 {
		b.wake()
	}
}

// wake takes their bytes for the streams waiting first, while they fit.
// b.mu is held.
func (b *streamBudget) wake() {
	for len(b.queue) > 0 && b.fits(b.queue[0].n) {
		w := b.queue[0]
		b.queue = b.queue[1:]
		b.held += w.n
		close(w.ready)
	}
}

// stats reports the bytes held and the streams waiting for room.
func (b *streamBudget) stats() (held int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, len(b.queue)
}

// unreadEnded reports the streams ended because their answers were not
// read.
func (b *streamBudget) unreadEnded() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unread
}

// AppendReceiptStream records the receipts a writer sends on one stream,
// each as AppendReceipt would, and answers each as soon as it is recorded,
// with the seq it was sent with. The receipts of one grant are recorded in
// the order they came, as AppendReceipts records those of one call: a
// receipt waits behind the one of its grant being recorded; once one is
// answered with a code to send it again, those waiting behind it are
// answered ABORTED. Receipts of different grants are recorded at once and
// share the row store's commits.
//
// What a stream saves is what a call costs besides its receipt: its
// HEADERS frames and trailers, the key check, the interceptors, a stream
// set up and torn down. A pipeline keeps one stream open and sends each
// receipt when it has it, where AppendReceipts waits for a batch.
//
// The stream ends when the writer closes its side and every receipt read
// is answered (OK), or when ledgerd shuts down: it stops reading, answers
// what it read, and ends with UNAVAILABLE. A receipt the writer sent and
// saw no answer for may or may not be recorded: sending it again is safe
// (it answers ALREADY_RECORDED once recorded).
//
// What the streams hold in memory together is bounded (streamBudget): at
// the bound, a stream is not read until answers are sent. A stream one of
// whose answers has waited streamUnreadTimeout to be sent, its writer
// reading none, is ended RESOURCE_EXHAUSTED: its receipts not answered
// may or may not be recorded, as when a stream breaks.
func (s *service) AppendReceiptStream(stream ledgerv1.LedgerService_AppendReceiptStreamServer) error {
	if s.streams != nil {
		key := caller(stream.Context())
		if err := s.streams.enter(key); err != nil {
			return err
		}
		defer s.streams.leave(key)
	}
	r := &receiptStream{
		s:       s,
		ctx:     stream.Context(),
		budget:  s.streams,
		room:    make(chan struct{}, StreamInFlight),
		freed:   make(chan struct{}, 1),
		answers: make(chan streamAnswer, StreamInFlight),
		ended:   make(chan error, 1),
		grants:  map[string][]streamedReceipt{},
	}
	defer r.finish()
	go r.receive(stream)
	return r.answer(stream, s.draining)
}

// receiptStream is one AppendReceiptStream's state. Every receipt read
// takes a place in room until its answer is sent; pending counts them.
type receiptStream struct {
	s       *service
	ctx     context.Context
	budget  *streamBudget
	room    chan struct{}
	freed   chan struct{}     // a token when bytes the stream held are freed
	answers chan streamAnswer // room's size: a send never waits
	ended   chan error        // why receive ended

	mu      sync.Mutex
	closed  bool  // no receipt read from now on is recorded
	over    bool  // the call returned: what it held is given back
	held    int64 // bytes taken from budget for this stream
	pending int   // receipts read and not yet answered
	// grants holds, for each grant with a receipt being recorded, the
	// receipts read since that wait behind it, in order.
	grants map[string][]streamedReceipt
}

// streamedReceipt is a receipt read from the stream with its seq and the
// bytes it took from the budget.
type streamedReceipt struct {
	seq   uint64
	in    ledger.ReceiptInput
	view  ledgerv1.RowView
	bytes int64
}

// streamAnswer is an answer to send and the bytes its receipt holds
// until it is sent.
type streamAnswer struct {
	resp  *ledgerv1.AppendReceiptStreamResponse
	bytes int64
	at    time.Time // when it was answered: how long it has waited to be sent
}

// receive reads receipts and hands each to record until the writer closes
// its side, the stream breaks, or the stream is closed.
func (r *receiptStream) receive(stream ledgerv1.LedgerService_AppendReceiptStreamServer) {
	for {
		req, err := stream.Recv()
		if err != nil {
			r.ended <- err
			return
		}
		select {
		case r.room <- struct{}{}:
		case <-r.ctx.Done():
			r.ended <- r.ctx.Err()
			return
		}
		n := 2 * int64(proto.Size(req))
		if err := r.take(n); err != nil {
			r.ended <- err
			return
		}
		if !r.start(req, n) {
			<-r.room
			return
		}
	}
}

// take takes n bytes for a receipt read: once the stream holds little
// enough, then from the budget. It returns the stream context's error if
// the stream ends first.
func (r *receiptStream) take(n int64) error {
	if r.budget == nil {
		return nil
	}
	for {
		r.mu.Lock()
		fits := r.held == 0 || r.held+n <= r.budget.perStream
		r.mu.Unlock()
		if fits {
			break
		}
		select {
		case <-r.freed:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
	if err := r.budget.take(r.ctx, n); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over {
		r.budget.add(-n)
		return context.Canceled
	}
	r.held += n
	return nil
}

// grow adds n bytes (n < 0: gives them back) to what the stream holds,
// without waiting.
func (r *receiptStream) grow(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.growLocked(n)
}

// growLocked is grow with r.mu held.
func (r *receiptStream) growLocked(n int64) {
	if r.budget == nil || n == 0 || r.over {
		return
	}
	r.held += n
	r.budget.add(n)
	if n < 0 {
		select {
		case r.freed <- struct{}{}:
		default:
		}
	}
}

// finish gives back what the stream holds once the call returns: answers
// made after are not sent, and hold nothing.
func (r *receiptStream) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.over = true
	if r.budget != nil && r.held != 0 {
		r.budget.add(-r.held)
	}
	r.held = 0
}

// start records req, which took n bytes, or queues it behind the receipt
// of its grant being recorded. It reports false once the stream is
// closed: req is neither recorded nor answered, and its bytes are given
// back.
func (r *receiptStream) start(req *ledgerv1.AppendReceiptStreamRequest, n int64) bool {
	in := receiptInput(req.GetReceipt())
	in.Parsed = in.Parse()
	g := grantOf(in)
	rc := streamedReceipt{seq: req.GetSeq(), in: in, view: req.GetReceipt().GetView(), bytes: n}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.grow(-n)
		return false
	}
	defer r.mu.Unlock()
	r.pending++
	if waiting, busy := r.grants[g]; busy {
		r.grants[g] = append(waiting, rc)
		return true
	}
	r.grants[g] = nil
	r.s.workers.run(func() { r.record(g, rc) })
	return true
}

// record records rc, then each receipt of grant g that waits behind it,
// until none waits.
func (r *receiptStream) record(g string, rc streamedReceipt) {
	for {
		resp, err := r.s.appendReceipt(r.ctx, rc.in, rc.view)
		res := receiptResult(resp, err)
		r.answers <- r.answered(rc, &ledgerv1.AppendReceiptStreamResponse{Seq: rc.seq, Result: res})
		r.mu.Lock()
		waiting := r.grants[g]
		if !settled(codes.Code(res.GetCode())) {
			for _, w := range waiting {
				r.answers <- r.answeredLocked(w, &ledgerv1.AppendReceiptStreamResponse{Seq: w.seq, Result: &ledgerv1.AppendReceiptResult{Code: int32(codes.Aborted),
					Message: "not recorded: an earlier receipt of its grant on this stream was not (" + codes.Code(res.GetCode()).String() + "); send both again, in order"}})
			}
			waiting = nil
		}
		if len(waiting) == 0 {
			delete(r.grants, g)
			r.mu.Unlock()
			return
		}
		rc, r.grants[g] = waiting[0], waiting[1:]
		r.mu.Unlock()
	}
}

// answered is a, rc's answer, with the bytes rc holds until a is sent:
// rc's half of the room rc took, and a's size.
func (r *receiptStream) answered(rc streamedReceipt, a *ledgerv1.AppendReceiptStreamResponse) streamAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answeredLocked(rc, a)
}

// answeredLocked is answered with r.mu held.
func (r *receiptStream) answeredLocked(rc streamedReceipt, a *ledgerv1.AppendReceiptStreamResponse) streamAnswer {
	n := rc.bytes/2 + int64(proto.Size(a))
	r.growLocked(n - rc.bytes)
	return streamAnswer{resp: a, bytes: n, at: time.Now()}
}

// answer sends the answers as they come until the stream is done: the
// writer closed its side and every receipt read is answered (nil), the
// stream broke (its error), draining was closed and every receipt read
// is answered (UNAVAILABLE), or an answer waited streamUnreadTimeout
// since it was answered, not yet sent (RESOURCE_EXHAUSTED). The answers are sent one at a time on a
// goroutine of their own, so that one the writer does not read cannot
// hold the call: once it returns, that Send fails and the goroutine ends.
func (r *receiptStream) answer(stream ledgerv1.LedgerService_AppendReceiptStreamServer, draining <-chan struct{}) error {
	toSend := make(chan streamAnswer)
	sent := make(chan sentAnswer, 1)
	defer close(toSend)
	go func() {
		for a := range toSend {
			resp, err := r.send(stream, a.resp)
			sent <- sentAnswer{resp: resp, bytes: a.bytes, err: err}
		}
	}()
	unread := time.NewTimer(streamUnreadTimeout)
	unread.Stop()
	defer unread.Stop()
	var sending bool
	var end error // set once no receipt is read any more
	for {
		if end != nil && !sending && r.idle() {
			if errors.Is(end, io.EOF) {
				return nil
			}
			return end
		}
		answers, timeout := r.answers, (<-chan time.Time)(nil)
		if sending {
			answers, timeout = nil, unread.C
		}
		select {
		case a := <-answers:
			toSend <- a
			sending = true
			// The oldest answer not yet sent is this one: the stream ends
			// once it has waited streamUnreadTimeout since it was
			// answered, however it waited (queued behind answers a writer
			// reads slowly, or in its own Send), so a writer that reads an
			// answer now and then cannot hold what its stream holds.
			unread.Reset(max(time.Until(a.at.Add(streamUnreadTimeout)), 0))
		case s := <-sent:
			sending = false
			unread.Stop()
			if s.err != nil {
				return s.err
			}
			r.s.streamReceipts.WithLabelValues(codes.Code(s.resp.GetResult().GetCode()).String()).Inc()
			r.mu.Lock()
			r.pending--
			r.mu.Unlock()
			r.grow(-s.bytes)
			<-r.room
		case <-timeout:
			r.mu.Lock()
			pending := r.pending
			r.mu.Unlock()
			if r.budget != nil {
				r.budget.mu.Lock()
				r.budget.unread++
				r.budget.mu.Unlock()
			}
			r.s.log.WarnContext(r.ctx, "ended a receipt stream whose writer read no answer", slog.Duration("for", streamUnreadTimeout), slog.Int("answers_not_sent", pending))
			return status.Error(codes.ResourceExhausted, fmt.Sprintf("answers not read for %v: the stream is ended; %d receipts read were not answered and may or may not be recorded: send them again (one recorded answers ALREADY_RECORDED)", streamUnreadTimeout, pending))
		case err := <-r.ended:
			if !errors.Is(err, io.EOF) {
				return err // the stream broke or was cancelled: no answer can be sent
			}
			end = err
		case <-draining:
			draining = nil
			r.mu.Lock()
			r.closed = true
			r.mu.Unlock()
			if end == nil { // a writer that closed its side gets its answers and OK
				end = status.Error(codes.Unavailable, "ledgerd is shutting down: every receipt read was answered; send those not answered again")
			}
		}
	}
}

// sentAnswer is what sending an answer came to: the answer sent, the
// bytes its receipt held, Send's error.
type sentAnswer struct {
	resp  *ledgerv1.AppendReceiptStreamResponse
	bytes int64
	err   error
}

// send sends a and returns the answer sent. An answer that cannot be
// encoded fails its Send without breaking the stream: that receipt is
// answered INTERNAL instead, and the others the stream read still get
// theirs.
func (r *receiptStream) send(stream ledgerv1.LedgerService_AppendReceiptStreamServer, a *ledgerv1.AppendReceiptStreamResponse) (*ledgerv1.AppendReceiptStreamResponse, error) {
	err := stream.Send(a)
	if err == nil {
		return a, nil
	}
	_, merr := proto.Marshal(a)
	if merr == nil {
		return nil, err // the stream broke
	}
	r.s.log.ErrorContext(r.ctx, "a stream answer cannot be encoded", slog.Uint64("seq", a.GetSeq()), slog.String("error", merr.Error()))
	a = &ledgerv1.AppendReceiptStreamResponse{Seq: a.GetSeq(), Result: &ledgerv1.AppendReceiptResult{Code: int32(codes.Internal),
		Message: "the answer to this receipt cannot be encoded (see the server log); it may be recorded"}}
	return a, stream.Send(a)
}

// idle reports whether every receipt read was answered.
func (r *receiptStream) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending == 0
}
