package server

import (
	"context"
	"encoding/base64"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// A receipt's error keeps AppendReceipt's code, message and retry delay.
func TestReceiptResult(t *testing.T) {
	res := receiptResult(nil, retryable(codes.Unavailable, "brand keys unavailable", keysRetryDelay))
	if res.GetReason() != "" {
		t.Fatalf("retryable with a reason: %v", res)
	}
	if res.GetCode() != int32(codes.Unavailable) || res.GetMessage() != "brand keys unavailable" || res.GetRetryDelay().AsDuration() != keysRetryDelay || res.GetResponse() != nil {
		t.Fatalf("retryable: %v", res)
	}
	res = receiptResult(nil, status.Error(codes.InvalidArgument, "receiptJws: not a compact JWS"))
	if res.GetCode() != int32(codes.InvalidArgument) || res.GetRetryDelay() != nil {
		t.Fatalf("invalid: %v", res)
	}
	swept := &ledger.ExpiredError{Tombstone: ledger.Tombstone{ID: "ab12", RetainUntil: time.Now(), SweptAt: time.Now()}}
	res = receiptResult(nil, (&service{}).toStatus(context.Background(), "AppendReceipt", swept))
	if res.GetCode() != int32(codes.NotFound) || res.GetReason() != reasonExpired {
		t.Fatalf("swept: %v", res)
	}
	ok := &ledgerv1.AppendReceiptResponse{Outcome: ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED}
	if res := receiptResult(ok, nil); res.GetCode() != 0 || res.GetResponse() != ok {
		t.Fatalf("recorded: %v", res)
	}
}

// The receipts of a grant keep their order; a receipt whose grant cannot
// be read goes with the others that cannot.
func TestByGrant(t *testing.T) {
	jws := func(payload string) *ledgerv1.AppendReceiptRequest {
		return &ledgerv1.AppendReceiptRequest{ReceiptJws: "eyJhbGciOiJFUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"}
	}
	const ts = `,"ts":"2026-11-30T10:00:00Z"}`
	receipts := []*ledgerv1.AppendReceiptRequest{
		jws(`{"grantId":"g1","user":"u"` + ts),
		jws(`{"grantId":"g2"` + ts),
		{ReceiptJws: "not a JWS"},
		jws(`{"grantId":"g1"` + ts),
		jws(`not JSON`),
		jws(`{"grantId":"g2"` + ts),
		jws(`{"grantId":"g1"` + ts),
		{ReceiptJws: "a.!!!.c"},
		jws(`{"grantId":"g2","ts":"yesterday"}`), // not receipt claims
	}
	want := [][]int{{0, 3, 6}, {1, 5}, {2, 4, 7, 8}}
	if got := byGrant(parsedInputs(receipts)); !reflect.DeepEqual(got, want) {
		t.Fatalf("byGrant = %v, want %v", got, want)
	}
}
