// Package move copies a ledger's rows from its bbolt file to a PostgreSQL
// database (`ledgerd migrate --from bbolt:PATH --to postgres:DSN`):
// every row with its indexes, evidence bundle, JWKS snapshot (with its
// retain record), tombstone, revocation, object record, reference count,
// deletion, outbox entry (with its failure record), segment plan, dead
// letter, incident, drill report, access-log record and the whole Merkle
// log (queued leaves, leaves, stored hashes, checkpoints, the head, the
// published tile size and the integrator's record that the published log
// diverged), with every sequence number kept, so that a ledgerd on the
// database answers exactly as one on the file did.
//
// The copy goes kind by kind in chunks, each chunk and the record of how
// far the copy got committed in one transaction, so a move cut short (a
// crash, Ctrl-C, a lost connection) continues where it stopped when run
// again. When every kind is copied both sides are counted and hashed, kind
// by kind; a move that verified is only verified again by a later run,
// which writes nothing. The file is opened read-only under its lock, so
// the move refuses to run while a ledgerd serves it, and no ledgerd can
// open it while the move runs. A move completes by marking the file as
// moved (bolt.MarkMoved, in a short read-write open under the file's
// lock), then recording the verification in the database: from then on
// ledgerd refuses to serve the file, whose ledger lives in the database.
// A later run that finds a verified move whose file lacks the mark (a
// run stopped between the two) marks it. On the database the move holds, for as
// long as it runs, an advisory lock of its own and the store's lock
// exclusive (lock.go): it refuses to run beside another move of the
// database or while a ledgerd has the database open, and no ledgerd opens
// it meanwhile.
package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/postgres"
)

// schemaVersion is the storage/postgres schema version the copy writes.
// Version 4 added ledger_rows.request_jwt_twin, which a copied row leaves
// empty: a bbolt file indexes a request JWT under the hash posted only,
// and the ledger reads both hashes (docs/design/016). Version 5 added
// grant_holds, whose 65,536 rows the migration makes; a copy adds none.
// Version 6 added ledger_rows.receipt_key, which a copied row leaves
// empty: it keys rows written at once on several replicas, and a copied
// row's twin is found by its id as the ledger reads both. Version 7 added
// outbox.op_key, the object each operation is on, which a copy fills.
// Version 8 added an index of log_pending by ref, which a copy's rows fill
// as any insert does. Version 9 added ledger_rows.counts, which a copy
// sets as an insert does (a receipt whose signature passed), and
// ledger_backfill, which an empty database's migration leaves empty.
const schemaVersion = 9

// Errors of a move.
var (
	// ErrNotEmpty: the database holds ledger data that no move from this
	// file put there.
	ErrNotEmpty = errors.New("the database already holds ledger data: a move needs an empty database")
	// ErrOtherSource: the database holds a move from another file, or from
	// this file before it was written to again.
	ErrOtherSource = errors.New("the database holds a move from another source")
	// ErrMismatch: after the copy, the two sides differ in count or hash
	// for at least one kind.
	ErrMismatch = errors.New("the copy differs from the source")
	// ErrConcurrent: another move of the same database is running.
	ErrConcurrent = errors.New("another move of this database is running: wait for it to end")
	// ErrMovedElsewhere: the bbolt file carries the mark of a move into
	// another database than this one.
	ErrMovedElsewhere = errors.New("the bbolt file was already moved into another database")
	// ErrLockLost: the session holding the move's locks on the database
	// ended while the move ran.
	ErrLockLost = errors.New("the move's lock on the database was lost")
)

