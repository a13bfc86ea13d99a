// Package postgres is the row store on PostgreSQL and the engines that
// speak its protocol: rows, their indexes, evidence bundles, JWKS
// snapshots, the evidence outbox, reports, the Merkle log and leases in
// one database shared by any number of ledgerd replicas.
//
// Writes use group commit like storage/bolt: the Update calls waiting at a
// moment share one transaction, each under a savepoint of its own so that a
// failing member rolls back alone. Unique constraints do the dedupe: of two
// replicas racing to create one row, one stores it and the other's fn runs
// again and finds it. Expiry of leases is judged by the database's clock.
// The schema is created and upgraded by Migrate (`ledgerd migrate`); Open
// refuses a database whose schema is older or newer than this binary's,
// and one a move from a bbolt file began to fill and has not verified.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pactledger/pactledger/internal/batch"
	"github.com/pactledger/pactledger/ledger"
)

// Config tunes the store. DSN is required; the zero value of every other
// field is the default.
type Config struct {
	// DSN locates the database: a keyword/value string or a postgres://
	// URL, as libpq takes them. Several hosts with
	// target_session_attrs=read-write reach whichever is the primary.
	DSN string
	// Password, when set, is used instead of any password in DSN (from a
	// file or an environment variable, so the DSN need not carry it).
	Password string
	// PasswordFunc, when set, is called before each new connection opens
	// and its password is used instead of Password and any in DSN: a
	// password file read again for each connection, so a password changed
	// in the database and the file takes effect without a restart.
	// Connections already open keep the session they authenticated. An
	// error fails that connection, and the pool tries again on next use.
	PasswordFunc func(ctx context.Context) (string, error)
	// MaxConns caps the connection pool; default 16.
	MaxConns int32
	// MaxBatch caps how many Update calls share one transaction; default
	// 64. Each member that writes takes a subtransaction (its savepoint),
	// and PostgreSQL keeps 64 of them per transaction in shared memory:
	// more make every session's visibility checks slower until the commit.
	MaxBatch int
	// Committers is how many group-commit transactions one store runs at
	// once; default 4. Rows of one brand name the same JWKS snapshots, and
	// their writers only share-lock a snapshot's row (PutSnapshot), so
	// concurrent batches do not wait for each other on it; a sweep that
	// may delete a snapshot holds it for the length of its transaction.
	Committers int
	// CommitTimeout bounds one group-commit transaction, retries
	// included; default 30 s. The server ends a write transaction that
	// has been idle this long (its client has given up on it), and either
	// end drops a connection whose peer stopped answering after about as
	// long (TCP keepalives and user timeout; liveness.go). It also bounds
	// a read's wait for a connection (View) and each lease call (with the
	// lease's ttl, when shorter).
	CommitTimeout time.Duration
	// ConnectTimeout bounds opening one connection when the DSN sets no
	// connect_timeout, and the pool's check of a connection idle for a
	// second or more before it is used: one that does not answer in time
	// is dropped and another taken; default 5 s.
	ConnectTimeout time.Duration
	// OnCommit, when set, is told the size of each committed batch and
	// how long it took, retries included.
	OnCommit func(batch int, took time.Duration)
}

func (c *Config) defaults() {
	if c.MaxConns <= 0 {
		c.MaxConns = 16
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 64
	}
	if c.Committers <= 0 {
		c.Committers = 4
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = 30 * time.Second
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 5 * time.Second
	}
}

// Store is a ledger.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	reqs chan *request
	quit chan struct{}
	wg   sync.WaitGroup
	// life bounds every statement: cancelled once the last commit is done.
	life   context.Context
	cancel context.CancelFunc

	// mu orders Update's hand-over of a request against Close: once Close
	// holds it, no request is queued that the committers would not see.
	mu       sync.RWMutex
	isClosed bool

	// waiters bounds the writes that wait for grants held elsewhere, each
	// in a transaction of its own and off the committers (waitAlone).
	waiters chan struct{}
}

// maxWaiters is how many writes of one store wait for grants' holds at
// once, each holding a connection.
const maxWaiters = 2

// request is one Update call waiting for a group commit.
type request struct {
	fn    func(ledger.Tx) error
	fence *ledger.Fence
	err   chan error
}

