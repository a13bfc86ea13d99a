package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
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
		answers: make(chan streamAnswer, 3),
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
		r.answers <- streamAnswer{resp: a, at: time.Now()}
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

// A drill report with every detail as long as a writer's posts can make
// it, the most rows a drill covers and a proof for each, answers within
// 2 MiB and says its details were cut; a report of short details is
// answered as it is.
func TestDrillAnswerIsBounded(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	hashes := make([]tlog.Hash, 40) // a log of a trillion leaves
	cp := []byte(strings.Repeat("c", 1024))
	rep := &drill.Report{ID: "drill-1", Kind: drill.Monthly, Reply: long, Note: long}
	for i := range 100 {
		id := fmt.Sprintf("%064x", i)
		rep.Rows = append(rep.Rows, id)
		for _, name := range drill.Pulls {
			rep.Pulls = append(rep.Pulls, drill.Pull{RowID: id, Name: name, Detail: long})
		}
		rep.Proofs = append(rep.Proofs, drill.RowProof{RowID: id, Bundle: proof.NewBundle(id, int64(i), []byte(strings.Repeat("l", 1024)), hashes, cp)})
	}
	for i := range drill.MaxRows {
		rep.Listed = append(rep.Listed, drill.Listed{RowID: fmt.Sprintf("%064x", 1000+i), Detail: long})
	}
	p := drillProto(rep, ledger.Location{Key: ledger.DrillKey(rep.ID)})
	if n := proto.Size(p); n > 2<<20 || !p.GetDetailsTruncated() {
		t.Errorf("the longest report answers in %d bytes (truncated %v); want at most 2 MiB, truncated", n, p.GetDetailsTruncated())
	}
	if r := p.GetReply(); len(r) > maxReplyBytes+32 || !strings.HasSuffix(r, fmt.Sprintf("… (%d bytes more)", len(long)-maxReplyBytes)) {
		t.Errorf("reply answered as %d bytes: …%q", len(r), r[len(r)-40:])
	}
	for _, d := range []string{p.GetNote(), p.GetPulls()[0].GetDetail(), p.GetListed()[0].GetDetail()} {
		if len(d) > maxDetailBytes+32 || !strings.HasSuffix(d, " bytes more)") {
			t.Errorf("a detail answered as %d bytes: …%q", len(d), d[len(d)-40:])
		}
	}

	short := &drill.Report{ID: "drill-2", Reply: "We are checking.", Note: "1 row drilled", Pulls: []drill.Pull{{Name: drill.PullDecision, Detail: "needs a person"}},
		Proofs: []drill.RowProof{{RowID: "r", Detail: "not yet in a signed checkpoint"}}}
	if p := drillProto(short, ledger.Location{}); p.GetDetailsTruncated() || p.GetReply() != short.Reply || p.GetNote() != short.Note ||
		p.GetPulls()[0].GetDetail() != "needs a person" || p.GetProofs()[0].GetDetail() != "not yet in a signed checkpoint" {
		t.Errorf("a short report answered as %v", p)
	}
}
