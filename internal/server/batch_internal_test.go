package server

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A receipt's error keeps AppendReceipt's code, message and retry delay.
func TestReceiptResult(t *testing.T) {
	res := receiptResult(nil, retryable(codes.Unavailable, "brand keys unavailable", keysRetryDelay))
	if res.GetCode() != int32(codes.Unavailable) || res.GetMessage() != "brand keys unavailable" || res.GetRetryDelay().AsDuration() != keysRetryDelay || res.GetResponse() != nil {
		t.Fatalf("retryable: %v", res)
	}
	res = receiptResult(nil, status.Error(codes.InvalidArgument, "receiptJws: not a compact JWS"))
	if res.GetCode() != int32(codes.InvalidArgument) || res.GetRetryDelay() != nil {
		t.Fatalf("invalid: %v", res)
	}
	ok := &ledgerv1.AppendReceiptResponse{Outcome: ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED}
	if res := receiptResult(ok, nil); res.GetCode() != 0 || res.GetResponse() != ok {
		t.Fatalf("recorded: %v", res)
	}
}
