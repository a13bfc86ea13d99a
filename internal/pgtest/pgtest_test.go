package pgtest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// count returns the number of rows in table t of the database at dsn.
func count(t *testing.T, dsn, table string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// exec runs statements on the database at dsn.
func exec(t *testing.T, dsn string, sql ...string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	for _, s := range sql {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestDatabasesAreSeparate: each CreateDB is a fresh database of its own
// on the shared cluster.
func TestDatabasesAreSeparate(t *testing.T) {
	a, b := pgtest.CreateDB(t), pgtest.CreateDB(t)
	if a == b {
		t.Fatalf("two CreateDB calls gave the same database: %s", a)
	}
	exec(t, a, "CREATE TABLE things (n int)", "INSERT INTO things VALUES (1), (2)")
	exec(t, b, "CREATE TABLE things (n int)")
	if n := count(t, a, "things"); n != 2 {
		t.Errorf("database a holds %d rows, want 2", n)
	}
	if n := count(t, b, "things"); n != 0 {
		t.Errorf("database b holds %d rows, want 0", n)
	}
}

// TestTemplate: a template is set up once, and each database made from
// it starts as a copy of it.
func TestTemplate(t *testing.T) {
	c := pgtest.Shared(t)
	setups := 0
	setup := func(dsn string) error {
		setups++
		exec(t, dsn, "CREATE TABLE things (n int)", "INSERT INTO things VALUES (1), (2), (3)")
		return nil
	}
	for range 2 {
		if err := c.Template("things", setup); err != nil {
			t.Fatal(err)
		}
	}
	if setups != 1 {
		t.Errorf("the template was set up %d times, want once", setups)
	}
	a, b := c.CreateDBFrom(t, "things"), c.CreateDBFrom(t, "things")
	exec(t, a, "DELETE FROM things")
	if n := count(t, a, "things"); n != 0 {
		t.Errorf("database a holds %d rows after a delete, want 0", n)
	}
	if n := count(t, b, "things"); n != 3 {
		t.Errorf("database b holds %d rows, want the template's 3", n)
	}
}

// TestStopAndStart: a stopped cluster refuses connections; started again
// on the same port it has every committed row.
func TestStopAndStart(t *testing.T) {
	c, err := pgtest.New("outage")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Remove() })
	dsn := c.CreateDB(t)
	exec(t, dsn, "CREATE TABLE things (n int)", "INSERT INTO things VALUES (1)")
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a stopped cluster")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dsn, "things"); n != 1 {
		t.Errorf("after a restart: %d rows, want 1", n)
	}
	exec(t, dsn, "INSERT INTO things VALUES (2)")
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dsn, "things"); n != 2 {
		t.Errorf("after a crash and recovery: %d rows, want 2", n)
	}
}

// TestSynchronousStandbyFailover: a commit on the primary is on its
// synchronous standby when it returns; with the primary crashed, the
// standby is promoted and takes writes, and a multi-host DSN naming both
// reaches it.
func TestSynchronousStandbyFailover(t *testing.T) {
	primary, err := pgtest.New("primary")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Remove() })
	dsn := primary.CreateDB(t)
	db := dbName(t, dsn)
	exec(t, dsn, "CREATE TABLE things (n int)")
	standby, err := primary.Standby(t.Context(), "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Remove() })
	state, err := primary.QueryString(t.Context(), "postgres", "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")
	if err != nil || state != "sync" {
		t.Fatalf("standby state on the primary: %q, %v; want sync", state, err)
	}
	for i := range 50 {
		exec(t, dsn, "INSERT INTO things VALUES ("+strconv.Itoa(i)+")")
	}
	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	// Every acknowledged commit reached the standby before the crash.
	if n := count(t, standby.DSN(db), "things"); n != 50 {
		t.Fatalf("standby holds %d rows after the primary crashed, want 50", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	multi := pgtest.MultiHostDSN(db, primary, standby)
	if conn, err := pgx.Connect(ctx, multi); err == nil {
		conn.Close(ctx)
		t.Fatal("a read-write session was found before the standby was promoted")
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	exec(t, multi, "INSERT INTO things VALUES (50)")
	if n := count(t, standby.DSN(db), "things"); n != 51 {
		t.Errorf("promoted standby holds %d rows, want 51", n)
	}
}

// dbName returns the database a DSN names.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", dsn, err)
	}
	return cfg.Database
}

// TestServerSettings: a cluster started with settings runs with them, also
// after a restart; a malformed setting is refused before anything starts.
func TestServerSettings(t *testing.T) {
	pgtest.Available(t)
	for _, bad := range []string{"work_mem", "work_mem=", "work_mem=4 MB", "x='y'"} {
		if c, err := pgtest.New("settings_bad", bad); err == nil {
			c.Remove()
			t.Errorf("setting %q accepted", bad)
		}
	}
	c, err := pgtest.New("settings", "work_mem=5MB")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	for _, step := range []string{"started", "restarted"} {
		got, err := c.QueryString(t.Context(), "postgres", "SHOW work_mem")
		if err != nil || got != "5MB" {
			t.Fatalf("%s: work_mem %q, %v; want 5MB", step, got, err)
		}
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
}
