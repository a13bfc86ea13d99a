package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/verifier"
)

// show says what vouches for each action's target, on a line of its own
// below the action's: the signed args for the pipeline's post of a
// receipt; the action log alone for a real receipt a writer posted with
// its action filed under another order. A row written before the ledger
// recorded it says so, and fsck and verify find it as written.
func TestShowSaysWhereATargetComesFrom(t *testing.T) {
	f := start(t)
	moved := f.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-6000"})
	moved.Actions[0].Target = "B-8888"
	movedID := f.appendMinted(t, moved)
	for _, c := range []struct {
		id   string
		want []string
	}{
		{f.rowID, []string{"cancel_order A-5531  args hash", "target             A-5531 (named in the signed args)"}},
		{movedID, []string{"cancel_order B-8888  args hash", "target             B-8888: the action log's alone — the signed args do not name it", "authorized"}},
	} {
		code, out, errs := f.ctl(t, "support", "show", c.id)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("show %s: %d\n%s%s\nwant %q", c.id[:12], code, out, errs, w)
			}
		}
	}

	f.edit(t, tamper.EditRow(movedID, func(r *ledger.Row) { r.Actions[0].TargetSource = verifier.TargetNotRecorded }))
	code, out, errs := f.ctl(t, "support", "show", movedID)
	if want := "target             B-8888: where it comes from is not recorded (the row was written before the ledger recorded it)"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("show of a row without a target source: %d\n%s%s\nwant %q", code, out, errs, want)
	}
	if code, out, errs := f.ctl(t, "auditor", "fsck"); code != 0 || !strings.Contains(out, "no row's fields differ from its evidence") {
		t.Errorf("fsck of a row without a target source: %d\n%s%s", code, out, errs)
	}
	if code, out, errs := f.ctl(t, "auditor", "verify", movedID); code != 0 || !strings.Contains(out, "same result as at write time") {
		t.Errorf("verify of a row without a target source: %d\n%s%s", code, out, errs)
	}
}

// lookup marks a target that is the writer's word alone, with a note
// under the table that says what the mark means; in CSV the target
// column keeps the targets alone and a last column names them.
func TestLookupMarksATargetTheWriterAloneGives(t *testing.T) {
	f := start(t)
	moved := f.sc.Mint(pacttest.Spec{User: "acct-30011", Target: "A-6000", GrantID: "a2agrant_M0V3"})
	moved.Actions[0].Target = "A-5531"
	movedID := f.appendMinted(t, moved)

	// The grant's table of rows marks it too.
	if code, out, errs := f.ctl(t, "support", "grant", "a2agrant_M0V3"); code != 0 || !strings.Contains(out, " A-5531* ") || !strings.Contains(out, "(* the writer's word alone") {
		t.Errorf("grant a2agrant_M0V3: %d\n%s%s", code, out, errs)
	}

	code, out, errs := f.ctl(t, "support", "lookup", "--order", "A-5531")
	lines := strings.Split(out, "\n")
	if code != 0 || len(lines) < 4 {
		t.Fatalf("lookup: %d\n%s%s", code, out, errs)
	}
	for _, l := range lines[1:3] {
		switch {
		case strings.HasPrefix(l, movedID[:12]):
			if !strings.Contains(l, " A-5531* ") {
				t.Errorf("the moved row's target is not marked:\n%s", out)
			}
		case strings.HasPrefix(l, f.rowID[:12]):
			if strings.Contains(l, "*") {
				t.Errorf("the pipeline's row is marked:\n%s", out)
			}
		default:
			t.Errorf("unexpected line %q:\n%s", l, out)
		}
	}
	if !strings.Contains(out, "(* the writer's word alone") {
		t.Errorf("no note says what the mark means:\n%s", out)
	}

	code, out, errs = f.ctl(t, "support", "lookup", "--order", "A-5531", "-o", "csv")
	if code != 0 || !strings.HasSuffix(strings.SplitN(out, "\n", 2)[0], ",dispute,writer-only targets") ||
		!strings.Contains(out, movedID+",") || strings.Contains(out, "*") {
		t.Fatalf("lookup -o csv: %d\n%s%s", code, out, errs)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		want := ",-"
		if strings.HasPrefix(l, movedID) {
			want = ",A-5531"
		}
		if !strings.HasSuffix(l, want) {
			t.Errorf("csv line %q does not end %q", l, want)
		}
	}
	if errs != "" {
		t.Errorf("lookup -o csv: the column says it, yet stderr has %q", errs)
	}

	// A lookup by customer where no target is the writer's alone has no note.
	if code, out, errs := f.ctl(t, "support", "lookup", "--principal", "acct-48213"); code != 0 || strings.Contains(out+errs, "*") {
		t.Errorf("lookup --principal acct-48213: %d\n%s%s", code, out, errs)
	}
}

// lookup says an agent platform is claimed when no signature vouches for
// it, with a note under the table: a refusal's without a verified request
// JWT, and a forged receipt's, whose principal is marked too; a
// receipt's whose signature verified is not marked.
func TestLookupMarksAClaimedAgent(t *testing.T) {
	f := start(t)
	c, wctx := f.writer(t)
	ref, err := c.AppendRefusal(wctx, &ledgerv1.AppendRefusalRequest{ClaimedPrincipal: "acct-48213", ClaimedAgent: "https://agent.example",
		Action: &ledgerv1.RefusalAction{Tool: "cancel_order", Target: "A-5531"}, Reason: "no receipt", ObservedAt: timestamppb.New(time.Now().Add(-time.Minute))})
	if err != nil {
		t.Fatal(err)
	}
	forged := f.sc.Mint(pacttest.Spec{User: "acct-99999", Target: "A-5531"})
	forged.ReceiptJWS = pacttest.TamperSignature(forged.ReceiptJWS)
	forgedID := f.appendMinted(t, forged)
	code, out, errs := f.ctl(t, "support", "lookup", "--order", "A-5531")
	if code != 0 || !strings.Contains(out, "(claimed: no signature vouches for it") {
		t.Fatalf("lookup: %d\n%s%s", code, out, errs)
	}
	seen := 0
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, ref.GetRow().GetId()[:12]):
			seen++
			if !strings.Contains(l, "https://agent.example (claimed)") || strings.Contains(l, "acct-48213 (claimed)") {
				t.Errorf("the refusal's agent is not marked claimed, or its principal is: %q", l)
			}
		case strings.HasPrefix(l, forgedID[:12]):
			seen++
			if !strings.Contains(l, "acct-99999 (claimed)") || strings.Count(l, "(claimed)") != 2 {
				t.Errorf("the forged receipt's principal and agent are not marked claimed: %q", l)
			}
		case strings.HasPrefix(l, f.rowID[:12]):
			seen++
			if strings.Contains(l, "(claimed)") {
				t.Errorf("the receipt's agent is marked claimed: %q", l)
			}
		}
	}
	if seen != 3 {
		t.Fatalf("lookup listed %d of the 3 rows:\n%s", seen, out)
	}
}
