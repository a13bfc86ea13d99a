package ledger_test

import (
	"context"
	"errors"
	"fmt"
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

// Any writer can post rows naming any agent platform and day: an
// incident's view reads the newest MaxIncidentDayRows (here 5) of its
// platform's day and says the count is a lower bound when there are more.
func TestIncidentViewReadsABoundedNumberOfRows(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	defer ledger.SetMaxIncidentDayRows(5)()
	at := h.clock().Add(-time.Hour)
	ri := in(h.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`, At: at}))
	ri.Limits = &ledger.Limits{AmountMax: "1"}
	row, _ := h.append(t, ri)
	if row.Status != ledger.Incident {
		t.Fatalf("status %v, want INCIDENT", row.Status)
	}
	post := func(i int) {
		forged := h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("F-%d", i), User: fmt.Sprintf("acct-%d", 90000+i), At: at.Add(time.Duration(i) * time.Minute)})
		forged.ReceiptJWS = pacttest.TamperSignature(forged.ReceiptJWS)
		if r, _ := h.append(t, in(forged)); r.Agent.Platform != row.Agent.Platform {
			t.Fatalf("forged row %d is under platform %q, want %q", i, r.Agent.Platform, row.Agent.Platform)
		}
	}
	for i := 1; i <= 4; i++ {
		post(i)
	}
	v, err := h.l.Incident(ctx, row.IncidentID)
	if err != nil {
		t.Fatal(err)
	}
	if v.SameDayN != 4 || v.SameDayCut || len(v.SameDay) != 4 {
		t.Fatalf("5 rows that day: %d others (%d listed), cut %v; want 4, not cut", v.SameDayN, len(v.SameDay), v.SameDayCut)
	}
	for i := 5; i <= 7; i++ {
		post(i)
	}
	if v, err = h.l.Incident(ctx, row.IncidentID); err != nil {
		t.Fatal(err)
	}
	if v.SameDayN != 5 || !v.SameDayCut || len(v.SameDay) != 5 || v.Row.ID != row.ID {
		t.Fatalf("8 rows that day: %d others (%d listed), cut %v; want the newest 5 read, cut", v.SameDayN, len(v.SameDay), v.SameDayCut)
	}
}
