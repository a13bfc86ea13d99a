package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/retention"
)

// TestIncidentRetentionOnPostgres: what an incident keeps, with the rows
// on PostgreSQL. A money-moved row that is an incident by the writer's
// limits alone, closed the next day, is kept its class's 18 months; an
// open countMax incident holds the row under its grant that it counted,
// recorded on the day before.
func TestIncidentRetentionOnPostgres(t *testing.T) {
	t.Run("closed incident keeps the row as long as its actions", func(t *testing.T) {
		w := newWorld(t)
		r := w.replica(t, "a")
		r.set(time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC))
		in := input(w.sc.Mint(pacttest.Spec{Target: "A-7001", ArgsJSON: `{"order":"A-7001","amount":10}`}))
		in.Limits = &ledger.Limits{AmountMax: "1"}
		row, _, err := r.l.AppendReceipt(t.Context(), in)
		if err != nil || row.Status != ledger.Incident {
			t.Fatalf("append: %v, %v; want an incident", row, err)
		}
		if err := storetest.DrainOutbox(t.Context(), r.l); err != nil {
			t.Fatal(err)
		}
		r.set(row.RecordedAt.Add(24 * time.Hour))
		if _, err := r.l.CloseIncident(t.Context(), row.IncidentID, "the limits were wrong", "admin"); err != nil {
			t.Fatal(err)
		}
		if err := storetest.DrainOutbox(t.Context(), r.l); err != nil {
			t.Fatal(err)
		}
		want := r.l.Policy().RetainUntil(retention.MoneyMoved, row.RetentionStart())
		r.set(want.Add(-time.Hour))
		if _, err := r.l.Sweep(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		got, err := r.l.Get(t.Context(), row.ID)
		if err != nil {
			t.Fatalf("an hour before its money-moved retention ends: %v", err)
		}
		if !got.RetainUntil.Equal(want) {
			t.Fatalf("retained until %v, want %v", got.RetainUntil, want)
		}
	})
	t.Run("open incident holds the rows of its grant", func(t *testing.T) {
		w := newWorld(t)
		r := w.replica(t, "a")
		midnight := time.Date(2026, 10, 8, 0, 0, 0, 0, time.UTC)
		appendAt := func(at time.Time, target string) *ledger.Row {
			t.Helper()
			r.set(at.Add(time.Second))
			in := input(w.sc.Mint(pacttest.Spec{GrantID: "a2agrant_MIDNIGHT", Target: target, At: at}))
			in.Limits = &ledger.Limits{CountMax: 1}
			row, _, err := r.l.AppendReceipt(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			return row
		}
		counted := appendAt(midnight.Add(-10*time.Second), "A-1")
		over := appendAt(midnight.Add(10*time.Second), "A-2")
		if counted.Status != ledger.Authorized || over.Status != ledger.Incident {
			t.Fatalf("statuses %v, %v; want AUTHORIZED, INCIDENT", counted.Status, over.Status)
		}
		if err := storetest.DrainOutbox(t.Context(), r.l); err != nil {
			t.Fatal(err)
		}
		r.set(counted.RetainUntil.Add(time.Hour))
		if _, err := r.l.Sweep(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		if _, err := r.l.Get(t.Context(), counted.ID); errors.Is(err, ledger.ErrExpired) {
			t.Fatalf("the row incident %s counted was swept while it is open", over.IncidentID)
		}
	})
}