// poolConfig parses cfg's DSN and applies its password and timeouts.
func poolConfig(cfg Config) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgx leaves any password in the DSN out of its message.
		return nil, fmt.Errorf("postgres DSN: %w", err)
	}
	if cfg.Password != "" {
		pc.ConnConfig.Password = cfg.Password
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	}
	pc.ConnConfig.DialFunc = dialer(pc.ConnConfig.ConnectTimeout, cfg.CommitTimeout).DialContext
	pc.AfterConnect = serverLiveness(cfg.CommitTimeout)
	pc.BeforeConnect = BeforeConnect(cfg)
	pc.PingTimeout = pc.ConnConfig.ConnectTimeout
	pc.MaxConns = cfg.MaxConns
	return pc, nil
}

// BeforeConnect returns the hook that gives each new connection the
// password cfg.PasswordFunc returns then, or nil without one: for a pool
// (pgxpool.Config.BeforeConnect) or database/sql (stdlib.OptionBeforeConnect)
// on cfg's database.
func BeforeConnect(cfg Config) func(context.Context, *pgx.ConnConfig) error {
	if cfg.PasswordFunc == nil {
		return nil
	}
	return func(ctx context.Context, cc *pgx.ConnConfig) error {
		pw, err := cfg.PasswordFunc(ctx)
		if err != nil {
			return fmt.Errorf("the database password: %w", err)
		}
		cc.Password = pw
		return nil
	}
}

// Open connects to the database cfg.DSN names and checks that its schema
// is the one this binary writes: a database without it, or with an older
// one, needs `ledgerd migrate` first; a newer one needs a newer ledgerd.
// A database holding a move from a bbolt file that has not verified is
// refused with an error wrapping ErrMoveUnfinished: it holds part of the
// ledger, and `ledgerd migrate --from` run again continues the move.
// Every session of the store holds the store's lock shared (lock.go): a
// database a move is filling is refused with an error wrapping
// ErrMoveRunning, and a move cannot begin while the store has a session.
// A database that cannot be reached is an error wrapping
// ledger.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.defaults()
	pc, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Each session holds the store's lock shared (lock.go).
	live, lock := pc.AfterConnect, sessionLock()
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if err := live(ctx, c); err != nil {
			return err
		}
		return lock(ctx, c)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	if err := checkSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, reqs: make(chan *request, cfg.MaxBatch), quit: make(chan struct{}), waiters: make(chan struct{}, maxWaiters)}
	s.life, s.cancel = context.WithCancel(context.Background())
	for range cfg.Committers {
		s.wg.Add(1)
		go s.commitLoop()
	}
	return s, nil
}

// Close waits for queued writes to commit, then closes the pool. Update,
// View and lease calls after Close fail with ledger.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		return nil
	}
	s.isClosed = true
	close(s.quit)
	s.mu.Unlock()
	s.wg.Wait()
	s.cancel()
	s.pool.Close()
	return nil
}

// closed reports whether Close was called.
func (s *Store) closed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.isClosed
}

// Ping reports whether the database answers and takes writes (it is not
// a standby): nil, or an error wrapping ledger.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed() {
		return ledger.ErrClosed
	}
	var ro string
	if err := s.pool.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro); err != nil {
		return unavailableErr("ping", err)
	}
	if ro != "off" {
		return fmt.Errorf("%w: the database takes no writes (a standby, or read-only)", ledger.ErrUnavailable)
	}
	return nil
}

// ServerTime returns the database server's time (SELECT now()), or an
// error wrapping ledger.ErrUnavailable when the database does not answer.
// The retention sweep checks the ledger's clock against it
// (ledger.ReferenceClock).
func (s *Store) ServerTime(ctx context.Context) (time.Time, error) {
	if s.closed() {
		return time.Time{}, ledger.ErrClosed
	}
	var now time.Time
	if err := s.pool.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		return time.Time{}, unavailableErr("read the server's time", err)
	}
	return now.UTC(), nil
}

