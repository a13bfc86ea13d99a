package drill_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// An operator holds the row store's file and the log's key, not the
// write-once store. It rewrites the status of a row the log already
// holds, AUTHORIZED to UNAUTHORIZED, and leaves its checks and evidence
// alone. The drill must not tell the customer there is no verifiable
// approval on the strength of the rewritten status, while the proof file
// it attaches holds a leaf that says the row was authorized.
func TestARowRewrittenAfterItsLeafIsNotBelieved(t *testing.T) {
	ctx := context.Background()
	// The first row's status, the second row's kind: a refusal.
	l, rows := editedLedger(t, []string{"A-5531", "A-5532"}, func(rows []*ledger.Row) []func(*bbolt.Tx) error {
		return []func(*bbolt.Tx) error{
			tamper.EditRow(rows[0].ID, func(r *ledger.Row) { r.Status = ledger.Unauthorized }),
			tamper.EditRow(rows[1].ID, func(r *ledger.Row) {
				r.Kind, r.Status, r.Refusal = ledger.KindRefusal, ledger.Unauthorized, &ledger.Refusal{ClaimedPrincipal: r.Principal, Reason: "no delegation token"}
			}),
		}
	})

	for i, want := range []string{`status is "unauthorized" in the row store, "authorized" in the leaf`, `kind is "refusal" in the row store, "receipt" in the leaf`} {
		row := rows[i]
		rep, err := drill.New(l, drill.Config{}).Run(ctx, drill.Request{Target: row.Targets()[0], Principal: "acct-48213"}, "lead")
		if err != nil {
			t.Fatal(err)
		}
		if p := decisions(rep)[row.ID]; p.Passed || !strings.Contains(p.Detail, "needs a person") {
			t.Errorf("decision on %s: %+v; want needs a person", row.Targets()[0], p)
		}
		if p := pulls(rep)[drill.PullReceiptRow]; p.Passed || !strings.Contains(p.Detail, want) {
			t.Errorf("receipt_row of %s: %+v; want %s", row.Targets()[0], p, want)
		}
		if strings.Contains(rep.Reply, "no verifiable approval") {
			t.Errorf("reply on %s %q: the log holds the row as authorized", row.Targets()[0], rep.Reply)
		}
	}
}

// The operator makes the row's leaf unreadable instead of rewriting the
// row: the drill cannot hold the row against what the log took, so it
// decides nothing on the row alone.
func TestARowWhoseLeafCannotBeReadNeedsAPerson(t *testing.T) {
	ctx := context.Background()
	l, rows := editedLedger(t, []string{"A-5531"}, func([]*ledger.Row) []func(*bbolt.Tx) error {
		return []func(*bbolt.Tx) error{tamper.EditLeaf(0, func([]byte) []byte { return nil })}
	})
	row := rows[0]
	if _, _, err := l.RowLeafDiff(ctx, row.ID); err == nil {
		t.Fatal("the emptied leaf reads as a leaf")
	}
	rep, err := drill.New(l, drill.Config{}).Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-48213"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if p := decisions(rep)[row.ID]; p.Passed || !strings.Contains(p.Detail, "its leaf in the Merkle log") {
		t.Errorf("decision: %+v; want needs a person, naming the leaf", p)
	}
}

// editedLedger records an authorized receipt of acct-48213's for each of
// targets in a logged ledger (poolLedger), logs them, applies the edits
// edit makes of the rows to the closed bbolt file, as an operator who
// holds it can, and opens the ledger again. It returns the ledger and the
// rows as recorded.
func editedLedger(t *testing.T, targets []string, edit func(rows []*ledger.Row) []func(*bbolt.Tx) error) (*ledger.Ledger, []*ledger.Row) {
	t.Helper()
	specs := make([]pacttest.Spec, len(targets))
	for i, target := range targets {
		specs[i] = pacttest.Spec{User: "acct-48213", Target: target}
	}
	return poolLedger(t, specs, func(rows []*ledger.Row) []func(*bbolt.Tx) error {
		for _, row := range rows {
			if row.Status != ledger.Authorized || row.EvidenceNotKept != "" {
				t.Fatalf("append: %v", row)
			}
		}
		return edit(rows)
	})
}

