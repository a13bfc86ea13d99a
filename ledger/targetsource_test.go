package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// The write path records what vouches for each action's target: the
// signed args for a receipt as the pipeline posts it; the action log
// alone for a real receipt posted with its action filed under another
// order, for args the agent did not sign (the ledger computed their
// hash) and for a refusal. The row store keeps it, and fsck finds the
// rows as their evidence gives them.
func TestTheWritePathRecordsWhereATargetComesFrom(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	moved := h.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	moved.Actions[0].Target = "B-8888"
	unsigned := h.sc.Mint(pacttest.Spec{Target: "A-6000"})
	unsigned.Claims["actions"] = []map[string]any{{"tool": "cancel_order"}}
	h.sc.Resign(unsigned)
	refused := h.sc.Mint(pacttest.Spec{})
	refusal, err := h.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedAgent: "agent", Tool: "cancel_order", Target: "A-7000", Reason: "no receipt",
		RequestJWT: refused.RequestJWT, DelegationToken: refused.DelegationToken, ObservedAt: h.clock()})
	if err != nil {
		t.Fatal(err)
	}
	signedRow, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5000"})))
	movedRow, _ := h.append(t, in(moved))
	unsignedRow, _ := h.append(t, in(unsigned))
	if movedRow.Status != ledger.Authorized {
		t.Fatalf("the moved receipt is %s; want it authorized, as the verifier sees it", movedRow.Status)
	}
	for _, c := range []struct {
		name string
		row  *ledger.Row
		want verifier.TargetSource
	}{
		{"a receipt as the pipeline posts it", signedRow, verifier.TargetFromSignedArgs},
		{"a real receipt filed under another order", movedRow, verifier.TargetFromWriter},
		{"args the agent did not sign", unsignedRow, verifier.TargetFromWriter},
		{"a refusal", refusal, verifier.TargetFromWriter},
	} {
		stored, err := h.l.Get(ctx, c.row.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*ledger.Row{c.row, stored} {
			if len(r.Actions) != 1 || r.Actions[0].TargetSource != c.want {
				t.Errorf("%s: actions %+v; want target source %d", c.name, r.Actions, c.want)
			}
		}
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("fsck of untouched rows:\n%s", problems(got))
	}
}

// A row written before the ledger recorded where targets come from (no
// target source) is no edited row: fsck and VerifyRow find it agrees with
// its evidence, and it reads back as not recorded.
func TestARowWithoutATargetSourceIsNotEdited(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	moved := h.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"})
	moved.Actions[0].Target = "B-8888"
	var rows []*ledger.Row
	for _, r := range []*pacttest.Receipt{h.sc.Mint(pacttest.Spec{Target: "A-5000"}), moved} {
		row, _ := h.append(t, in(r))
		rows = append(rows, row)
	}
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		h.tamper(t, tamper.EditRow(row.ID, func(r *ledger.Row) {
			for i := range r.Actions {
				r.Actions[i].TargetSource = verifier.TargetNotRecorded
			}
		}))
	}
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("fsck of rows without a target source:\n%s", problems(got))
	}
	for _, row := range rows {
		rv, err := h.l.VerifyRow(ctx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !rv.Same {
			t.Errorf("VerifyRow of row %s without a target source: differences:\n%s", row.ID[:12], strings.Join(rv.Differences, "\n"))
		}
		stored, err := h.l.Get(ctx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s := stored.Actions[0].TargetSource; s != verifier.TargetNotRecorded {
			t.Errorf("row %s reads back with target source %d; want none", row.ID[:12], s)
		}
	}
}
