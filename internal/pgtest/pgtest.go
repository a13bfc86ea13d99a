// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb in
// a temporary directory, a free loopback port, a unix socket in that
// directory, and a fast stop when the test binary is done. One cluster
// serves a whole test binary (Main, Shared) and every test gets a database
// of its own (CreateDB). Helpers stop and start a cluster (outage tests)
// and make a synchronous streaming standby that can be promoted (failover
// tests).
//
// The server refuses to run as root: when the tests run as root, initdb,
// pg_ctl and pg_basebackup run as the unprivileged "postgres" user the
// Debian package creates, through runuser, in directories owned by it.
//
// `make test` installs PostgreSQL when it is missing (scripts/ensure-postgres)
// and sets PACTLEDGER_POSTGRES=1, so these tests cannot be skipped there; a
// plain `go test` on a machine without PostgreSQL skips them and says why.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pactledger/pactledger/internal/freeport"
)

// EnvRequire names the environment variable that makes the PostgreSQL
// tests mandatory: with it set, a missing or failing server fails them
// instead of skipping them.
const EnvRequire = "PACTLEDGER_POSTGRES"

// User is the superuser every cluster is created with (trust
// authentication, loopback only).
const User = "ledger"

// binGlob is where Debian installs the server binaries.
const binGlob = "/usr/lib/postgresql/*/bin"

// rootPrefix names the temporary directories clusters live in.
const rootPrefix = "pactledger-pg-"

// BinDir returns the directory holding initdb, pg_ctl, pg_basebackup and
// postgres: the newest Debian install, else the directory of pg_ctl on
// PATH.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob(binGlob)
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if usable(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil && usable(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl) under %s or on PATH", binGlob)
}

