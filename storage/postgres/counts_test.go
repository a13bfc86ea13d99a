package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// TestBackfillOfTheRowsThatCount: a database of schema version 8 holding
// rows is migrated to version 9, whose backfill marks the rows stored
// before that count toward their grant's countMax. Stopped part way, it
// leaves a database ledgerd refuses (ErrBackfillUnfinished); the next
// migrate continues it, and then exactly the receipts whose signature
// passed are marked, and listed as their grant's signed rows.
func TestBackfillOfTheRowsThatCount(t *testing.T) {
	dsn := migrated(t)
	var rows []*ledger.Row
	signed := 0
	for i := range 50 {
		r := row(fmt.Sprint("backfill ", i))
		r.IssuedAt = r.IssuedAt.Add(time.Duration(i) * time.Second)
		result := verifier.Fail
		if i%4 == 0 {
			result = verifier.Pass
		}
		r.Verifier.Checks = []verifier.Check{{Name: verifier.CheckReceiptSignature, Result: result}}
		if i == 8 {
			r.Kind = ledger.KindRefusal
		}
		if r.ReceiptVerified() {
			signed++
		}
		rows = append(rows, r)
	}
	s := open(t, postgres.Config{DSN: dsn})
	if err := s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, r := range rows {
			if err := tx.CreateRow(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Back to version 8, as an earlier ledgerd left the database.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"DROP TABLE ledger_backfill",
		"DROP INDEX ledger_rows_counts_by_grant",
		"ALTER TABLE ledger_rows DROP COLUMN counts",
		"DELETE FROM ledger_schema_version WHERE version_id = 9",
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// One signed row's body damaged: the backfill leaves it out of the
	// count and goes on, rather than stop the upgrade for good.
	damaged := rows[4]
	if _, err := conn.Exec(t.Context(), "UPDATE ledger_rows SET body = '\\x00ff'::bytea WHERE id = $1", damaged.ID); err != nil {
		t.Fatal(err)
	}
	signed--
	stop := errors.New("stopped")
	batches := 0
	restore := postgres.SetBackfillHooks(7, func() error {
		if batches++; batches == 3 {
			return stop
		}
		return nil
	})
	from, to, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn})
	restore()
	if !errors.Is(err, stop) || from != 8 || to != 9 {
		t.Fatalf("the migration stopped in its backfill: %d -> %d, %v; want 8 -> 9 and the stop", from, to, err)
	}
	if n := sqlValue[int64](t, dsn, "SELECT count(*) FROM ledger_rows WHERE counts"); n == 0 || n >= int64(signed) {
		t.Fatalf("%d rows marked after three batches of seven, want some of the %d that count", n, signed)
	}
	if _, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn}); !errors.Is(err, postgres.ErrBackfillUnfinished) {
		t.Fatalf("Open with the backfill unfinished: %v, want ErrBackfillUnfinished", err)
	}
	restore = postgres.SetBackfillHooks(7, nil)
	from, to, err = postgres.Migrate(t.Context(), postgres.Config{DSN: dsn})
	restore()
	if err != nil || from != 9 || to != 9 {
		t.Fatalf("the migration continued: %d -> %d, %v; want 9 -> 9", from, to, err)
	}
	if n := sqlValue[int64](t, dsn, "SELECT count(*) FROM ledger_backfill"); n != 0 {
		t.Errorf("%d records of the backfill left, want none", n)
	}
	for _, r := range rows {
		if got := sqlValue[bool](t, dsn, "SELECT counts FROM ledger_rows WHERE id = $1", r.ID); got != (r.ReceiptVerified() && r != damaged) {
			t.Errorf("row %s (kind %d, %v): counts %v, want %v", r.ID[:8], r.Kind, r.Verifier.Checks[0].Result, got, r.ReceiptVerified())
		}
	}
	s = open(t, postgres.Config{DSN: dsn})
	var listed []*ledger.Row
	if _, err := conn.Exec(t.Context(), "DELETE FROM ledger_rows WHERE id = $1", damaged.ID); err != nil {
		t.Fatal(err) // a row that does not decode cannot be listed
	}
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		var err error
		listed, _, err = tx.List(ledger.Query{GrantID: "grant-1", Signed: true, PageSize: 100})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != signed {
		t.Errorf("the grant's signed rows after the backfill: %d, want %d", len(listed), signed)
	}
	for _, r := range listed {
		if !r.ReceiptVerified() {
			t.Errorf("row %s listed as signed: %+v", r.ID[:8], r.Verifier.Checks)
		}
	}
	// A database migrated with no rows needs no backfill.
	if n := sqlValue[int64](t, migrated(t), "SELECT count(*) FROM ledger_backfill"); n != 0 {
		t.Errorf("a migrated empty database holds %d records of the backfill, want none", n)
	}
}
