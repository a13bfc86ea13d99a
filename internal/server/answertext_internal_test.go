package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/verifier"
)

// A row whose check detail holds bytes that are not UTF-8 (stored by an
// earlier version) is answered with the bytes replaced, not refused.
func TestRowAnswerIsUTF8(t *testing.T) {
	r := &ledger.Row{ID: "r", Verifier: ledger.Record{Checks: []verifier.Check{{Name: verifier.CheckRequestSignature, Result: verifier.Fail, Detail: "iat \"\xff\xfe\" is not a number"}}}}
	if _, err := proto.Marshal(&ledgerv1.GetRowResponse{Row: rowProto(r)}); err != nil {
		t.Errorf("row answer: %v", err)
	}
	res := receiptResult(nil, status.Error(codes.InvalidArgument, "receiptJws: \xc3"))
	if _, err := proto.Marshal(res); err != nil {
		t.Errorf("receipt result: %v", err)
	}
}

// sendOnly is a stream's sending side: Send encodes the answer as gRPC
// does, and refuses one that does not encode without ending the stream.
type sendOnly struct {
	ledgerv1.LedgerService_AppendReceiptStreamServer
	sent []*ledgerv1.AppendReceiptStreamResponse
}

func (f *sendOnly) Send(a *ledgerv1.AppendReceiptStreamResponse) error {
	if _, err := proto.Marshal(a); err != nil {
		return status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	f.sent = append(f.sent, a)
	return nil
}

// An answer that cannot be encoded is answered INTERNAL on its own; the
// other receipts the stream read still get their answers.
func TestStreamAnswersPastAnUnencodableAnswer(t *testing.T) {
	r := &receiptStream{
		s:       &service{log: slog.New(slog.DiscardHandler), streamReceipts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "answers"}, []string{"code"})},
		room:    make(chan struct{}, 3),
		answers: make(chan *ledgerv1.AppendReceiptStreamResponse, 3),
		ended:   make(chan error, 1),
		pending: 3,
	}
	r.ctx = t.Context()
	for seq := range uint64(3) {
		r.room <- struct{}{}
		a := &ledgerv1.AppendReceiptStreamResponse{Seq: seq, Result: &ledgerv1.AppendReceiptResult{Code: int32(codes.InvalidArgument), Message: "fine"}}
		if seq == 1 {
			a.Result.Message = "not UTF-8: \xff"
		}
		r.answers <- a
	}
	r.ended <- io.EOF
	f := &sendOnly{}
	if err := r.answer(f, nil); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v after %d answers", err, len(f.sent))
	}
	var got []codes.Code
	for _, a := range f.sent {
		got = append(got, codes.Code(a.GetResult().GetCode()))
	}
	if want := []codes.Code{codes.InvalidArgument, codes.Internal, codes.InvalidArgument}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("answers %v, want %v", got, want)
	}
}

// A check's detail is answered whole up to maxDetailBytes, and past that
// cut between characters, saying how much was left out.
func TestCheckDetailIsBounded(t *testing.T) {
	long := strings.Repeat("é", maxDetailBytes) // twice the bound
	got := checksProto([]verifier.Check{{Name: verifier.CheckArgsHash, Detail: long}, {Name: verifier.CheckBindings, Detail: "short"}})
	if d := got[0].GetDetail(); len(d) > maxDetailBytes+32 || !utf8.ValidString(d) || !strings.HasSuffix(d, fmt.Sprintf("… (%d bytes more)", maxDetailBytes)) {
		t.Errorf("long detail answered as %d bytes: …%q", len(d), d[len(d)-40:])
	}
	if d := got[1].GetDetail(); d != "short" {
		t.Errorf("short detail answered as %q", d)
	}
}
