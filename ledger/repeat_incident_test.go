package ledger_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

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
				if i%3 == 2 {
					// The receipt's other ECDSA encoding is the same
					// receipt (docs/design/012).
					ri.ReceiptJWS = pacttest.MalleateES256(real.ReceiptJWS)
				}
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

// A receipt whose repeat opened its incident opens none again, whichever
// of its encodings is posted, once that incident is closed too.
func TestAReceiptsIncidentIsOpenedOnceForGood(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	real := h.sc.Mint(pacttest.Spec{Target: "A-5531", ArgsJSON: `{"order":"A-5531","amount":10}`})
	h.append(t, in(real))
	repeat := func(jws, max string) *ledger.Row {
		ri := in(real)
		ri.ReceiptJWS, ri.Limits = jws, &ledger.Limits{AmountMax: max}
		row, _ := h.append(t, ri)
		return row
	}
	twin := pacttest.MalleateES256(real.ReceiptJWS)
	opened := repeat(twin, "1")
	if opened.Status != ledger.Incident {
		t.Fatalf("the first failing repeat: %v", opened.Status)
	}
	h.drain(t)
	if _, err := h.l.CloseIncident(ctx, opened.IncidentID, "the limits were the writer's", "admin"); err != nil {
		t.Fatal(err)
	}
	for _, jws := range []string{real.ReceiptJWS, twin} {
		if row := repeat(jws, "2"); row.Status != ledger.Duplicate {
			t.Fatalf("a repeat after the receipt's incident was closed: %v %s; want DUPLICATE", row.Status, row.IncidentID)
		}
	}
}

// A request JWT the Provider served two turns on: the second receipt is
// another action, not a repeat of the first (API.md: a DUPLICATE naming
// it), and when it fails a check of rule 2 it opens an incident of its
// own, whatever the first receipt's status: a writer making the first an
// incident with made-up limits does not hide the second's.
func TestASecondReceiptOnOneRequestJWTOpensItsOwnIncident(t *testing.T) {
	h := newHarness(t)
	a := h.sc.Mint(pacttest.Spec{Target: "A-1", ArgsJSON: `{"order":"A-1","amount":10}`})
	ri := in(a)
	ri.Limits = &ledger.Limits{AmountMax: "1"}
	if first, _ := h.append(t, ri); first.Status != ledger.Incident {
		t.Fatalf("first receipt: %v", first.Status)
	}
	b := *a
	b.Claims = maps.Clone(a.Claims)
	b.Claims["actions"] = []map[string]any{{"tool": "cancel_order", "argsHash": verifier.ArgsHash(`{"order":"B-2"}`)}}
	b.Claims["scopesUsed"] = []string{"orders:cancel", "payments:refund"}
	b.ReceiptJWS = h.sc.Brand.Key.Sign(b.Claims)
	b.Actions = []verifier.Action{{Tool: "cancel_order", Target: "B-2", ArgsJSON: `{"order":"B-2"}`}}
	row, o := h.append(t, in(&b))
	if o != ledger.DuplicateRecorded || check(row, verifier.CheckScopesWithin).Result != verifier.Fail {
		t.Fatalf("second receipt: %v, %+v", o, row.Verifier.Checks)
	}
	if row.Status != ledger.Incident || row.IncidentID == "" {
		t.Fatalf("a second action past its grant's scopes on a reused request JWT: %v %q; want an INCIDENT of its own", row.Status, row.IncidentID)
	}
}
