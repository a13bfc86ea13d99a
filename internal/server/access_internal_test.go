package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// While the row store takes no writes the access log queues records in
// memory, then reads wait for room; a read whose record could not be
// queued before its caller's deadline is not answered: Unavailable, not
// the row.
func TestReadNotAnsweredWhenItsAccessRecordCannotBeQueued(t *testing.T) {
	full := ledger.NewAccessLog(nil, ledger.AccessLogConfig{MaxQueued: 1, FlushInterval: time.Hour}) // never written: a store taking no writes
	a := accessRecorder{access: full, log: slog.New(slog.DiscardHandler)}
	info := &grpc.UnaryServerInfo{FullMethod: ledgerv1.LedgerService_GetRow_FullMethodName}
	row := &ledgerv1.GetRowResponse{Row: &ledgerv1.Row{Id: "ab", Principal: "acct-48213"}}
	h := func(context.Context, any) (any, error) { return row, nil }
	ctx := context.WithValue(context.Background(), principalKey{}, principal{name: "support-key", roles: []string{"support"}})
	if resp, err := a.unary(ctx, &ledgerv1.GetRowRequest{Id: "ab"}, info, h); err != nil || resp != row { // fills the queue
		t.Fatalf("a read with room in the queue: %v, %v", resp, err)
	}
	ctx2, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	resp, err := a.unary(ctx2, &ledgerv1.GetRowRequest{Id: "ab"}, info, h)
	if n := full.Queued(); n != 1 {
		t.Fatalf("%d records queued, want 1", n)
	}
	if status.Code(err) != codes.Unavailable || resp != nil {
		t.Errorf("a read not recorded (queue full) answered %v, %v; want no reply and Unavailable", resp, err)
	}
}
