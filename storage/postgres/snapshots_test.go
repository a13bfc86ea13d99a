package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// jwks returns a JWKS snapshot named by s.
func jwks(s string) verifier.Snapshot {
	return verifier.NewSnapshot("https://brand.example/jwks.json", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), []byte(`{"keys":[],"n":"`+s+`"}`))
}

// stored is a row naming snapshot snap, with the snapshot stored and its
// object recorded as uploaded, committed in s.
func stored(t *testing.T, s ledger.Store, name string, snap verifier.Snapshot) *ledger.Row {
	t.Helper()
	r := row(name)
	r.BrandKey.JWKSSnapshot = snap.ID
	err := s.Update(t.Context(), func(tx ledger.Tx) error {
		if err := ledger.AddRow(tx, r); err != nil {
			return err
		}
		if _, err := tx.PutSnapshot(snap); err != nil {
			return err
		}
		return tx.SetObject(ledger.SnapshotKey(snap.ID), ledger.Location{Store: "s3", Bucket: "evidence", Key: ledger.SnapshotKey(snap.ID), VersionID: "v1", Uploaded: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeNaming writes new row r naming snap the way the ledger's commitRow
// does: the row first (AddRow), then the snapshot (PutSnapshot), its
// recorded retention and, when it was new, its outbox entry. It returns
// whether the snapshot was new.
func writeNaming(tx ledger.Tx, r *ledger.Row, snap verifier.Snapshot) (bool, error) {
	r.BrandKey.JWKSSnapshot = snap.ID
	if err := ledger.AddRow(tx, r); err != nil {
		return false, err
	}
	isNew, err := tx.PutSnapshot(snap)
	if err != nil {
		return false, err
	}
	if _, err := tx.SnapshotRetain(snap.ID); err != nil {
		return false, err
	}
	if !isNew {
		return false, nil
	}
	retain := r.IssuedAt.Add(540 * 24 * time.Hour)
	if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectJWKS, Ref: snap.ID, Key: ledger.SnapshotKey(snap.ID), RetainUntil: retain}, r.IssuedAt); err != nil {
		return false, err
	}
	return true, tx.SetSnapshotRetain(snap.ID, retain)
}

// sweepRow sweeps r in tx as the sweeper does and returns the keys of
// what became deletable.
func sweepRow(tx ledger.Tx, r *ledger.Row) ([]string, error) {
	locs, err := ledger.SweepRow(tx, r, ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, SweptAt: r.RetainUntil})
	var keys []string
	for _, l := range locs {
		keys = append(keys, l.Key)
	}
	return keys, err
}

// afterRace checks what a sweep of the last row naming snap and a write
// of row w naming it left once both committed: w is stored, the snapshot
// is stored and in use, and it was put again (new, and queued for upload)
// exactly when the sweep deleted it.
func afterRace(t *testing.T, s ledger.Store, w *ledger.Row, snap verifier.Snapshot, swept []string, isNew bool) {
	t.Helper()
	deleted := slices.Contains(swept, ledger.SnapshotKey(snap.ID))
	if deleted != isNew {
		t.Errorf("the sweep deleted the snapshot: %v; the writer found it new: %v; want both or neither", deleted, isNew)
	}
	err := s.View(t.Context(), func(tx ledger.Tx) error {
		if _, err := tx.Row(w.ID); err != nil {
			return fmt.Errorf("the writer's row: %w", err)
		}
		if _, err := tx.Snapshot(snap.ID); err != nil {
			t.Errorf("a committed row names snapshot %.8s, which is gone: %v", snap.ID, err)
		}
		if used, err := tx.SnapshotInUse(snap.ID); err != nil || !used {
			t.Errorf("SnapshotInUse(%.8s) = %v, %v; want true", snap.ID, used, err)
		}
		out, err := tx.Outbox(1000)
		if err != nil {
			return err
		}
		queued := slices.ContainsFunc(out, func(e ledger.OutboxEntry) bool { return e.Key == ledger.SnapshotKey(snap.ID) })
		if queued != isNew {
			t.Errorf("snapshot %.8s queued for upload: %v, want %v", snap.ID, queued, isNew)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitForLockWait polls until a session on the database at dsn waits for
// a lock.
func waitForLockWait(t *testing.T, dsn, what string) {
	t.Helper()
	poll(t, what, 20*time.Second, func() bool {
		return sqlValue[int64](t, dsn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'") > 0
	})
}

// TestSweepBeforeWriter: a sweep has found a snapshot unused and deleted
// it, and has not committed yet; a writer on another replica links a new
// row to the snapshot and waits in PutSnapshot until the sweep commits,
// then stores the snapshot again and reports it new.
func TestSweepBeforeWriter(t *testing.T) {
	dsn := migrated(t)
	sweeper, writer := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})
	snap := jwks("sweep first")
	old := stored(t, sweeper, "old row", snap)

	deleted, release := make(chan struct{}), make(chan struct{})
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo) // before the stores close, also when the test fails
	var swept []string
	sweepDone := make(chan error, 1)
	go func() {
		first := true
		sweepDone <- sweeper.Update(t.Context(), func(tx ledger.Tx) error {
			var err error
			if swept, err = sweepRow(tx, old); err != nil {
				return err
			}
			if _, err := tx.Outbox(1); err != nil { // sends what SweepRow queued
				return err
			}
			if first {
				first = false
				close(deleted)
				<-release
			}
			return nil
		})
	}()
	<-deleted
	w := row("new row")
	var isNew bool
	writeDone := make(chan error, 1)
	go func() {
		writeDone <- writer.Update(t.Context(), func(tx ledger.Tx) error {
			var err error
			isNew, err = writeNaming(tx, w, snap)
			return err
		})
	}()
	waitForLockWait(t, dsn, "the writer waits for the sweep's lock on the snapshot")
	letGo()
	if err := <-sweepDone; err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if err := <-writeDone; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !slices.Contains(swept, ledger.SnapshotKey(snap.ID)) {
		t.Fatalf("the sweep kept the snapshot (deletable %v): the case did not happen", swept)
	}
	afterRace(t, writer, w, snap, swept, isNew)
}

// TestWriterBeforeSweep: a writer has linked a new row to a snapshot and
// locked it (PutSnapshot), and has not committed yet; a sweep of the
// snapshot's last other row waits in SnapshotInUse until the writer
// commits, then sees the new row and keeps the snapshot.
func TestWriterBeforeSweep(t *testing.T) {
	dsn := migrated(t)
	sweeper, writer := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})
	snap := jwks("writer first")
	old := stored(t, sweeper, "old row", snap)

	locked, release := make(chan struct{}), make(chan struct{})
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo) // before the stores close, also when the test fails
	w := row("new row")
	var isNew bool
	writeDone := make(chan error, 1)
	go func() {
		first := true
		writeDone <- writer.Update(t.Context(), func(tx ledger.Tx) error {
			var err error
			if isNew, err = writeNaming(tx, w, snap); err != nil {
				return err
			}
			if first {
				first = false
				close(locked)
				<-release
			}
			return nil
		})
	}()
	<-locked
	var swept []string
	sweepDone := make(chan error, 1)
	go func() {
		sweepDone <- sweeper.Update(t.Context(), func(tx ledger.Tx) error {
			var err error
			swept, err = sweepRow(tx, old)
			return err
		})
	}()
	waitForLockWait(t, dsn, "the sweep waits for the writer's lock on the snapshot")
	letGo()
	if err := <-writeDone; err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := <-sweepDone; err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if isNew {
		t.Errorf("the writer found the snapshot new; it was stored")
	}
	afterRace(t, writer, w, snap, swept, isNew)
}

// TestSweepRacesWriter runs a sweep of the last row naming a snapshot and
// a write naming it, on two replicas at once, many times: whichever wins,
// no committed row names a missing snapshot, and the snapshot was put
// again exactly when the sweep deleted it.
func TestSweepRacesWriter(t *testing.T) {
	dsn := migrated(t)
	sweeper, writer := open(t, postgres.Config{DSN: dsn}), open(t, postgres.Config{DSN: dsn})
	deadline := time.Now().Add(8 * time.Second)
	outcomes := map[bool]int{}
	for i := 0; i < 400 && (i < 20 || time.Now().Before(deadline)); i++ {
		snap := jwks(fmt.Sprintf("race %d", i))
		old := stored(t, sweeper, fmt.Sprintf("old row %d", i), snap)
		w := row(fmt.Sprintf("new row %d", i))
		start := make(chan struct{})
		var swept []string
		var isNew bool
		errs := make(chan error, 2)
		go func() {
			<-start
			errs <- sweeper.Update(t.Context(), func(tx ledger.Tx) error {
				var err error
				swept, err = sweepRow(tx, old)
				return err
			})
		}()
		go func() {
			<-start
			errs <- writer.Update(t.Context(), func(tx ledger.Tx) error {
				var err error
				isNew, err = writeNaming(tx, w, snap)
				return err
			})
		}()
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("race %d: %v", i, err)
			}
		}
		afterRace(t, writer, w, snap, swept, isNew)
		if t.Failed() {
			t.Fatalf("race %d failed", i)
		}
		outcomes[isNew]++
	}
	t.Logf("races: %d kept the snapshot, %d deleted it and the writer put it again", outcomes[false], outcomes[true])
}

