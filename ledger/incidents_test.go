package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// TestClosedIncidentKeepsTheRowAsLongAsItsActions: an incident may rest on
// what the writer (not trusted) sent, here an amountMax the genuine,
// verified money-moved receipt exceeds. Closed the next day, the row is
// still kept for its class's 18 months; closed late, for close + the
// incident period.
func TestClosedIncidentKeepsTheRowAsLongAsItsActions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		closeIn  time.Duration
		wantFrom func(p retention.Policy, row *ledger.Row, closedAt time.Time) time.Time
	}{
		{"closed the next day", 24 * time.Hour, func(p retention.Policy, row *ledger.Row, _ time.Time) time.Time {
			return p.RetainUntil(retention.MoneyMoved, row.RetentionStart())
		}},
		{"closed after ten months", 300 * 24 * time.Hour, func(p retention.Policy, _ *ledger.Row, closedAt time.Time) time.Time {
			return p.Periods[retention.Incident].After(closedAt)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			ri := in(h.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`}))
			ri.Limits = &ledger.Limits{AmountMax: "1"}
			row, _ := h.append(t, ri)
			if row.Status != ledger.Incident {
				t.Fatalf("status %v, want INCIDENT", row.Status)
			}
			h.drain(t)
			closedAt := h.clock().Add(tc.closeIn)
			h.set(closedAt)
			inc, err := h.l.CloseIncident(ctx, row.IncidentID, "the limits were wrong", "admin")
			if err != nil {
				t.Fatal(err)
			}
			h.drain(t)
			want := tc.wantFrom(h.l.Policy(), row, closedAt)
			got, err := h.l.Get(ctx, row.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.RetainUntil.Equal(want) || !inc.RetainUntil.Equal(want) {
				t.Fatalf("row retained until %v, incident says %v; want %v", got.RetainUntil, inc.RetainUntil, want)
			}
			for _, c := range []struct {
				at    time.Time
				swept bool
			}{{want.Add(-time.Hour), false}, {want.Add(time.Hour), true}} {
				h.set(c.at)
				res, err := h.l.Sweep(ctx, false)
				if err != nil {
					t.Fatal(err)
				}
				if _, swept := ids(res.Swept)[row.ID]; swept != c.swept {
					t.Fatalf("sweep at %v: swept %v, want %v (kept: %v)", c.at, swept, c.swept, ids(res.Kept))
				}
			}
			if _, err := h.l.Get(ctx, row.ID); !errors.Is(err, ledger.ErrExpired) {
				t.Fatalf("after its retention: %v", err)
			}
		})
	}
}
