package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// fsck's check of the lookups' columns: each row's principal, grant,
// agent, status, class, times, counts and targets are kept beside its
// body, which a read by id serves; an edit of one of them (or of the
// row's targets) hides the row from the lookups of its value while a
// read by id shows it as it was, and is reported by its column. An
// honest store, its rows' disputes and retention changed through the
// ledger, has nothing to report.
func TestCheckIndexesComparesColumnsWithTheBody(t *testing.T) {
	dsn := migrated(t)
	s := open(t, postgres.Config{DSN: dsn})
	rows := []*ledger.Row{row("edited principal"), row("targets gone"), row("moved in time"), row("body of another"), row("honest")}
	for _, r := range rows {
		r.Actions = []verifier.RowAction{{Tool: "cancel_order", Target: "A-1"}, {Tool: "cancel_order", Target: "A-2"}}
	}
	if err := s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, r := range rows {
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		if err := tx.UpdateDispute(rows[4].ID, ledger.DisputeOpen, nil); err != nil {
			return err
		}
		return tx.UpdateRetention(rows[4].ID, time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC))
	}); err != nil {
		t.Fatal(err)
	}
	check := func() []ledger.IndexFinding {
		t.Helper()
		got, err := storetest.IndexFindings(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := check(); len(got) != 0 {
		t.Fatalf("an honest store: %+v", got)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, e := range []struct {
		sql string
		id  string
	}{
		{"UPDATE ledger_rows SET principal = 'user-1 ' WHERE id = $1", rows[0].ID},
		{"DELETE FROM row_targets WHERE row_id = $1 AND target = 'A-2'", rows[1].ID},
		{"UPDATE ledger_rows SET issued_ns = 0 WHERE id = $1", rows[2].ID},
		{"UPDATE ledger_rows SET body = (SELECT body FROM ledger_rows WHERE id = '" + rows[4].ID + "') WHERE id = $1", rows[3].ID},
	} {
		if _, err := conn.Exec(t.Context(), e.sql, e.id); err != nil {
			t.Fatal(err)
		}
	}
	want := []ledger.IndexFinding{
		{RowID: rows[0].ID, Index: "ledger_rows.principal", Problem: ledger.IndexMissingEntry},
		{RowID: rows[1].ID, Index: "row_targets", Problem: ledger.IndexMissingEntry},
		{RowID: rows[2].ID, Index: "ledger_rows.issued_ns", Problem: ledger.IndexMissingEntry},
		{RowID: rows[3].ID, Index: "ledger_rows.id", Problem: ledger.IndexOtherRecord},
	}
	got := check()
	slices.SortFunc(got, func(a, b ledger.IndexFinding) int {
		return slices.Index(rowsOrder(rows), a.RowID) - slices.Index(rowsOrder(rows), b.RowID)
	})
	if !slices.Equal(got, want) {
		t.Errorf("CheckIndexes after the edits:\n got %+v\nwant %+v", got, want)
	}
}

func rowsOrder(rows []*ledger.Row) []string {
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}
