package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
)

// A second leaf queued for a row already in the log (the row store
// written outside the ledger, its new values in the leaf) is not logged:
// the row's index stays on its first leaf, the leaf leaves the queue so
// the log goes on with what follows, and the refusal is reported (an
// ERROR naming the ref and both indexes, and a count). Two leaves of one
// ref in one round: the first is logged, the second refused.
func TestALeafForALoggedRefIsNotSequenced(t *testing.T) {
	ctx := context.Background()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), logs: &syncbuf.Buffer{}, metrics: ledger.NewMetrics(prometheus.NewRegistry())}
	t.Cleanup(h.sc.Close)
	h.open(t)
	vkey := h.enableLog(t, 0)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "L-1"})))
	if n, err := h.integrate(ctx); err != nil || n != 1 {
		t.Fatalf("integrate the row: %d, %v", n, err)
	}
	first, err := h.l.Proof(ctx, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.Leaf, "\nclass money_moved\n") {
		t.Fatalf("the row's leaf:\n%s", first.Leaf)
	}
	rewritten := strings.Replace(first.Leaf, "\nclass money_moved\n", "\nclass read_only\n", 1)
	if err := h.store.Update(ctx, func(tx ledger.Tx) error { return tx.QueueLeaf(row.ID, []byte(rewritten)) }); err != nil {
		t.Fatal(err)
	}
	later, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "L-2"})))
	if n, err := h.integrate(ctx); err != nil || n != 1 {
		t.Fatalf("integrate the second leaf of a logged row and a new row: %d leaves logged, %v; want the new row's only", n, err)
	}
	if c := checkpointOf(t, h, vkey); c.Size != 2 {
		t.Errorf("tree size %d, want 2", c.Size)
	}
	b, err := h.l.Proof(ctx, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b.LeafIndex != first.LeafIndex || b.Leaf != first.Leaf {
		t.Errorf("the row's proof names leaf %d:\n%s\nwant its first, %d", b.LeafIndex, b.Leaf, first.LeafIndex)
	}
	if _, err := b.Verify(vkey); err != nil {
		t.Error(err)
	}
	if b, err := h.l.Proof(ctx, later.ID); err != nil || b.LeafIndex != 1 {
		t.Errorf("the later row's proof: %+v, %v; want leaf 1", b, err)
	}
	if err := h.store.View(ctx, func(tx ledger.Tx) error {
		pend, err := tx.PendingLeaves(10)
		if err != nil || len(pend) != 0 {
			t.Errorf("queue after the round: %v, %v; want it empty", pend, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	logs := h.logs.String()
	want := fmt.Sprintf("ref=%s leaf_index=%d refused_index=1", row.ID, first.LeafIndex)
	if !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, want) {
		t.Errorf("no ERROR with %q in the ledger's log:\n%s", want, logs)
	}
	if got := testutil.ToFloat64(h.metrics.LogLeavesRefused); got != 1 {
		t.Errorf("pactledger_log_leaves_refused_total = %v, want 1", got)
	}

	// Two leaves of one ref in one round.
	if err := h.store.Update(ctx, func(tx ledger.Tx) error {
		for _, data := range []string{"first", "second"} {
			if err := tx.QueueLeaf("ref-twice", fmt.Appendf(nil, "%s\nkind test\n%s\n", ledger.LeafVersion, data)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := h.integrate(ctx); err != nil || n != 1 {
		t.Fatalf("integrate two leaves of one ref: %d logged, %v; want 1", n, err)
	}
	if b, err := h.l.Proof(ctx, "ref-twice"); err != nil || b.LeafIndex != 2 || !strings.Contains(b.Leaf, "\nfirst\n") {
		t.Errorf("ref-twice: %+v, %v; want its first leaf at 2", b, err)
	}
	if got := testutil.ToFloat64(h.metrics.LogLeavesRefused); got != 2 {
		t.Errorf("pactledger_log_leaves_refused_total = %v, want 2", got)
	}
	if c := checkpointOf(t, h, vkey); c.Size != 3 {
		t.Errorf("tree size %d, want 3", c.Size)
	}
}

// The leaves the ledger itself queues for one row (the row's, each
// dispute event's, its incident's closure) and each start's policy leaf
// have refs of their own: none is refused.
func TestTheLedgersOwnLeavesAreNeverRefused(t *testing.T) {
	ctx := context.Background()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), logs: &syncbuf.Buffer{}, metrics: ledger.NewMetrics(prometheus.NewRegistry())}
	t.Cleanup(h.sc.Close)
	h.open(t)
	h.enableLog(t, 0)
	for range 2 {
		if _, err := h.l.LogPolicy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "RO-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "INC-1", ScopesUsed: []string{"plan:change"}})))
	for _, s := range []ledger.DisputeStatus{ledger.DisputeOpen, ledger.DisputeResolvedOther, ledger.DisputeOpen} {
		if _, err := h.l.AppendDispute(ctx, row.ID, s, "a note", "support-key"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.l.Integrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.l.CloseIncident(ctx, inc.IncidentID, "fixed", "admin-key"); err != nil {
		t.Fatal(err)
	}
	if n, err := h.l.Integrate(ctx); err != nil || n != 1 {
		t.Fatalf("integrate the closure: %d, %v", n, err)
	}
	if size, err := h.l.TreeSize(ctx); err != nil || size != 8 {
		t.Errorf("tree size %d, %v; want 8 (2 policies, 2 rows, 3 dispute events, 1 closure)", size, err)
	}
	if got := testutil.ToFloat64(h.metrics.LogLeavesRefused); got != 0 {
		t.Errorf("pactledger_log_leaves_refused_total = %v, want 0:\n%s", got, h.logs.String())
	}
}