// majorOf returns the major version in a Debian binary path, 0 if none.
func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func usable(dir string) bool {
	for _, b := range []string{"initdb", "pg_ctl", "postgres", "pg_basebackup"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// clusterName is what a cluster may be called: it is quoted into
// synchronous_standby_names.
var clusterName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// Cluster is one PostgreSQL cluster on a loopback port.
type Cluster struct {
	// Name is the cluster's name: the application name a standby reports
	// to its primary.
	Name string
	// Port is the loopback TCP port it listens on.
	Port int

	settings []string // name=value, passed to the server at each start
	bin      string
	root     string // owned by the server's user; removed by Remove
	data     string
	sock     string
	log      string
	owner    *runAs // nil: run the binaries as the current user

	mu        sync.Mutex
	running   bool
	templates map[string]*template
}

// runAs is the unprivileged user the server runs as when the tests run as
// root.
type runAs struct {
	name     string
	uid, gid int
}

// serverUser returns the user to run the server as: nil when not root,
// else the "postgres" user.
func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and the server refuses root: no unprivileged \"postgres\" user to run it as (%w)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &runAs{name: u.Username, uid: uid, gid: gid}, nil
}

// New creates a cluster in a new temporary directory (initdb) and starts
// it on a free loopback port, with server settings given as name=value
// (such as shared_preload_libraries=pg_stat_statements). Remove stops it
// and deletes the directory.
func New(name string, settings ...string) (*Cluster, error) {
	for _, s := range settings {
		if k, v, ok := strings.Cut(s, "="); !ok || k == "" || v == "" || strings.ContainsAny(s, " \t'\"") {
			return nil, fmt.Errorf("server setting %q: want name=value without spaces or quotes", s)
		}
	}
	c, err := newEmpty(name)
	if err != nil {
		return nil, err
	}
	c.settings = settings
	args := []string{"-D", c.data, "-A", "trust", "-U", User, "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"}
	if out, err := c.run("initdb", args...); err != nil {
		c.removeDir()
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if err := c.startOnFreePort(); err != nil {
		c.removeDir()
		return nil, err
	}
	return c, nil
}

// newEmpty makes the directories of a cluster that has no data yet.
func newEmpty(name string) (*Cluster, error) {
	if !clusterName.MatchString(name) {
		return nil, fmt.Errorf("cluster name %q: want lowercase letters, digits and _", name)
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	owner, err := serverUser()
	if err != nil {
		return nil, err
	}
	reapOrphans()
	root, err := os.MkdirTemp("", rootPrefix)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, bin: bin, root: root, data: filepath.Join(root, "data"), sock: filepath.Join(root, "sock"), log: filepath.Join(root, "server.log"), owner: owner}
	// The test binary's pid marks the directory as in use (reapOrphans).
	if err := os.WriteFile(filepath.Join(root, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		c.removeDir()
		return nil, err
	}
	if err := os.Mkdir(c.sock, 0o700); err != nil {
		c.removeDir()
		return nil, err
	}
	if owner != nil {
		for _, p := range []string{root, c.sock} {
			if err := os.Chown(p, owner.uid, owner.gid); err != nil {
				c.removeDir()
				return nil, fmt.Errorf("hand %s to the %s user: %w", p, owner.name, err)
			}
		}
		// The server's user must reach the directory through its parents.
		if err := os.Chmod(root, 0o755); err != nil {
			c.removeDir()
			return nil, err
		}
	}
	return c, nil
}

// run runs one of the server binaries as the server's user and returns
// its combined output.
func (c *Cluster) run(name string, args ...string) (string, error) {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.owner != nil {
		cmd = exec.Command("runuser", append([]string{"-u", c.owner.name, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// startOnFreePort starts the cluster on a free loopback port, trying a
// few ports when another process takes the chosen one first.
func (c *Cluster) startOnFreePort() error {
	var err error
	for range 5 {
		if c.Port, err = freeport.Port(); err != nil {
			return err
		}
		if err = c.Start(); err == nil {
			return nil
		}
	}
	return err
}

// Start starts the stopped cluster on its port and waits until it takes
// connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return nil
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c cluster_name=%s", c.Port, c.sock, c.Name)
	for _, s := range c.settings {
		opts += " -c " + s
	}
	if out, err := c.run("pg_ctl", "-D", c.data, "-o", opts, "-l", c.log, "-w", "-t", "60", "start"); err != nil {
		return fmt.Errorf("start PostgreSQL cluster %s on port %d: %w: %s\n%s", c.Name, c.Port, err, out, c.LogTail())
	}
	c.running = true
	return nil
}

// Stop stops the cluster with a fast shutdown (open sessions are ended,
// committed data stays) and keeps its data for Start.
func (c *Cluster) Stop() error { return c.stop("fast") }

// Crash stops the cluster at once, as a crash would: no shutdown
// checkpoint. Start recovers it from its WAL.
func (c *Cluster) Crash() error { return c.stop("immediate") }

func (c *Cluster) stop(mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil
	}
	if out, err := c.run("pg_ctl", "-D", c.data, "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("stop PostgreSQL cluster %s (%s): %w: %s", c.Name, mode, err, out)
	}
	c.running = false
	return nil
}

// Running reports whether the cluster was started and not stopped since.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// Remove stops the cluster and deletes its directory.
func (c *Cluster) Remove() error {
	err := c.stop("fast")
	if err != nil {
		err = errors.Join(err, c.stop("immediate"))
	}
	c.removeDir()
	return err
}

func (c *Cluster) removeDir() { _ = os.RemoveAll(c.root) }

// Addr returns the cluster's loopback host:port.
func (c *Cluster) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)) }

// DSN returns a connection string for database db on this cluster.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", c.Port, User, db)
}

// DSNAs returns a connection string for database db on this cluster as
// role instead of User.
func (c *Cluster) DSNAs(role, db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", c.Port, role, db)
}

var roleName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

// AddPasswordRole creates role, a superuser that must give password
// (SCRAM) over TCP, where User and every other role keep trust
// authentication, and waits until the server asks role for it. ALTER
// ROLE … PASSWORD then changes the password new connections must give.
func (c *Cluster) AddPasswordRole(ctx context.Context, role, password string) error {
	if !roleName.MatchString(role) {
		return fmt.Errorf("role name %q: want lowercase letters, digits and _", role)
	}
	if err := c.Exec(ctx, "postgres", fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'", role, strings.ReplaceAll(password, "'", "''"))); err != nil {
		return fmt.Errorf("create role %s: %w", role, err)
	}
	c.mu.Lock()
	hba := filepath.Join(c.data, "pg_hba.conf")
	b, err := os.ReadFile(hba)
	if err == nil {
		// The first line that matches a connection decides its method.
		err = os.WriteFile(hba, append([]byte("host all "+role+" 127.0.0.1/32 scram-sha-256\n"), b...), 0o600)
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("pg_hba.conf: %w", err)
	}
	if err := c.Exec(ctx, "postgres", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	// The reload is asynchronous: wait until a wrong password is refused.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.DSNAs(role, "postgres")+" password=not-the-password")
		if err == nil {
			_ = conn.Close(ctx)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "28P01" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server did not ask role %s for a password after the reload (last: %v)", role, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// MultiHostDSN returns a connection string for database db that names
// every cluster, in order, and connects to the first one that takes
// writes (target_session_attrs=read-write), as an operator configures a
// primary with its standbys.
func MultiHostDSN(db string, clusters ...*Cluster) string {
	hosts := make([]string, len(clusters))
	ports := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i], ports[i] = "127.0.0.1", strconv.Itoa(c.Port)
	}
	return fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable target_session_attrs=read-write",
		strings.Join(hosts, ","), strings.Join(ports, ","), User, db)
}

// LogTail returns the last lines of the server's log, for a failure
// message.
func (c *Cluster) LogTail() string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "server log (" + c.log + "):\n" + strings.Join(lines, "\n")
}

// Standby makes a streaming standby of c named name (pg_basebackup -R into
// a new directory), starts it on its own loopback port and makes it c's
// synchronous standby: from then on a commit on c returns once the
// standby has it. The standby's own configuration asks for no synchronous
// standby, so once promoted it commits alone.
func (c *Cluster) Standby(ctx context.Context, name string) (*Cluster, error) {
	s, err := newEmpty(name)
	if err != nil {
		return nil, err
	}
	if out, err := s.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", User, "-D", s.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("pg_basebackup from %s: %w: %s", c.Name, err, out)
	}
	if err := s.startOnFreePort(); err != nil {
		s.removeDir()
		return nil, err
	}
	if err := c.requireSync(ctx, name); err != nil {
		_ = s.Remove()
		return nil, err
	}
	return s, nil
}

// requireSync makes the standby named name c's synchronous standby and
// waits until c reports it streaming in sync.
func (c *Cluster) requireSync(ctx context.Context, name string) error {
	if err := c.Exec(ctx, "postgres", fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%q'", name)); err != nil {
		return err
	}
	if err := c.Exec(ctx, "postgres", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		state, err := c.QueryString(ctx, "postgres", "SELECT coalesce((SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'), '')", name)
		if err == nil && state == "sync" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby %s did not become synchronous (state %q, %v)", name, state, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Promote turns the standby into a primary that takes writes, and waits
// until it does.
func (c *Cluster) Promote() error {
	if out, err := c.run("pg_ctl", "-D", c.data, "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("promote %s: %w: %s", c.Name, err, out)
	}
	return nil
}

// reapOrphans removes the clusters of test binaries that died without
// cleaning up (a test timeout, a kill): their owner pid no longer runs.
func reapOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), rootPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		c := &Cluster{root: d, data: filepath.Join(d, "data")}
		c.bin, _ = BinDir()
		c.owner, _ = serverUser()
		if _, err := os.Stat(filepath.Join(c.data, "postmaster.pid")); err == nil {
			_, _ = c.run("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "-t", "30", "stop")
		}
		c.removeDir()
	}
}
