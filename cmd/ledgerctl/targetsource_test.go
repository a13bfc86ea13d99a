package main

import (
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
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
