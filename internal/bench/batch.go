package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// checkBatches refuses batch sizes AppendReceipts would refuse, a
// concurrency the batches do not divide (the receipts in flight would not
// be Concurrency), and a profiled phase asked to post in batches and
// through REST or at an offered rate.
func (c Config) checkBatches() error {
	for _, b := range []struct {
		flag string
		n    int
	}{{"-batch", c.Batch}, {"-profile-batch", c.ProfileBatch}} {
		switch {
		case b.n < 0 || b.n > server.MaxBatchReceipts:
			return fmt.Errorf("%s %d: 0 (none) to %d", b.flag, b.n, server.MaxBatchReceipts)
		case b.n > 0 && c.Concurrency%b.n != 0:
			return fmt.Errorf("%s %d does not divide -concurrency %d", b.flag, b.n, c.Concurrency)
		}
	}
	if c.ProfileBatch > 0 && (c.ProfileREST || c.ProfileOffered > 0) {
		return errors.New("-profile-batch posts over gRPC with -concurrency in flight: not with -profile-rest or -profile-offered")
	}
	if c.ProfileStream && (c.ProfileREST || c.ProfileOffered > 0 || c.ProfileBatch > 0) {
		return errors.New("-profile-stream posts over gRPC with -concurrency in flight: not with -profile-rest, -profile-offered or -profile-batch")
	}
	return nil
}

// batchCall posts reqs in one call and returns each one's error.
type batchCall func(ctx context.Context, reqs []*ledgerv1.AppendReceiptRequest) []error

// driveBatches sends corpus entries through call in batches of batch, closed
// loop, with conc entries in flight (conc/batch calls, at least one) for
// dur. Each entry's latency is its call's. drive's closed loop is its
// batches of one.
func driveBatches(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc, batch int, dur time.Duration, call batchCall) (*result, error) {
	var (
		next   atomic.Int64
		t      tally
		wg     sync.WaitGroup
		start  = time.Now()
		stopAt = start.Add(dur)
	)
	for range max(conc/batch, 1) {
		wg.Go(func() {
			for time.Now().Before(stopAt) {
				i := int(next.Add(int64(batch)) - int64(batch))
				if i >= len(corpus) {
					return
				}
				reqs := corpus[i:min(i+batch, len(corpus))]
				t0 := time.Now()
				errs := call(ctx, reqs)
				d := time.Since(t0)
				for _, err := range errs {
					t.record(d, err)
				}
			}
		})
	}
	wg.Wait()
	return t.result(start), nil
}

// grpcAppendBatch posts a batch with one AppendReceipts call, taking
// ledgerd's connections in turn.
func (d *daemon) grpcAppendBatch() batchCall {
	var rr atomic.Int64
	clients := make([]ledgerv1.LedgerServiceClient, len(d.conns))
	for i, c := range d.conns {
		clients[i] = ledgerv1.NewLedgerServiceClient(c)
	}
	return func(ctx context.Context, reqs []*ledgerv1.AppendReceiptRequest) []error {
		errs := make([]error, len(reqs))
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+writerKey)
		rep, err := clients[rr.Add(1)%int64(len(clients))].AppendReceipts(ctx, &ledgerv1.AppendReceiptsRequest{Receipts: reqs})
		for i := range errs {
			switch {
			case err != nil:
				errs[i] = err
			case i >= len(rep.GetResults()):
				errs[i] = fmt.Errorf("%d results for %d receipts", len(rep.GetResults()), len(reqs))
			default:
				errs[i] = resultErr(rep.GetResults()[i])
			}
		}
		return errs
	}
}

// resultErr is a receipt's result (of AppendReceipts or a stream) as the
// error AppendReceipt would have returned; nil when it was recorded.
func resultErr(r *ledgerv1.AppendReceiptResult) error {
	if r.GetCode() == 0 {
		return nil
	}
	return status.Error(codes.Code(r.GetCode()), r.GetMessage())
}