// Config says what to move where. From and To.DSN are required; the zero
// value of every other field is the default.
type Config struct {
	// From is the path of the bbolt file (ledgerd's store.path, by default
	// <dataDir>/ledger.db). No ledgerd may have it open.
	From string
	// To locates the database; its schema is created or brought up to
	// date first, as `ledgerd migrate` does.
	To postgres.Config
	// Chunk is how many records one transaction copies; default 2000.
	Chunk int
	// LockTimeout bounds waiting for the file's lock; default 5 s.
	LockTimeout time.Duration
	// Progress, when set, is told in plain words what the move does.
	Progress io.Writer
	// OnChunk, when set, is told after each chunk commits how many
	// records of kind this run has copied so far.
	OnChunk func(kind bolt.ExportKind, copied int64)
	// Now is the clock the bookkeeping records; default time.Now.
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.Chunk <= 0 {
		c.Chunk = 2000
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = 5 * time.Second
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.To.ConnectTimeout <= 0 {
		c.To.ConnectTimeout = 5 * time.Second
	}
}

// Report is what a run did and found.
type Report struct {
	// Resumed: the run continued a move an earlier run began.
	Resumed bool
	// AlreadyMoved: an earlier run finished and verified the move; this
	// one only verified it again and wrote nothing (but the mark of the
	// move on the file, when it lacked it: MarkedFile).
	AlreadyMoved bool
	// MarkedFile: this run marked the bbolt file as moved.
	MarkedFile bool
	// Copied is how many records this run wrote.
	Copied int64
	// Took is how long the run took.
	Took time.Duration
	// Checks are the counts and hashes of each kind on both sides.
	Checks []Check
}

// Check is the count and hash of one kind (in one table) on both sides.
type Check struct {
	Kind                   string
	Table                  string
	Source, Target         int64
	SourceHash, TargetHash string
}

// Equal reports whether both sides have the same count and hash.
func (c Check) Equal() bool { return c.Source == c.Target && c.SourceHash == c.TargetHash }

// mover is one run of a move.
type mover struct {
	cfg  Config
	src  *bolt.Export
	pool *pgxpool.Pool
	rep  *Report
	// lock is the session holding the move's locks (lockDatabase).
	lock *pgx.Conn
	// path is the bbolt file's absolute path; version its last write
	// transaction the move copies (before the mark of the move, when
	// the file carries it); marked the file's mark of the move, nil
	// when it has none; target the database, named without password.
	path    string
	version uint64
	marked  *bolt.Moved
	target  string
	// divergedMissing: the file holds the log's record of a divergence
	// that the database lacks (verifyState), as a move by a version
	// before 2026-12-07 left it.
	divergedMissing bool
}

// say prints one line of progress.
func (m *mover) say(format string, args ...any) {
	fmt.Fprintf(m.cfg.Progress, format+"\n", args...)
}

// Run moves cfg.From into cfg.To, or continues or verifies a move begun
// before, and reports what it did. An interrupted run returns the
// context's error; running it again continues.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	start := time.Now()
	if cfg.From == "" || cfg.To.DSN == "" {
		return nil, fmt.Errorf("%w: a move needs the bbolt file and the database", ledger.ErrInvalid)
	}
	path, err := filepath.Abs(cfg.From)
	if err != nil {
		return nil, err
	}
	src, err := bolt.OpenExport(path, cfg.LockTimeout)
	if errors.Is(err, bolt.ErrLocked) {
		return nil, fmt.Errorf("%w: stop the ledgerd that serves it before moving it", err)
	}
	if err != nil {
		return nil, err
	}
	defer src.Close()
	m := &mover{cfg: cfg, src: src, rep: &Report{}, path: path}
	version, err := src.Version()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if m.marked, err = src.Moved(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if m.marked.Unchanged(version) {
		// The move marked the file, and nothing was written to it
		// since: the move copied the file as it was before the mark.
		version = m.marked.Version
	}
	m.version = version
	pc, err := poolConfig(cfg.To)
	if err != nil {
		return nil, err
	}
	m.target = databaseName(pc)
	lock, err := lockDatabase(ctx, pc)
	if err != nil {
		return nil, err
	}
	defer lock.Close(context.Background())
	m.lock = lock
	m.say("moving %s (bbolt, last write transaction %d) to database %q on %s:%d", path, m.version, pc.ConnConfig.Database, pc.ConnConfig.Host, pc.ConnConfig.Port)
	if err := m.migrateSchema(ctx); err != nil {
		return nil, err
	}
	if m.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer m.pool.Close()
	if err := m.run(ctx, path, m.version); err != nil {
		return m.rep, err
	}
	m.rep.Took = time.Since(start)
	return m.rep, nil
}

// poolConfig is the connection pool for To: two connections, the
// password from Config.PasswordFunc (for each new connection) or
// Config.Password when set.
func poolConfig(c postgres.Config) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres DSN: %w", err)
	}
	if c.Password != "" {
		pc.ConnConfig.Password = c.Password
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = c.ConnectTimeout
	}
	pc.BeforeConnect = postgres.BeforeConnect(c)
	pc.MaxConns = 2
	return pc, nil
}