// Update implements ledger.Store with group commit.
func (s *Store) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	r := &request{fn: fn, err: make(chan error, 1)}
	if f, ok := ledger.FenceFrom(ctx); ok {
		r.fence = &f
	}
	s.mu.RLock()
	if s.isClosed {
		s.mu.RUnlock()
		return ledger.ErrClosed
	}
	select {
	case s.reqs <- r:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	// Once queued the write may commit: wait for its result even if ctx
	// ends. The committers answer every request queued before Close.
	return <-r.err
}

// View implements ledger.Store: fn reads one snapshot of the database.
// Getting a connection (waiting for a free one, the pool's check of an
// idle one, opening one) takes at most CommitTimeout, after which View
// fails with an error wrapping ledger.ErrUnavailable. The read itself has
// no bound but ctx's: reads of the whole store (an integrity check, an
// export) take minutes and are legitimate; a database that stops
// answering during one is found out by the connection's TCP keepalives
// and user timeout (liveness.go).
func (s *Store) View(ctx context.Context, fn func(ledger.Tx) error) error {
	if s.closed() {
		return ledger.ErrClosed
	}
	c, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	t := newTx(ctx, c.Conn(), false)
	t.queue("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
	ferr := fn(t)
	if t.fatal != nil {
		return t.fatal
	}
	// A read-only transaction has nothing to commit: end it either way.
	if _, err := c.Conn().PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil && ferr == nil {
		return classify("end read transaction", err, c.Conn())
	}
	return ferr
}

// acquire gets a connection from the pool for a call with ctx, waiting
// at most CommitTimeout.
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeoutCause(ctx, s.cfg.CommitTimeout, outOfTime(s.cfg.CommitTimeout))
	defer cancel()
	c, err := s.pool.Acquire(actx)
	if err != nil {
		return nil, acquireErr(actx, err)
	}
	return c, nil
}

// commitLoop takes waiting Update calls in batches and commits each batch
// in one transaction, until Close; then it commits what is still queued.
func (s *Store) commitLoop() {
	defer s.wg.Done()
	batch.Loop(s.reqs, s.quit, s.cfg.MaxBatch, 0, s.commit)
}

// errBatch is a reason to run a whole batch again.
var errBatch = errors.New("batch must run again")

// maxBatchRuns bounds how often a batch runs again after a serialization
// failure or a deadlock.
const maxBatchRuns = 10

// commit runs batch in one transaction and answers each request. Only
// what a successful COMMIT made durable is answered nil. A committer's
// transaction never waits for a grant's hold (HoldGrants): a member that
// finds one held elsewhere runs again later, off the committer.
//
// A fenced write (a lease holder's) runs in a transaction of its own,
// before the batch's others: its check of the lease, its last statement,
// locks the lease's row until COMMIT, and the holder's renewals wait for
// that lock. In a batch, every member after it and the batch's own
// settling would hold the row as long as they took, past the lease's
// life: the holder would count its lease lost while its write committed.
// Every transaction of the batch commits within CommitTimeout of its
// start.
func (s *Store) commit(batch []*request) {
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	rest := batch[:0:0]
	for _, r := range batch {
		if r.fence != nil {
			s.commitWaiting([]*request{r}, false, deadline)
			continue
		}
		rest = append(rest, r)
	}
	if len(rest) > 0 {
		s.commitWaiting(rest, false, deadline)
	}
}

// commitWaiting is commit by deadline; with mayWait, its holds of grants
// wait.
func (s *Store) commitWaiting(batch []*request, mayWait bool, deadline time.Time) {
	ctx, cancel := context.WithDeadlineCause(s.life, deadline, outOfTime(s.cfg.CommitTimeout))
	defer cancel()
	start := time.Now()
	errs, err := s.runBatchRetrying(ctx, batch, mayWait)
	if errors.Is(err, errMemberRollback) || errors.Is(err, errCommit) {
		if len(batch) > 1 {
			// One member broke the whole transaction: each runs alone, so
			// that it cannot sink the others.
			for _, r := range batch {
				s.commitWaiting([]*request{r}, mayWait, time.Now().Add(s.cfg.CommitTimeout))
			}
			return
		}
	}
	if err != nil {
		for _, r := range batch {
			r.err <- err
		}
		return
	}
	committed := 0
	for i, r := range batch {
		if errors.Is(errs[i], errAlone) {
			// Its grant is held elsewhere: it runs again once its group
			// has committed, where it may wait.
			s.waitAlone(r)
			continue
		}
		committed++
		r.err <- errs[i]
	}
	if s.cfg.OnCommit != nil && committed > 0 {
		s.cfg.OnCommit(committed, time.Since(start))
	}
}

