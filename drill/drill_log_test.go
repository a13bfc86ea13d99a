package drill_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/proof"
)

// Drill reports carry the log's checkpoint and each drilled row's proof; a
// row not yet integrated is said so in its receipt_row pull, which still
// passes. The dispute reply never says a proof is attached (the drill
// attaches nothing); the reply to send with the proof files does.
func TestDrillReportsCarryTheLog(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	signer, vkey, err := pacttest.LogKey("drill.test/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	row := e.append(t, e.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}))

	// Committed, not yet integrated: said so, nothing fails.
	rep, err := e.r.Run(ctx, drill.Request{Target: "A-5531"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if rep.ChecksPassed != 6 || len(rep.Proofs) != 1 || rep.Proofs[0].Bundle != nil || !strings.Contains(rep.Proofs[0].Detail, "not yet in a signed checkpoint") {
		t.Fatalf("before integration: %d/%d %+v", rep.ChecksPassed, rep.ChecksTotal, rep.Proofs)
	}
	if d := pulls(rep)[drill.PullReceiptRow].Detail; !strings.Contains(d, "not yet in a signed checkpoint") {
		t.Fatalf("receipt_row: %s", d)
	}
	if strings.Contains(rep.Reply, drill.ProofAttached) || rep.ReplyWithProof() != "" {
		t.Fatalf("reply mentions a proof it does not have: %q, with proof %q", rep.Reply, rep.ReplyWithProof())
	}

	// Integrated and published, as the integrator does in one round: the
	// log serves only what write-once storage holds.
	if _, err := e.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.l.PublishTiles(ctx); err != nil {
		t.Fatal(err)
	}
	for _, req := range []drill.Request{{Target: "A-5531"}, {Monthly: true, Sample: 1}} {
		rep, err := e.r.Run(ctx, req, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if rep.ChecksPassed != rep.ChecksTotal || len(rep.Proofs) != 1 || rep.Proofs[0].RowID != row.ID || rep.Proofs[0].Bundle == nil {
			t.Fatalf("%+v: %d/%d %+v", req, rep.ChecksPassed, rep.ChecksTotal, rep.Proofs)
		}
		if _, err := rep.Proofs[0].Bundle.Verify(vkey); err != nil {
			t.Fatalf("bundle: %v", err)
		}
		if c, err := proof.Open([]byte(rep.Checkpoint), vkey); err != nil || c.Size != 1 {
			t.Fatalf("checkpoint: %v %+v", err, c)
		}
		if d := pulls(rep)[drill.PullReceiptRow].Detail; !strings.Contains(d, "in the Merkle log as leaf 0 under the signed checkpoint of size 1") {
			t.Fatalf("receipt_row: %s", d)
		}
		if strings.Contains(rep.Reply, drill.ProofAttached) {
			t.Fatalf("reply (monthly %v) says a proof is attached: %q", req.Monthly, rep.Reply)
		}
		if got, want := rep.ReplyWithProof(), rep.Reply+" "+drill.ProofAttached; req.Monthly != (got == "") || !req.Monthly && got != want {
			t.Fatalf("reply with proof (monthly %v): %q, want %q", req.Monthly, got, want)
		}
		// The stored report keeps them.
		stored, _, err := e.r.Get(ctx, rep.ID)
		if err != nil || stored.Checkpoint != rep.Checkpoint || len(stored.Proofs) != 1 || stored.Proofs[0].Bundle == nil || stored.ReplyWithProof() != rep.ReplyWithProof() {
			t.Fatalf("stored report: %v %+v", err, stored)
		}
	}
	// Without a log, reports carry neither.
	plain := newEnv(t, time.Now)
	plain.append(t, plain.sc.Mint(pacttest.Spec{Target: "B-1"}))
	rep, err = plain.r.Run(ctx, drill.Request{Target: "B-1"}, "lead")
	if err != nil || rep.Checkpoint != "" || len(rep.Proofs) != 0 {
		t.Fatalf("no log: %v %+v", err, rep)
	}
}

// A dispute report stored by an earlier version, whose reply ended with
// ProofAttached, is read with the reply alone.
func TestStoredReplyReadWithoutTheProofSentence(t *testing.T) {
	e := newEnv(t, time.Now)
	ctx := context.Background()
	at := time.Date(2026, 10, 9, 9, 5, 0, 0, time.UTC)
	id := ledger.NewDrillID(at)
	body, err := json.Marshal(drill.Report{ID: id, Kind: drill.Dispute, StartedAt: at, FinishedAt: at, Reply: "Reply. " + drill.ProofAttached})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.l.SaveDrill(ctx, id, at, body); err != nil {
		t.Fatal(err)
	}
	got, _, err := e.r.Get(ctx, id)
	if err != nil || got.Reply != "Reply." {
		t.Fatalf("stored reply read as %q: %v", got.Reply, err)
	}
	list, _, err := e.r.List(ctx, 10, "")
	if err != nil || len(list) != 1 || list[0].Reply != "Reply." {
		t.Fatalf("listed: %v %+v", err, list)
	}
}