// migrateSchema creates or upgrades the schema and checks it is the
// version the copy writes.
func (m *mover) migrateSchema(ctx context.Context) error {
	from, to, err := postgres.Migrate(ctx, m.cfg.To)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if to != schemaVersion {
		return fmt.Errorf("schema: the database is at version %d; this move writes version %d", to, schemaVersion)
	}
	if from == to {
		m.say("schema: version %d, already in place", to)
	} else {
		m.say("schema: version %d created (was %d)", to, from)
	}
	return nil
}

// run is the move once both sides are open: begin or resume, copy, verify.
func (m *mover) run(ctx context.Context, path string, version uint64) error {
	st, err := m.begin(ctx, path, version)
	if err != nil {
		return err
	}
	if st.verified {
		m.rep.AlreadyMoved = true
		m.say("this move finished and verified on %s; verifying it again (nothing is written)", st.verifiedAt.UTC().Format(time.RFC3339))
	} else {
		if err := m.copyAll(ctx); err != nil {
			return err
		}
	}
	switch {
	case st.verified && m.marked == nil:
		// A move verified by a version that did not mark the file: the
		// file is the one it copied (begin compared their last write
		// transactions), and ledgerd may have written to the database
		// since, so it is not compared again; the file is marked.
		m.say("this move was verified on %s without marking the file, which is unchanged since; the database is not compared again (ledgerd may have written to it since)", st.verifiedAt.UTC().Format(time.RFC3339))
	default:
		if err := m.verify(ctx); err != nil {
			return err
		}
	}
	// The move is complete once the file is marked as moved and the
	// database records the verification, in that order: a run stopped
	// between the two leaves no ledgerd startable, on the file or on the
	// database, and the next run verifies again and completes both.
	if err := m.checkLock(ctx); err != nil {
		return err
	}
	if err := m.markFile(ctx, st); err != nil {
		return err
	}
	if !st.verified {
		if err := step(ctx, "record the verification"); err != nil {
			return err
		}
		if err := m.checkLock(ctx); err != nil {
			return err
		}
		if err := m.markVerified(ctx); err != nil {
			return err
		}
	}
	m.say("move verified: run ledgerd with store.kind postgres on this database (the bbolt file is marked as moved, and ledgerd refuses to serve it; keep it as it is until you no longer need it)")
	return nil
}

// markFile marks the bbolt file as moved into the database, unless an
// earlier run did. The file is opened read-write for it, under its lock,
// once the move has let go of it: a file written to in between is
// refused (bolt.ErrWrittenSince) and left unmarked, and the move with
// it.
func (m *mover) markFile(ctx context.Context, st *moveState) error {
	if m.marked != nil {
		if !m.marked.Began.Equal(st.started) {
			// Two moves of the file begun before either marked it.
			return fmt.Errorf("%w: %s was marked as moved to %s at %s by a move begun on %s, not this one (begun on %s); run ledgerd on that database, and drop this one",
				ErrMovedElsewhere, m.path, m.marked.Database, m.marked.At.UTC().Format(time.RFC3339), m.marked.Began.UTC().Format(time.RFC3339Nano), st.started.UTC().Format(time.RFC3339Nano))
		}
		m.say("the bbolt file is marked as moved to %s since %s", m.marked.Database, m.marked.At.UTC().Format(time.RFC3339))
		return nil
	}
	if err := step(ctx, "mark the file"); err != nil {
		return err
	}
	if err := m.src.Close(); err != nil {
		return fmt.Errorf("close %s: %w", m.path, err)
	}
	mark, err := bolt.MarkMoved(m.path, bolt.Moved{Store: "PostgreSQL", Database: m.target, At: m.cfg.Now(), Began: st.started, Version: m.version}, m.cfg.LockTimeout)
	if errors.Is(err, bolt.ErrLocked) {
		return fmt.Errorf("the copy verified, but %w: a ledgerd opened the file after the move let go of it; stop it and run the move again (it says whether the file was written to meanwhile)", err)
	}
	if err != nil {
		return err
	}
	if !mark.Began.Equal(st.started) || mark.Database != m.target {
		// Another move of the file, begun before this one marked it,
		// marked it first (MarkMoved leaves a mark as it is).
		return fmt.Errorf("%w: %s was marked as moved to %s at %s by a move begun on %s, not this one (begun on %s); run ledgerd on that database, and drop this one",
			ErrMovedElsewhere, m.path, mark.Database, mark.At.UTC().Format(time.RFC3339), mark.Began.UTC().Format(time.RFC3339Nano), st.started.UTC().Format(time.RFC3339Nano))
	}
	m.marked = mark
	m.rep.MarkedFile = true
	m.say("marked %s as moved to %s: ledgerd refuses to serve it from now on (`ledgerd unmark-moved` undoes that, for a rollback)", m.path, mark.Database)
	return nil
}

