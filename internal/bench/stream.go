package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/server"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// driveStream posts corpus entries on AppendReceiptStream, one stream on
// each of ledgerd's connections, closed loop, conc receipts in flight in
// all (shared among the streams) for dur: a receipt is sent as soon as an
// answer frees its place. Each receipt's latency is from its send to its
// answer. Once dur is over the streams are closed and their answers
// awaited.
func (d *daemon) driveStream(ctx context.Context, corpus []*ledgerv1.AppendReceiptRequest, conc int, dur time.Duration) (*result, error) {
	streams := min(len(d.conns), conc)
	if streams == 0 || conc%streams != 0 || conc/streams > server.StreamInFlight {
		return nil, fmt.Errorf("%d in flight on %d streams: want a multiple of the streams, at most %d a stream", conc, streams, server.StreamInFlight)
	}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+writerKey))
	defer cancel()
	var (
		next   atomic.Int64
		t      tally
		wg     sync.WaitGroup
		sentAt = make([]atomic.Int64, len(corpus)) // UnixNano
		start  = time.Now()
		stopAt = start.Add(dur)
		errc   = make(chan error, 2*streams)
	)
	for _, conn := range d.conns[:streams] {
		s, err := ledgerv1.NewLedgerServiceClient(conn).AppendReceiptStream(ctx)
		if err != nil {
			return nil, err
		}
		room := make(chan struct{}, conc/streams)
		wg.Go(func() { // sender
			defer s.CloseSend()
			for time.Now().Before(stopAt) {
				select {
				case room <- struct{}{}:
				case <-ctx.Done():
					return
				}
				i := next.Add(1) - 1
				if i >= int64(len(corpus)) {
					return
				}
				sentAt[i].Store(time.Now().UnixNano())
				if err := s.Send(&ledgerv1.AppendReceiptStreamRequest{Seq: uint64(i), Receipt: corpus[i]}); err != nil {
					errc <- fmt.Errorf("send: %w", err)
					return
				}
			}
		})
		wg.Go(func() { // receiver
			for {
				a, err := s.Recv()
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					errc <- fmt.Errorf("stream: %w", err)
					cancel()
					return
				}
				t.record(time.Duration(time.Now().UnixNano()-sentAt[a.GetSeq()].Load()), resultErr(a.GetResult()))
				<-room
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return t.result(start), nil
}
