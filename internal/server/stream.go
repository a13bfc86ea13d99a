package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

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
const StreamInFlight = 64

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
func (s *service) AppendReceiptStream(stream ledgerv1.LedgerService_AppendReceiptStreamServer) error {
	r := &receiptStream{
		s:       s,
		ctx:     stream.Context(),
		room:    make(chan struct{}, StreamInFlight),
		answers: make(chan *ledgerv1.AppendReceiptStreamResponse, StreamInFlight),
		ended:   make(chan error, 1),
		grants:  map[string][]streamedReceipt{},
	}
	go r.receive(stream)
	return r.answer(stream, s.draining)
}

// receiptStream is one AppendReceiptStream's state. Every receipt read
// takes a place in room until its answer is sent; pending counts them.
type receiptStream struct {
	s       *service
	ctx     context.Context
	room    chan struct{}
	answers chan *ledgerv1.AppendReceiptStreamResponse // room's size: a send never waits
	ended   chan error                                 // why receive ended

	mu      sync.Mutex
	closed  bool // no receipt read from now on is recorded
	pending int  // receipts read and not yet answered
	// grants holds, for each grant with a receipt being recorded, the
	// receipts read since that wait behind it, in order.
	grants map[string][]streamedReceipt
}

// streamedReceipt is a receipt read from the stream with its seq.
type streamedReceipt struct {
	seq  uint64
	in   ledger.ReceiptInput
	view ledgerv1.RowView
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
		if !r.start(req) {
			<-r.room
			return
		}
	}
}

// start records req, or queues it behind the receipt of its grant being
// recorded. It reports false once the stream is closed: req is neither
// recorded nor answered.
func (r *receiptStream) start(req *ledgerv1.AppendReceiptStreamRequest) bool {
	in := receiptInput(req.GetReceipt())
	in.Parsed = in.Parse()
	g := grantOf(in)
	rc := streamedReceipt{seq: req.GetSeq(), in: in, view: req.GetReceipt().GetView()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
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
		r.answers <- &ledgerv1.AppendReceiptStreamResponse{Seq: rc.seq, Result: res}
		r.mu.Lock()
		waiting := r.grants[g]
		if !settled(codes.Code(res.GetCode())) {
			for _, w := range waiting {
				r.answers <- &ledgerv1.AppendReceiptStreamResponse{Seq: w.seq, Result: &ledgerv1.AppendReceiptResult{Code: int32(codes.Aborted),
					Message: "not recorded: an earlier receipt of its grant on this stream was not (" + codes.Code(res.GetCode()).String() + "); send both again, in order"}}
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

// answer sends the answers as they come until the stream is done: the
// writer closed its side and every receipt read is answered (nil), the
// stream broke (its error), or draining was closed and every receipt read
// is answered (UNAVAILABLE).
func (r *receiptStream) answer(stream ledgerv1.LedgerService_AppendReceiptStreamServer, draining <-chan struct{}) error {
	var end error // set once no receipt is read any more
	for {
		if end != nil && r.idle() {
			if errors.Is(end, io.EOF) {
				return nil
			}
			return end
		}
		select {
		case a := <-r.answers:
			a, err := r.send(stream, a)
			if err != nil {
				return err
			}
			r.s.streamReceipts.WithLabelValues(codes.Code(a.GetResult().GetCode()).String()).Inc()
			r.mu.Lock()
			r.pending--
			r.mu.Unlock()
			<-r.room
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