// waitAlone runs r in a transaction of its own whose holds of grants
// wait, on a goroutine of its own (at most maxWaiters at once), so that
// no committer waits for a hold: a sweep holding many grants, or a write
// of another replica, would otherwise hold up every write of the store.
// Its CommitTimeout runs from now, its wait for a turn included.
func (s *Store) waitAlone(r *request) {
	aloneRuns.Add(1)
	deadline := time.Now().Add(s.cfg.CommitTimeout)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		turn := time.NewTimer(time.Until(deadline))
		defer turn.Stop()
		select {
		case s.waiters <- struct{}{}:
		case <-turn.C:
			r.err <- fmt.Errorf("%w: row store (postgres): the write waited %s for a grant held by another transaction", ledger.ErrUnavailable, s.cfg.CommitTimeout)
			return
		}
		defer func() { <-s.waiters }()
		s.commitWaiting([]*request{r}, true, deadline)
	}()
}

// aloneRuns counts the writes moved out of a committer's transaction to
// wait for a grant's hold (errAlone), for tests.
var aloneRuns atomic.Int64

// runBatchRetrying runs batch until it commits, runs it again after a
// serialization failure or deadlock, and once more on a fresh connection
// when the connection failed before COMMIT was sent (a pooled connection
// the server closed, as after a restart or a failover) and time is left.
func (s *Store) runBatchRetrying(ctx context.Context, batch []*request, mayWait bool) ([]error, error) {
	fresh := false
	for run := 1; ; run++ {
		errs, err := s.runBatch(ctx, batch, mayWait)
		switch {
		case err == nil:
			return errs, nil
		case errors.Is(err, errBatch) && run < maxBatchRuns:
			continue
		case errors.Is(err, errBeforeCommit) && !fresh && ctx.Err() == nil:
			fresh = true
			continue
		}
		return nil, err
	}
}

// errBeforeCommit marks a failed connection before COMMIT was sent:
// nothing of the batch is durable and it may run again.
var errBeforeCommit = errors.New("before commit")

// runBatch runs every member of batch in one transaction and commits it.
// It returns each member's error, or the error that ended the whole
// transaction (nothing of it is durable unless that error wraps
// ledger.ErrUnavailable from COMMIT itself, when the outcome is unknown).
func (s *Store) runBatch(ctx context.Context, batch []*request, mayWait bool) ([]error, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBeforeCommit, acquireErr(ctx, err))
	}
	defer c.Release() // a connection left inside a transaction is closed, not pooled
	t := newTx(ctx, c.Conn(), true)
	t.mayWait = mayWait
	t.queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	// Its client gives the transaction up after CommitTimeout; one that
	// is idle that long was abandoned (the replica vanished), and the
	// server ends it with its locks.
	t.queue("SELECT set_config('idle_in_transaction_session_timeout', $1, true)", strconv.FormatInt(s.cfg.CommitTimeout.Milliseconds(), 10))
	errs := make([]error, len(batch))
	run := make([]*member, len(batch))
	for i, r := range batch {
		run[i] = &member{r: r, err: &errs[i]}
	}
	seq := 0
	for len(run) > 0 && t.fatal == nil {
		for _, m := range run {
			if t.member(m, &seq); t.fatal != nil {
				break
			}
		}
		if t.fatal == nil {
			t.settle()
		}
		run, t.again = t.again, nil
	}
	if t.fatal != nil {
		err := t.fatal
		if errors.Is(err, ledger.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", errBeforeCommit, err)
		} else {
			_, _ = c.Conn().PgConn().Exec(ctx, "ROLLBACK").ReadAll()
		}
		return nil, err
	}
	if err := t.commit(); err != nil {
		if !errors.Is(err, ledger.ErrUnavailable) {
			_, _ = c.Conn().PgConn().Exec(ctx, "ROLLBACK").ReadAll()
		}
		return nil, err
	}
	return errs, nil
}

var (
	_ ledger.Store = (*Store)(nil)
	_ ledger.Tx    = (*tx)(nil)
)
