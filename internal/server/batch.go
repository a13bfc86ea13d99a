package server

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// MaxBatchReceipts is the most receipts one AppendReceipts call takes.
const MaxBatchReceipts = 100

// AppendReceipts records each receipt as AppendReceipt would, all of them
// at once, so that they share the row store's group commits, and answers
// each on its own: a receipt refused leaves the others recorded. A pipeline
// that posts what its outbox holds pays the call's own cost (its frames,
// its interceptors, its round trip) once for many rows.
func (s *service) AppendReceipts(ctx context.Context, req *ledgerv1.AppendReceiptsRequest) (*ledgerv1.AppendReceiptsResponse, error) {
	receipts := req.GetReceipts()
	if n := len(receipts); n == 0 || n > MaxBatchReceipts {
		return nil, status.Errorf(codes.InvalidArgument, "receipts: %d given, want 1 to %d", n, MaxBatchReceipts)
	}
	results := make([]*ledgerv1.AppendReceiptResult, len(receipts))
	var wg sync.WaitGroup
	for i, r := range receipts {
		wg.Go(func() {
			resp, err := s.AppendReceipt(ctx, r)
			results[i] = receiptResult(resp, err)
		})
	}
	wg.Wait()
	for _, r := range results {
		s.batchReceipts.WithLabelValues(codes.Code(r.GetCode()).String()).Inc()
	}
	return &ledgerv1.AppendReceiptsResponse{Results: results}, nil
}

// newBatchReceipts counts the receipts AppendReceipts answered, by the
// code of each one's result: an AppendReceipts call is answered OK when
// some of its receipts were not, so grpc_server_handled_total does not
// show them. The codes a receipt is answered with show from 0.
func newBatchReceipts(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pactledger_batch_receipts_total",
		Help: "Receipts answered in AppendReceipts calls, by the gRPC code of each one's result.",
	}, []string{"code"})
	for _, code := range []codes.Code{codes.OK, codes.InvalidArgument, codes.Unavailable, codes.ResourceExhausted, codes.Canceled, codes.DeadlineExceeded, codes.Internal} {
		c.WithLabelValues(code.String())
	}
	reg.MustRegister(c)
	return c
}

// receiptResult is AppendReceipt's answer as one result of AppendReceipts:
// the response, or the status's code and message with the RetryInfo's
// delay it carried.
func receiptResult(resp *ledgerv1.AppendReceiptResponse, err error) *ledgerv1.AppendReceiptResult {
	if err == nil {
		return &ledgerv1.AppendReceiptResult{Response: resp}
	}
	st := status.Convert(err)
	res := &ledgerv1.AppendReceiptResult{Code: int32(st.Code()), Message: st.Message()}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			res.RetryDelay = ri.GetRetryDelay()
		}
	}
	return res
}
