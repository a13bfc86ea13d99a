package ledger_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// A ledger without the Merkle log whose row store another ledger keeps a
// log on, turned on after the first started (a rolling restart turning
// the log on across replicas), finds the log and refuses its writes from
// then on: their rows would have no leaf. Before the log appears it
// writes as always.
func TestALedgerWithoutTheLogStopsWritingOnceTheStoreKeepsOne(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	if h.l.Origin() != "" {
		t.Fatal("the harness's ledger keeps a log")
	}
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	if !h.l.LogElsewhere().IsZero() {
		t.Fatal("a log found before any ledger kept one")
	}

	// Another ledger on the same row store turns the log on.
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), h.sc.Brands(), h.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: h.sc.Audience, CheckedBy: "pactledger test"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := ledger.New(h.store, objects, v, reg, ledger.Config{Now: h.clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := pacttest.LogKey("ledger.test/log")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.EnableLog(ledger.LogConfig{Signer: signer}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.LogPolicy(ctx); err != nil {
		t.Fatal(err)
	}

	// A write after the log's first leaf, before any watch read the
	// store, is refused in its own transaction.
	_, _, err = h.l.AppendReceipt(ctx, in(h.sc.Mint(pacttest.Spec{Target: "A-2"})))
	if !errors.Is(err, ledger.ErrLogElsewhere) {
		t.Fatalf("a write after the log's first leaf, before the watch: %v, want ErrLogElsewhere", err)
	}
	if err := h.l.RunLogWatch(ctx, time.Millisecond); err != nil {
		t.Fatalf("the watch: %v", err)
	}
	if h.l.LogElsewhere().IsZero() {
		t.Fatal("the watch returned without finding the log")
	}
	_, _, err = h.l.AppendReceipt(ctx, in(h.sc.Mint(pacttest.Spec{Target: "A-2"})))
	if !errors.Is(err, ledger.ErrLogElsewhere) || !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("a write after the log appeared: %v, want ErrLogElsewhere (unavailable)", err)
	}
	if rows, _, err := h.l.List(ctx, ledger.Query{Target: "A-2"}); err != nil || len(rows) != 0 {
		t.Fatalf("the refused write recorded %d rows (%v)", len(rows), err)
	}
	if _, _, err := other.AppendReceipt(ctx, in(h.sc.Mint(pacttest.Spec{Target: "A-3"}))); err != nil {
		t.Fatalf("the ledger keeping the log: %v", err)
	}
	if !strings.Contains(h.logs.String(), "the row store keeps a Merkle log, and this ledgerd runs without it") {
		t.Errorf("no ERROR said why writes are refused:\n%s", h.logs.String())
	}
}
