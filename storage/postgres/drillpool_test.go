package postgres_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/localdir"
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

// TestIntegrityChecksTheDrillPool: on PostgreSQL the drill pool is a
// column of the row, which whoever can write the database can clear or
// set. fsck finds a row the monthly drill may sample whose position was
// cleared (no drill can pick it), and a read-only turn given one; so does
// the monthly drill's read of the rows against the pool.
func TestIntegrityChecksTheDrillPool(t *testing.T) {
	dsn := migrated(t)
	sc, a, _, _ := replicasOn(t, dsn, func(dir *localdir.Store) *localdir.Store { return dir })
	var rows []*ledger.Row
	for _, spec := range []pacttest.Spec{
		{Target: "P-1"},
		{Target: "P-2", User: "acct-2"},
		{Target: "P-3", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}},
	} {
		r := sc.Mint(spec)
		row, _, err := a.l.AppendReceipt(t.Context(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	fsck := func() []ledger.Finding {
		t.Helper()
		var all []ledger.Finding
		for token := ""; ; {
			p, err := a.l.CheckIntegrity(t.Context(), 2, token)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, p.Findings...)
			if token = p.Next; token == "" {
				return all
			}
		}
	}
	if got := fsck(); len(got) != 0 {
		t.Fatalf("clean ledger: %+v", got)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for sql, id := range map[string]string{
		"UPDATE ledger_rows SET pool_seq = NULL WHERE id = $1":                            rows[1].ID,
		"UPDATE ledger_rows SET pool_seq = nextval('ledger_rows_pool_seq') WHERE id = $1": rows[2].ID,
	} {
		if _, err := conn.Exec(t.Context(), sql, id); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	want := map[string]string{
		rows[1].ID: "the monthly drill may sample the row, but the drill pool does not hold it",
		rows[2].ID: "the drill pool holds the row, but the monthly drill may not sample it (a read-only turn)",
	}
	got := fsck()
	for _, f := range got {
		if w, ok := want[f.RowID]; ok && strings.Contains(f.Problem, w) {
			delete(want, f.RowID)
			continue
		}
		t.Errorf("finding %s: %s", f.RowID, f.Problem)
	}
	for id, w := range want {
		t.Errorf("no finding on row %s with %q", id, w)
	}

	// The monthly drill's read of a row store this small finds both.
	c, err := a.l.CheckDrillPool(t.Context(), 1000, rand.IntN)
	if err != nil {
		t.Fatal(err)
	}
	wantCheck := &ledger.DrillPoolCheck{Pool: 2, Read: 3, All: true, Eligible: 2, Missing: []string{rows[1].ID},
		Ineligible: []ledger.IneligibleRow{{ID: rows[2].ID, Why: "a read-only turn"}}}
	if !reflect.DeepEqual(c, wantCheck) {
		t.Errorf("CheckDrillPool: %+v, want %+v", c, wantCheck)
	}
}
