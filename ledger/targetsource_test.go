package ledger_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

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

// A row recorded while any value in the signed args equal to the target
// vouched for it (a number, args holding a key twice or with bytes after
// them) keeps the signed args' word it was given: fsck and VerifyRow
// find it as written. An edit giving the signed args' word to a target
// they never named is still found.
func TestARowRecordedUnderTheEarlierReadingOfArgsIsNotEdited(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.startLog(t)
	var earlier []*ledger.Row
	for _, c := range []struct{ target, args string }{
		{"A-5531", `{"order":"B-8888","order":"A-5531"}`},
		{"A-5532", `{"order":"A-5532"} {"order":"B-8888"}`},
		{"5533", `{"order":"B-8888","amount":5533}`},
	} {
		row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{User: "acct-48213", Target: c.target, ArgsJSON: c.args})))
		if s := row.Actions[0].TargetSource; s != verifier.TargetFromWriter {
			t.Fatalf("args %s filed under %s: target source %d; want the action log's", c.args, c.target, s)
		}
		earlier = append(earlier, row)
	}
	moved := h.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-6000"})
	moved.Actions[0].Target = "B-9999"
	movedRow, _ := h.append(t, in(moved))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, row := range append(earlier, movedRow) {
		h.tamper(t, tamper.EditRow(row.ID, func(r *ledger.Row) { r.Actions[0].TargetSource = verifier.TargetFromSignedArgs }))
	}
	got := integrity(t, h)
	for _, row := range earlier {
		if f := findingsOf(got, row.ID); len(f) != 0 {
			t.Errorf("fsck of row %s, recorded under the earlier reading: %q", row.ID[:12], f)
		}
		rv, err := h.l.VerifyRow(ctx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !rv.Same {
			t.Errorf("VerifyRow of row %s, recorded under the earlier reading: differences:\n%s", row.ID[:12], strings.Join(rv.Differences, "\n"))
		}
	}
	const want = `the row's target source of cancel_order is "the signed args"; its evidence says "the action log alone": the row was edited after it was written`
	if f := findingsOf(got, movedRow.ID); !slices.ContainsFunc(f, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("fsck of the moved row given the signed args' word: %q; want %q", f, want)
	}
	rv, err := h.l.VerifyRow(ctx, movedRow.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rv.Same || !slices.ContainsFunc(rv.Differences, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("VerifyRow of the moved row given the signed args' word: %q; want %q", rv.Differences, want)
	}
}

// A row recorded from the stricter reading on is never read the earlier
// way: the signed args' word given to its target, which only the earlier
// reading would have given, is an edit.
func TestARowRecordedUnderTheStricterReadingIsReadSo(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.set(ledger.StrictTargetsFrom.Add(time.Hour))
	h.startLog(t)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531", ArgsJSON: `{"order":"B-8888","order":"A-5531"}`})))
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	h.tamper(t, tamper.EditRow(row.ID, func(r *ledger.Row) { r.Actions[0].TargetSource = verifier.TargetFromSignedArgs }))
	const want = `the row's target source of cancel_order is "the signed args"; its evidence says "the action log alone": the row was edited after it was written`
	if f := findingsOf(integrity(t, h), row.ID); !slices.ContainsFunc(f, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("fsck of a row recorded %s given the signed args' word: %q; want %q", row.RecordedAt, f, want)
	}
}
