package postgres_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/postgres"
)

// TestMigrationFillsDrillPool: migrating a database of schema version 2
// (no drill pool) puts exactly the stored rows ledger.Drillable holds
// for in the pool, and rows written after it get positions of their own.
func TestMigrationFillsDrillPool(t *testing.T) {
	dsn := dbAtVersion(t, 2)

	kept, duplicate, readOnly, refusal, notKept, incident := row("kept"), row("duplicate"), row("read only"), row("refusal"), row("not kept"), row("incident")
	kept.Class = retention.MoneyMoved
	duplicate.Class, duplicate.Status = retention.MoneyMoved, ledger.Duplicate
	readOnly.Class, readOnly.EvidenceNotKept = retention.ReadOnly, "read-only class"
	refusal.Kind, refusal.Class, refusal.Status = ledger.KindRefusal, retention.Refused, ledger.Unauthorized
	notKept.Class, notKept.EvidenceNotKept = retention.AccountChanged, "not kept"
	incident.Class, incident.Status = retention.Incident, ledger.Incident
	all := []*ledger.Row{kept, duplicate, readOnly, refusal, notKept, incident}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, r := range all {
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), `INSERT INTO ledger_rows (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body)
VALUES ($1, $2, '', '', $3, $4, 0, NULL, '', $5)`, r.ID, r.Principal, int16(r.Status), int16(r.Class), body); err != nil {
			t.Fatal(err)
		}
	}

	if _, _, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn}); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	later := row("later")
	later.Class = retention.AccountChanged
	if err := s.Update(t.Context(), func(tx ledger.Tx) error { return ledger.AddRow(tx, later) }); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range append(all, later) {
		if ledger.Drillable(r) {
			want = append(want, r.ID)
		}
	}
	slices.Sort(want)
	var got []string
	err = s.View(t.Context(), func(tx ledger.Tx) error {
		var positions []uint64
		if err := tx.DrillPoolPositions(func(p uint64) { positions = append(positions, p) }); err != nil {
			return err
		}
		rows, err := tx.DrillPoolRows(positions)
		for _, r := range rows {
			got = append(got, r.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if len(want) != 3 || !slices.Equal(got, want) {
		t.Fatalf("drill pool after the migration and one write: %v, want the 3 drillable rows %v", got, want)
	}
}
