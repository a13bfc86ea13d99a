package pgtest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The cluster shared by the tests of one binary.
var (
	shared struct {
		sync.Mutex
		main    bool // Main runs the tests and removes the cluster after them
		cluster *Cluster
		err     error
		tried   bool
	}
	dbSeq atomic.Int64
)

// Main runs a test binary's tests and removes the shared cluster, if one
// was started, after them. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	c := shared.cluster
	shared.Unlock()
	if c != nil {
		if err := c.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	os.Exit(code)
}

// Available skips t when PostgreSQL is not installed and PACTLEDGER_POSTGRES
// is not set, and fails it when PACTLEDGER_POSTGRES is set but the server
// binaries are missing.
func Available(t testing.TB) {
	t.Helper()
	if _, err := BinDir(); err != nil {
		if os.Getenv(EnvRequire) != "" {
			t.Fatalf("%v, but %s is set: the PostgreSQL tests must run (scripts/ensure-postgres installs it)", err, EnvRequire)
		}
		t.Skipf("PostgreSQL is not installed (%v): skipping; scripts/ensure-postgres installs it and `make test` runs these tests", err)
	}
}

// Shared returns the test binary's cluster, starting it on first use. The
// package's TestMain must call Main, which removes it after the tests.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	Available(t)
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		t.Fatal("pgtest.Shared needs pgtest.Main in the package's TestMain, which removes the cluster after the tests")
	}
	if !shared.tried {
		shared.tried = true
		shared.cluster, shared.err = New("shared")
	}
	if shared.err != nil {
		t.Fatalf("start the PostgreSQL test cluster: %v", shared.err)
	}
	return shared.cluster
}

// CreateDB creates a new empty database on the shared cluster for t and
// returns its connection string; the database is dropped when t ends.
func CreateDB(t testing.TB) string {
	t.Helper()
	return Shared(t).CreateDB(t)
}

var notIdent = regexp.MustCompile(`[^a-z0-9]+`)

// CreateDB creates a new empty database on c for t and returns its
// connection string; the database is dropped when t ends (while c runs).
func (c *Cluster) CreateDB(t testing.TB) string {
	t.Helper()
	return c.CreateDBFrom(t, "")
}

// CreateDBFrom creates a new database on c for t as a copy of the
// database template (see Template; "" for an empty database) and returns
// its connection string; the database is dropped when t ends (while c
// runs).
func (c *Cluster) CreateDBFrom(t testing.TB, template string) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", dbSeq.Add(1), notIdent.ReplaceAllString(strings.ToLower(t.Name()), "_"))
	name = strings.TrimRight(name[:min(len(name), 60)], "_")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sql := "CREATE DATABASE " + name
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if err := c.Exec(ctx, "postgres", sql); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !c.Running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return c.DSN(name)
}

// Template creates, the first time it is asked for name on c, a database
// called name and runs setup on its connection string (a schema
// migration, say); later calls return at once with the first one's
// result. CreateDBFrom then copies it, which is quicker than setting up
// each database again. setup must leave no connection open.
func (c *Cluster) Template(name string, setup func(dsn string) error) error {
	if !templateName.MatchString(name) {
		return fmt.Errorf("template name %q: want lowercase letters, digits and _", name)
	}
	c.mu.Lock()
	if c.templates == nil {
		c.templates = map[string]*template{}
	}
	tp, ok := c.templates[name]
	if !ok {
		tp = &template{}
		c.templates[name] = tp
	}
	c.mu.Unlock()
	tp.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if tp.err = c.Exec(ctx, "postgres", "CREATE DATABASE "+name); tp.err == nil {
			tp.err = setup(c.DSN(name))
		}
	})
	return tp.err
}

var templateName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

// template is a database made once per cluster for CreateDBFrom.
type template struct {
	once sync.Once
	err  error
}

// Exec runs one SQL statement on database db as the superuser.
func (c *Cluster) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// QueryString runs a query returning one text value on database db.
func (c *Cluster) QueryString(ctx context.Context, db, sql string, args ...any) (string, error) {
	conn, err := pgx.Connect(ctx, c.DSN(db))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(ctx, sql, args...).Scan(&s)
	return s, err
}
