package server_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

type evidenceReply struct {
	EvidenceSha256, RowEvidenceSha256, ReadFrom string
	Actions                                     []struct{ Tool, Target string }
	Objects                                     []struct {
		Name, Key      string
		Offset, Length int
	}
}

// editSegment changes a byte of the row's bundle in its segment file of
// the local evidence directory (old becomes new).
func (e *env) editSegment(t *testing.T, ev evidenceReply, old, new string) {
	t.Helper()
	for _, o := range ev.Objects {
		if o.Name != "evidence" || o.Length == 0 {
			continue
		}
		p := filepath.Join(e.cfg.DataDir, "evidence", filepath.FromSlash(o.Key))
		if err := tamper.EditBundle(p, o.Offset, o.Length, old, new); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no segment object in %+v", ev.Objects)
}

// TestEvidenceAnswerSaysWhetherItMatchesTheRow: GET /v1/rows/{id}/evidence
// carries the row's write-time hash beside the hash of the bundle it
// serves and says where it read it; with a byte of the stored bundle
// flipped, the two differ once the ledger reads the stored copy.
func TestEvidenceAnswerSaysWhetherItMatchesTheRow(t *testing.T) {
	e := newEnv(t, jose.ES256)
	var rep appendReply
	if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: "T-1234"})), &rep); code != 200 {
		t.Fatalf("append = %d", code)
	}
	want := rep.Row.EvidenceSha256
	e.waitDrained(t)
	path := "/v1/rows/" + rep.Row.ID + "/evidence"
	var ev evidenceReply
	if code := e.call(t, "GET", path, "support", nil, &ev); code != 200 || ev.EvidenceSha256 != want || ev.RowEvidenceSha256 != want || ev.ReadFrom == "" {
		t.Fatalf("evidence before the edit: %d %+v", code, ev)
	}
	e.editSegment(t, ev, "T-1234", "T-1235")
	e.stop()
	e.start(t)
	ev = evidenceReply{}
	if code := e.call(t, "GET", path, "support", nil, &ev); code != 200 || ev.RowEvidenceSha256 != want || ev.EvidenceSha256 == want ||
		ev.ReadFrom != "EVIDENCE_READ_FROM_WRITE_ONCE_COPY" || len(ev.Actions) != 1 || ev.Actions[0].Target != "T-1235" {
		t.Fatalf("evidence after the edit: %d %+v, want the write-time %s beside the hash read", code, ev, want)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keys["support"])
	g, err := ledgerv1.NewLedgerServiceClient(dial(t, e)).GetEvidence(ctx, &ledgerv1.GetEvidenceRequest{Id: rep.Row.ID})
	if err != nil || g.GetRowEvidenceSha256() != want || g.GetEvidenceSha256() != ev.EvidenceSha256 ||
		g.GetReadFrom() != ledgerv1.EvidenceReadFrom_EVIDENCE_READ_FROM_WRITE_ONCE_COPY {
		t.Fatalf("gRPC evidence after the edit: %v %v", g, err)
	}
}
