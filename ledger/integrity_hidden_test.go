package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// problems lists an integrity check's findings, one a line.
func problems(p *ledger.IntegrityPage) string {
	var out []string
	for _, f := range p.Findings {
		out = append(out, f.RowID+": "+f.Problem)
	}
	return strings.Join(out, "\n")
}

// An operator with the row store removes a row long before its class
// lets it go and leaves a tombstone, as a retention sweep would: reads
// answer "expired" and the row's leaf looks swept. The leaf's class and
// recording time say when the row could first have been swept: fsck
// finds the tombstone. A row the sweep removed when it was due is not a
// finding.
func TestIntegrityFindsATombstoneBeforeItsTime(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		tomb  func(r *ledger.Row, now time.Time) ledger.Tombstone
		wantD string
	}{
		{"swept now, due now", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: now, SweptAt: now}
		}, "before its class keeps it"},
		{"swept in the future", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RetainUntil, SweptAt: r.RetainUntil}
		}, "after the time of this check"},
		{"another class", func(r *ledger.Row, now time.Time) ledger.Tombstone {
			return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: 3, RetainUntil: now, SweptAt: now}
		}, "the leaf says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.enableLog(t, 0)
			hidden, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-1"})))
			due, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "T-2", User: "acct-2", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
			if _, err := h.l.Integrate(ctx); err != nil {
				t.Fatal(err)
			}
			h.drain(t)
			// The read-only row is swept when due: not a finding.
			h.set(due.RetainUntil.Add(time.Hour))
			if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 {
				t.Fatalf("sweep: %+v, %v", res, err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("a row swept when due:\n%s", problems(got))
			}
			// The money-moved row (18 months) goes after 90 days.
			err := h.store.Update(ctx, func(tx ledger.Tx) error {
				r, err := tx.Row(hidden.ID)
				if err != nil {
					return err
				}
				_, err = ledger.SweepRow(tx, r, tc.tomb(r, h.clock()))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			got := integrity(t, h)
			p := problems(got)
			if !strings.Contains(p, hidden.ID+": ") || !strings.Contains(p, tc.wantD) {
				t.Fatalf("findings:\n%s\nwant one on row %s with %q", p, hidden.ID, tc.wantD)
			}
		})
	}
}

// An incident closed ten months after it opened keeps its row a year
// from the close: a tombstone of the row thirteen months after it was
// recorded (past the incident period from the recording, not from the
// close) is found; the sweep at its time is not.
func TestIntegrityFindsAnIncidentRowSweptBeforeItsClosePeriod(t *testing.T) {
	ctx := context.Background()
	for _, forge := range []bool{false, true} {
		h := newHarness(t)
		h.enableLog(t, 0)
		ri := in(h.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`}))
		ri.Limits = &ledger.Limits{AmountMax: "1"}
		row, _ := h.append(t, ri)
		if row.Status != ledger.Incident {
			t.Fatalf("status %v, want INCIDENT", row.Status)
		}
		h.drain(t)
		h.set(row.RecordedAt.AddDate(0, 10, 0))
		inc, err := h.l.CloseIncident(ctx, row.IncidentID, "looked into", "admin")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.l.Integrate(ctx); err != nil {
			t.Fatal(err)
		}
		h.drain(t)
		if !forge {
			h.set(inc.RetainUntil.Add(time.Hour))
			if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 {
				t.Fatalf("sweep: %+v, %v", res, err)
			}
			if got := integrity(t, h); len(got.Findings) != 0 {
				t.Fatalf("an incident row swept when due:\n%s", problems(got))
			}
			continue
		}
		h.set(row.RecordedAt.AddDate(0, 13, 0))
		err = h.store.Update(ctx, func(tx ledger.Tx) error {
			r, err := tx.Row(row.ID)
			if err != nil {
				return err
			}
			now := h.clock()
			_, err = ledger.SweepRow(tx, r, ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: now, SweptAt: now})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		p := problems(integrity(t, h))
		if want := "closes incident " + inc.ID + " of row " + row.ID; !strings.Contains(p, want) {
			t.Fatalf("findings:\n%s\nwant one with %q", p, want)
		}
	}
}
