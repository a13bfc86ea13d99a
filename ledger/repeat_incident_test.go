package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// incidentCount returns the number of incidents the ledger holds.
func (h *harness) incidentCount(t *testing.T) int {
	t.Helper()
	incs, next, err := h.l.Incidents(context.Background(), 1000, "")
	if err != nil || next != "" {
		t.Fatalf("incidents: %v, next %q", err, next)
	}
	return len(incs)
}

// A writer posts a customer's real receipt again and again, each time with
// other limits beside it, or another action log. Every repeat fails a
// check of rule 2, and each used to open an incident of its own, holding
// the agent platform's rows of that day and the grant's rows for a year
// after its close: one signed turn made any number of them. A receipt
// now opens one: the first repeat that fails, when its first row opened
// none; the next repeats are DUPLICATE rows, their failed checks beside
// them.
func TestRepeatsOfAReceiptOpenOneIncident(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first posts the receipt's first row and returns its status.
		first func(h *harness, real *pacttest.Receipt, t *testing.T) ledger.Status
		// fromRepeats is the incidents the repeats open.
		fromRepeats int
	}{
		{"first row authorized", func(h *harness, real *pacttest.Receipt, t *testing.T) ledger.Status {
			row, _ := h.append(t, in(real))
			return row.Status
		}, 1},
		{"first row an incident", func(h *harness, real *pacttest.Receipt, t *testing.T) ledger.Status {
			ri := in(real)
			ri.Limits = &ledger.Limits{AmountMax: "1"}
			row, _ := h.append(t, ri)
			return row.Status
		}, 0},
		// The receipt posted first beside another grant's token: its
		// first row is UNAUTHORIZED, and the repeats that follow with the
		// right token are measured against it.
		{"first row unauthorized", func(h *harness, real *pacttest.Receipt, t *testing.T) ledger.Status {
			other := h.sc.Mint(pacttest.Spec{Target: "A-9999", GrantID: "grant-other"})
			ri := in(real)
			ri.DelegationToken = other.DelegationToken
			row, _ := h.append(t, ri)
			return row.Status
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			real := h.sc.Mint(pacttest.Spec{Target: "A-5531", ArgsJSON: `{"order":"A-5531","amount":10}`})
			status := tc.first(h, real, t)
			before := h.incidentCount(t)
			var opened []string
			for i := range 12 {
				ri := in(real)
				if i%2 == 0 {
					ri.Limits = &ledger.Limits{AmountMax: fmt.Sprintf("0.%02d", i+1)}
				} else {
					ri.Actions = []verifier.Action{{Tool: real.Actions[0].Tool, Target: "A-5531", ArgsJSON: fmt.Sprintf(`{"order":"A-5531","amount":%d}`, 100+i)}}
				}
				row, o := h.append(t, ri)
				if o != ledger.DuplicateRecorded || row.Verifier.DuplicateOf == "" {
					t.Fatalf("repeat %d: outcome %v, duplicate of %q; want a duplicate", i, o, row.Verifier.DuplicateOf)
				}
				failed := check(row, verifier.CheckWithinLimits).Result == verifier.Fail || check(row, verifier.CheckArgsHash).Result == verifier.Fail
				if !failed {
					t.Fatalf("repeat %d: no check of rule 2 failed: %+v", i, row.Verifier.Checks)
				}
				switch row.Status {
				case ledger.Incident:
					opened = append(opened, row.IncidentID)
				case ledger.Duplicate:
					if d := check(row, verifier.CheckDuplicate).Detail; !strings.Contains(d, "opened its incident") {
						t.Errorf("repeat %d: duplicate check %q; want it to say the receipt's incident was opened before", i, d)
					}
					if row.IncidentID != "" {
						t.Errorf("repeat %d: a DUPLICATE row names incident %s", i, row.IncidentID)
					}
				default:
					t.Fatalf("repeat %d: status %v", i, row.Status)
				}
			}
			if got := h.incidentCount(t) - before; got != tc.fromRepeats || len(opened) != tc.fromRepeats {
				t.Fatalf("first row %v: its 12 repeats opened %d incidents (%v); want %d", status, got, opened, tc.fromRepeats)
			}
			// fsck reads a DUPLICATE that failed a check of rule 2 as
			// written, not as an edited INCIDENT.
			h.drain(t)
			page, err := h.l.CheckIntegrity(context.Background(), 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := problems(page); got != "" {
				t.Errorf("fsck found:\n%s", got)
			}
		})
	}
}

// The repeat that opened its receipt's incident is counted under the
// receipt's first row until it is swept: then the counter goes, so that
// nothing is kept for it, and a later repeat may open the receipt's
// incident again.
func TestTheRepeatIncidentCounterGoesWithItsRow(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	real := h.sc.Mint(pacttest.Spec{Target: "A-5531", ArgsJSON: `{"order":"A-5531","amount":10}`})
	first, _ := h.append(t, in(real))
	ri := in(real)
	ri.Limits = &ledger.Limits{AmountMax: "1"}
	repeat, _ := h.append(t, ri)
	if repeat.Status != ledger.Incident {
		t.Fatalf("repeat: %v", repeat.Status)
	}
	counted := func() int {
		t.Helper()
		var n int
		if err := h.store.View(ctx, func(tx ledger.Tx) error {
			var err error
			n, err = tx.Count(ledger.RefRepeatIncident, first.ID, 0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := counted(); n != 1 {
		t.Fatalf("counter under the first row: %d, want 1", n)
	}
	h.drain(t)
	inc, err := h.l.CloseIncident(ctx, repeat.IncidentID, "the limits were the writer's", "admin")
	if err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	res := h.sweepAt(t, inc.RetainUntil.Add(time.Hour))
	if _, swept := ids(res.Swept)[repeat.ID]; !swept {
		t.Fatalf("the repeat was not swept: %+v", res)
	}
	if n := counted(); n != 0 {
		t.Fatalf("counter under the first row after its repeat was swept: %d, want 0", n)
	}
}