// databaseName names the database of pc without its password:
// postgres://user@host:port/name.
func databaseName(pc *pgxpool.Config) string {
	c := pc.ConnConfig
	u := url.URL{Scheme: "postgres", Path: "/" + c.Database}
	if c.User != "" {
		u.User = url.User(c.User)
	}
	if strings.HasPrefix(c.Host, "/") {
		// A Unix socket's directory.
		u.RawQuery = url.Values{"host": {c.Host}, "port": {strconv.Itoa(int(c.Port))}}.Encode()
	} else {
		u.Host = net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
	}
	return u.String()
}

// step, when set (tests), is called before each step that completes a
// move; an error stops the move there, as a crash would.
var beforeStep func(name string) error

func step(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if beforeStep != nil {
		return beforeStep(name)
	}
	return nil
}

// copyAll copies every kind, then the sequences and the log head.
func (m *mover) copyAll(ctx context.Context) error {
	t0 := time.Now()
	for _, k := range kinds {
		if err := m.copyKind(ctx, k); err != nil {
			if ctx.Err() != nil {
				m.say("interrupted while copying %s: run the move again to continue from there", k.name)
				return fmt.Errorf("move interrupted: %w", ctx.Err())
			}
			return fmt.Errorf("copy %s: %w", k.name, err)
		}
	}
	if err := m.copyState(ctx); err != nil {
		return fmt.Errorf("copy the sequences and the log head: %w", err)
	}
	m.say("copied %d records in %s", m.rep.Copied, time.Since(t0).Round(time.Millisecond))
	// The planner needs statistics of the new tables before ledgerd
	// queries them; autovacuum would gather them only later.
	m.say("updating the planner's statistics (ANALYZE)")
	if _, err := m.pool.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// copyKind copies the records of k from where an earlier run stopped.
func (m *mover) copyKind(ctx context.Context, k kind) error {
	p, err := m.progress(ctx, string(k.name))
	if err != nil {
		return err
	}
	if p.done {
		m.say("%s: %d, copied by an earlier run", k.name, p.copied)
		return nil
	}
	if p.copied > 0 {
		m.say("%s: continuing after the %d copied by an earlier run", k.name, p.copied)
	}
	var thisRun int64
	lastSaid := time.Now()
	for {
		if err := m.checkLock(ctx); err != nil {
			return err
		}
		recs, err := m.src.Records(k.name, p.after, m.cfg.Chunk)
		if err != nil {
			return err
		}
		next := progress{after: p.after, copied: p.copied + int64(len(recs)), done: len(recs) < m.cfg.Chunk}
		if len(recs) > 0 {
			next.after = recs[len(recs)-1].Key
		}
		if err := m.writeChunk(ctx, k, recs, p, next); err != nil {
			return err
		}
		p = next
		thisRun += int64(len(recs))
		m.rep.Copied += int64(len(recs))
		if m.cfg.OnChunk != nil && len(recs) > 0 {
			m.cfg.OnChunk(k.name, thisRun)
		}
		if p.done {
			break
		}
		if time.Since(lastSaid) >= 2*time.Second {
			m.say("%s: %d copied so far", k.name, p.copied)
			lastSaid = time.Now()
		}
	}
	if p.copied == 0 {
		m.say("%s: none", k.name)
	} else {
		m.say("%s: %d copied", k.name, p.copied)
	}
	return nil
}

// writeChunk writes recs into k's tables and moves k's progress from
// prev to next, in one transaction.
func (m *mover) writeChunk(ctx context.Context, k kind, recs []bolt.Record, prev, next progress) error {
	rows := make([][][]any, len(k.dests))
	for _, r := range recs {
		per, err := k.rows(r)
		if err != nil {
			return err
		}
		for i := range k.dests {
			rows[i] = append(rows[i], per[i]...)
		}
	}
	return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		for i, d := range k.dests {
			if len(rows[i]) == 0 {
				continue
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{d.table}, d.cols, pgx.CopyFromRows(rows[i])); err != nil {
				return fmt.Errorf("copy into %s: %w", d.table, err)
			}
		}
		return setProgress(ctx, tx, string(k.name), prev, next)
	})
}

