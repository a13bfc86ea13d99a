package server

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// MaxBatchReceipts is the most receipts one AppendReceipts call takes.
const MaxBatchReceipts = 100

// batchWorkers is the most receipts of one AppendReceipts call recorded at
// once: enough to fill the row store's group commits, few enough that one
// call is not a hundred verifications at once.
const batchWorkers = 32

// AppendReceipts records each receipt as AppendReceipt would, and answers
// each on its own: a receipt refused leaves the others recorded. The
// receipts of one grant are recorded one after another in the order they
// came, so that what depends on the rows before (a count limit, which of
// two is the duplicate) reads as it would had they been posted one at a
// time; after one that is to be sent again (not settled), the grant's
// later receipts are not recorded but answered ABORTED. The receipts of
// different grants are recorded at once (up to batchWorkers), so that they
// share the group commits. A pipeline that posts what its outbox holds
// pays the call's own cost (its frames, its interceptors, its round trip)
// once for many rows.
func (s *service) AppendReceipts(ctx context.Context, req *ledgerv1.AppendReceiptsRequest) (*ledgerv1.AppendReceiptsResponse, error) {
	receipts := req.GetReceipts()
	if n := len(receipts); n == 0 || n > MaxBatchReceipts {
		return nil, status.Errorf(codes.InvalidArgument, "receipts: %d given, want 1 to %d", n, MaxBatchReceipts)
	}
	results := make([]*ledgerv1.AppendReceiptResult, len(receipts))
	ins := parsedInputs(receipts)
	sem := make(chan struct{}, batchWorkers)
	var wg sync.WaitGroup
	for _, idx := range byGrant(ins) {
		sem <- struct{}{}
		wg.Add(1)
		// Not deferred, as in wg.Go: a receipt that panics takes the
		// process down before Wait can return the call with its result
		// unset, which a writer would read as recorded.
		s.workers.run(func() {
			s.recordGrant(ctx, receipts, ins, idx, results)
			<-sem
			wg.Done()
		})
	}
	wg.Wait()
	for _, r := range results {
		s.batchReceipts.WithLabelValues(codes.Code(r.GetCode()).String()).Inc()
	}
	return &ledgerv1.AppendReceiptsResponse{Results: results}, nil
}

// parsedInputs is what each receipt asks the ledger to record, its tokens
// parsed once: byGrant and the ledger read that parse.
func parsedInputs(receipts []*ledgerv1.AppendReceiptRequest) []ledger.ReceiptInput {
	ins := make([]ledger.ReceiptInput, len(receipts))
	for i, r := range receipts {
		ins[i] = receiptInput(r)
		ins[i].Parsed = ins[i].Parse()
	}
	return ins
}

// recordGrant records the receipts ins[i] of one grant (receipts[i] as
// parsed), for i in idx in order, each answer in results[i] in the view
// receipts[i] asks for. After a receipt that is to be sent again, the
// grant's later receipts are not recorded but answered ABORTED.
func (s *service) recordGrant(ctx context.Context, receipts []*ledgerv1.AppendReceiptRequest, ins []ledger.ReceiptInput, idx []int, results []*ledgerv1.AppendReceiptResult) {
	var held *ledgerv1.AppendReceiptResult // the grant's receipt that is to be sent again
	for _, i := range idx {
		if held != nil {
			results[i] = &ledgerv1.AppendReceiptResult{Code: int32(codes.Aborted),
				Message: "not recorded: an earlier receipt of its grant in this call was not (" + codes.Code(held.GetCode()).String() + "); send both again, in order"}
			continue
		}
		resp, err := s.appendReceipt(ctx, ins[i], receipts[i].GetView())
		results[i] = receiptResult(resp, err)
		if !settled(codes.Code(results[i].GetCode())) {
			held = results[i]
		}
	}
}

// settled reports whether a receipt answered with code is done with: it
// was recorded (or found), or it never will be as it stands (unparseable;
// its row recorded and swept). Any other answer (keys or disk unavailable
// for now, a deadline, an internal error) means sending it again later, and
// its grant's later receipts wait for it.
func settled(code codes.Code) bool {
	return code == codes.OK || code == codes.InvalidArgument || code == codes.NotFound
}

// byGrant is the receipts' indexes by the grant each names, each grant's in
// order, the grants in the order of their first receipt. The grant is read
// from the receipt's claims as parsed, before it is verified: it only
// decides which receipts AppendReceipts records in order, so a receipt that
// lies about its grant changes no more than the order of its own
// recording. Receipts whose claims cannot be read are recorded in order
// among themselves.
func byGrant(ins []ledger.ReceiptInput) [][]int {
	var grants [][]int
	at := map[string]int{}
	for i, in := range ins {
		g := grantOf(in)
		k, ok := at[g]
		if !ok {
			k = len(grants)
			at[g] = k
			grants = append(grants, nil)
		}
		grants[k] = append(grants[k], i)
	}
	return grants
}

// grantOf is the grant in's receipt names as parsed, before it is
// verified ("" when its claims cannot be read). It only decides which
// receipts are recorded in order (AppendReceipts, AppendReceiptStream).
func grantOf(in ledger.ReceiptInput) string {
	if rc, err := in.Parsed.Receipt(); err == nil {
		return rc.GrantID
	}
	return ""
}

// newReceiptCodes counts the receipts AppendReceipts or AppendReceiptStream
// answered, by the code of each one's result: such a call is answered OK
// when some of its receipts were not, so grpc_server_handled_total does
// not show them. The codes a receipt is answered with show from 0.
func newReceiptCodes(reg prometheus.Registerer, name, help string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"code"})
	for _, code := range []codes.Code{codes.OK, codes.InvalidArgument, codes.NotFound, codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Canceled, codes.DeadlineExceeded, codes.Internal} {
		c.WithLabelValues(code.String())
	}
	reg.MustRegister(c)
	return c
}

// receiptResult is AppendReceipt's answer as one result of AppendReceipts:
// the response, or the status's code and message with the RetryInfo's
// delay and the ErrorInfo's reason it carried.
func receiptResult(resp *ledgerv1.AppendReceiptResponse, err error) *ledgerv1.AppendReceiptResult {
	if err == nil {
		return &ledgerv1.AppendReceiptResult{Response: resp}
	}
	st := status.Convert(err)
	res := &ledgerv1.AppendReceiptResult{Code: int32(st.Code()), Message: answerText(st.Message())}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			res.RetryDelay = d.GetRetryDelay()
		case *errdetails.ErrorInfo:
			res.Reason = d.GetReason()
		}
	}
	return res
}