// loggedLedger returns a function that opens the ledger on the bbolt file
// and evidence directory in dir, with its Merkle log, as ledgerd would
// after a restart.
func loggedLedger(t *testing.T, sc *pacttest.Scenario, dir string) func() (*ledger.Ledger, *bolt.Store) {
	t.Helper()
	signer, _, err := pacttest.LogKey("drill.test/log")
	if err != nil {
		t.Fatal(err)
	}
	return func() (*ledger.Ledger, *bolt.Store) {
		store, err := bolt.Open(filepath.Join(dir, "l.db"), bolt.Config{})
		if err != nil {
			t.Fatal(err)
		}
		objects, err := localdir.Open(filepath.Join(dir, "ev"))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := verifier.New(verifier.Config{Audience: sc.Audience})
		l, err := ledger.New(store, objects, v, sc.Static(time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)), ledger.Config{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
			t.Fatal(err)
		}
		return l, store
	}
}

// A row written before the ledger recorded where its targets come from
// holds no target source: the drill reads the signed args for it, as it
// did, and a real receipt filed under another order still needs a person.
func TestADrillReadsTheArgsOfARowWithoutATargetSource(t *testing.T) {
	ctx := context.Background()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	dir := t.TempDir()
	open := loggedLedger(t, sc, dir)
	l, store := open()
	moved := withTarget(sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5531"}), "B-8888")
	var rows []*ledger.Row
	for _, r := range []*pacttest.Receipt{moved, sc.Mint(pacttest.Spec{User: "acct-48213", Target: "A-5000"})} {
		row, _, err := l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
		if err != nil || row.Actions[0].TargetSource == verifier.TargetNotRecorded {
			t.Fatalf("append: %v %+v", err, row)
		}
		rows = append(rows, row)
	}
	if _, err := l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	var edits []func(*bbolt.Tx) error
	for _, row := range rows {
		edits = append(edits, tamper.EditRow(row.ID, func(r *ledger.Row) { r.Actions[0].TargetSource = verifier.TargetNotRecorded }))
	}
	if err := tamper.Apply(filepath.Join(dir, "l.db"), edits...); err != nil {
		t.Fatal(err)
	}
	l, store = open()
	t.Cleanup(func() { store.Close() })
	r := drill.New(l, drill.Config{})

	rep, err := r.Run(ctx, drill.Request{RowID: rows[0].ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if p := pulls(rep)[drill.PullActionLog]; p.Passed || !strings.Contains(p.Detail, "do not name B-8888") {
		t.Errorf("action log pull of the moved row: %+v; want it to say the signed args do not name B-8888", p)
	}
	if d := decisions(rep)[rows[0].ID]; d.Passed || !strings.Contains(d.Detail, "needs a person") {
		t.Errorf("decision on the moved row: %+v; want it to need a person", d)
	}
	rep, err = r.Run(ctx, drill.Request{RowID: rows[1].ID}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if p := pulls(rep)[drill.PullActionLog]; !p.Passed {
		t.Errorf("action log pull of the row whose signed args name its target: %+v; want passed", p)
	}
}

// An operator marks a money-moved row of the log as keeping no evidence,
// as only a read-only receipt does, and rewrites its customer. The
// dispute drill by the order must not list the row as a look-up that
// changed nothing, and tell the customer so: it drills the row, whose
// evidence and leaf say otherwise.
func TestARowMarkedAsKeepingNoEvidenceIsDrilled(t *testing.T) {
	ctx := context.Background()
	l, rows := editedLedger(t, []string{"A-5531"}, func(rows []*ledger.Row) []func(*bbolt.Tx) error {
		return []func(*bbolt.Tx) error{tamper.EditRow(rows[0].ID, func(r *ledger.Row) {
			r.EvidenceNotKept = "read-only class: the receipt, tokens and args are not kept (personal data stays short-lived)"
			r.Principal = "acct-30011"
		})}
	})
	row := rows[0]

	rep, err := drill.New(l, drill.Config{}).Run(ctx, drill.Request{Target: "A-5531", Principal: "acct-30011"}, "lead")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Listed) != 0 || len(rep.Rows) != 1 || strings.Contains(rep.Reply, "look-ups") {
		t.Fatalf("the drill listed the row as a read-only turn: rows %v, listed %+v, reply %q", rep.Rows, rep.Listed, rep.Reply)
	}
	if p := decisions(rep)[row.ID]; p.Passed || !strings.Contains(p.Detail, "needs a person") {
		t.Errorf("decision: %+v; want needs a person", p)
	}
	if p := pulls(rep)[drill.PullReceiptRow]; p.Passed || !strings.Contains(p.Detail, "not kept") {
		t.Errorf("receipt_row: %+v; want the row's mark found", p)
	}
}