// copyState sets the sequences past the numbers the file handed out and
// writes the log's head, published tile size, pruned leaves and record of
// a divergence, then marks the copy done.
func (m *mover) copyState(ctx context.Context) error {
	p, err := m.progress(ctx, stateKind)
	if err != nil || p.done {
		return err
	}
	s, err := m.sourceState()
	if err != nil {
		return err
	}
	if err := m.checkLock(ctx); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		for _, q := range []struct {
			seq string
			n   uint64
		}{{"outbox_seq", s.counters.Outbox}, {"incident_seq", s.counters.Incident}, {"access_seq", s.counters.Access}, {"leaf_seq", s.counters.Leaf}, {"ledger_rows_pool_seq", s.counters.Row}} {
			if q.n == 0 {
				continue
			}
			if _, err := tx.Exec(ctx, "SELECT setval($1::regclass, $2)", q.seq, int64(q.n)); err != nil {
				return fmt.Errorf("set %s: %w", q.seq, err)
			}
		}
		if s.log.Size > 0 || len(s.log.Checkpoint) > 0 {
			if _, err := tx.Exec(ctx, "INSERT INTO log_state (name, n, value) VALUES ('head', $1, $2)", s.log.Size, s.log.Checkpoint); err != nil {
				return fmt.Errorf("set the log head: %w", err)
			}
		}
		if s.log.TilesPublished > 0 {
			if _, err := tx.Exec(ctx, "INSERT INTO log_state (name, n) VALUES ('tiles', $1)", s.log.TilesPublished); err != nil {
				return fmt.Errorf("set the published tile size: %w", err)
			}
		}
		if s.log.Pruned > 0 {
			// The leaves the file dropped are read from write-once storage.
			if _, err := tx.Exec(ctx, "INSERT INTO log_state (name, n) VALUES ('pruned', $1)", s.log.Pruned); err != nil {
				return fmt.Errorf("set the leaves kept only in tiles: %w", err)
			}
		}
		if s.log.Diverged != nil {
			// The integrator found the published log not to be the file's:
			// the replicas on the database report it, since the time it was
			// found, until a holder of the integrator's lease finds the logs
			// agree.
			if _, err := tx.Exec(ctx, "INSERT INTO log_state (name, n, value) VALUES ('diverged', 0, $1)", s.log.Diverged); err != nil {
				return fmt.Errorf("set the record of the log's divergence: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE ledger_move SET copied_ns = $1 WHERE id = 1", m.cfg.Now().UnixNano()); err != nil {
			return err
		}
		return setProgress(ctx, tx, stateKind, p, progress{copied: 1, done: true})
	})
}

// stateKind names the last step of the copy in the progress table.
const stateKind = "sequences and log head"

// sourceState is the file's sequence counters and log head.
type sourceState struct {
	counters bolt.Counters
	log      bolt.LogState
}

func (m *mover) sourceState() (sourceState, error) {
	var s sourceState
	var err error
	if s.counters, err = m.src.Counters(); err != nil {
		return s, err
	}
	s.log, err = m.src.LogState()
	return s, err
}
