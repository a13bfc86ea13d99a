package server

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
)

// TestSweepRefusedForTheSweepersLease: a sweep refused because another
// ledgerd holds the sweeper's lease answers UNAVAILABLE, which a client
// may retry (through a load balancer it may reach the holder), with the
// holder and the lease's end in the message and an ErrorInfo; one stopped
// by a lost lease answers UNAVAILABLE too.
func TestSweepRefusedForTheSweepersLease(t *testing.T) {
	s := &service{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	until := time.Date(2026, 12, 7, 12, 0, 30, 0, time.UTC)
	held := &ledger.LeaseHeldError{Lease: ledger.LeaseSweeper, Holder: "replica-a-1-abcd", Expires: until}
	st := status.Convert(s.toStatus(t.Context(), "Sweep", fmt.Errorf("take lease %s: %w", ledger.LeaseSweeper, held)))
	if st.Code() != codes.Unavailable {
		t.Errorf("code %s, want Unavailable", st.Code())
	}
	for _, want := range []string{"replica-a-1-abcd", "2026-12-07T12:00:30Z", ledger.LeaseSweeper} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("message %q does not name %q", st.Message(), want)
		}
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil || info.GetReason() != reasonSweeperElsewhere || info.GetMetadata()["holder"] != "replica-a-1-abcd" || info.GetMetadata()["leaseExpires"] != "2026-12-07T12:00:30Z" {
		t.Errorf("ErrorInfo %v, want reason %s with the holder and the lease's end", info, reasonSweeperElsewhere)
	}

	st = status.Convert(s.toStatus(t.Context(), "Sweep", fmt.Errorf("%w: %s was lost during the run", ledger.ErrLeaseLost, ledger.LeaseSweeper)))
	if st.Code() != codes.Unavailable {
		t.Errorf("lost lease: code %s, want Unavailable", st.Code())
	}
}