// dbAtVersion creates a database whose schema is at version, as an
// earlier version of the store left it, and returns its DSN.
func dbAtVersion(t *testing.T, version int64) string {
	t.Helper()
	dsn := pgtest.CreateDB(t)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("migrations"),
		goose.WithTableName("ledger_schema_version"), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestMigrationLinksStoredRows: migrating a database of schema version 1
// (snapshot reference counters, no links) links every stored row to the
// snapshots its body names and drops the counters, leaving other
// counters; the sweeper's rule then keeps a snapshot a remaining row names.
func TestMigrationLinksStoredRows(t *testing.T) {
	dsn := dbAtVersion(t, 1)

	s1, s2, s3 := jwks("one"), jwks("two"), jwks("three")
	r1, r2, r3, r4 := row("row 1"), row("row 2"), row("row 3"), row("row 4")
	r1.BrandKey.JWKSSnapshot = s1.ID
	r2.BrandKey.JWKSSnapshot, r2.Agent.JWKSSnapshot = s1.ID, s2.ID
	r3.BrandKey.JWKSSnapshot, r3.Agent.JWKSSnapshot = s3.ID, s3.ID
	// r4 names none.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, r := range []*ledger.Row{r1, r2, r3, r4} {
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO ledger_rows (id, principal, grant_id, agent, status, class, issued_ns, retain_ns, request_jwt, body)
VALUES ($1, $2, '', '', 1, 1, 0, NULL, '', $3)`, r.ID, r.Principal, body)
	}
	for _, snap := range []verifier.Snapshot{s1, s2, s3} {
		body, err := json.Marshal(snap)
		if err != nil {
			t.Fatal(err)
		}
		exec("INSERT INTO snapshots (id, body) VALUES ($1, $2)", snap.ID, body)
	}
	exec("INSERT INTO ref_counts (kind, key, n) VALUES ('snapshot', $1, 2), ('snapshot', $2, 1), ('snapshot', $3, 1), ('hold', 'held-key', 1)", s1.ID, s2.ID, s3.ID)

	from, to, err := postgres.Migrate(t.Context(), postgres.Config{DSN: dsn})
	if err != nil || from != 1 || to != postgres.SchemaVersion() {
		t.Fatalf("Migrate: %d -> %d, %v; want 1 -> %d", from, to, err, postgres.SchemaVersion())
	}
	links := sqlValue[string](t, dsn, "SELECT coalesce(string_agg(left(snapshot_id, 4) || ':' || left(row_id, 4), ' ' ORDER BY snapshot_id, row_id), '') FROM row_snapshots")
	var want []string
	for _, l := range [][2]string{{s1.ID, r1.ID}, {s1.ID, r2.ID}, {s2.ID, r2.ID}, {s3.ID, r3.ID}} {
		want = append(want, l[0][:4]+":"+l[1][:4])
	}
	slices.Sort(want)
	if got := strings.Join(want, " "); links != got {
		t.Errorf("links after the migration: %s, want %s", links, got)
	}
	if left := sqlValue[string](t, dsn, "SELECT coalesce(string_agg(kind, ' ' ORDER BY kind), '') FROM ref_counts"); left != "hold" {
		t.Errorf("counters after the migration: %q, want the hold counter alone", left)
	}

	s := open(t, postgres.Config{DSN: dsn})
	var swept []string
	err = s.Update(t.Context(), func(tx ledger.Tx) error {
		var err error
		swept, err = sweepRow(tx, r1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 0 {
		t.Errorf("sweeping row 1 (row 2 still names its snapshot): deletable %v, want none", swept)
	}
	err = s.View(t.Context(), func(tx ledger.Tx) error {
		for _, snap := range []verifier.Snapshot{s1, s2, s3} {
			if _, err := tx.Snapshot(snap.ID); err != nil {
				t.Errorf("snapshot %.8s after sweeping row 1: %v", snap.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
