package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pactledger/pactledger/ledger"
)

// tx implements ledger.Tx on one connection inside one transaction.
//
// Statements that return nothing are queued and sent together with the
// next statement whose result is needed, or at the end of the member, in
// one round trip (a pgx batch is one pipeline): a row's writes cost what
// its reads cost. The writes every receipt makes are deferred further and
// sent for many members at once (group.go).
type tx struct {
	ctx   context.Context
	conn  *pgx.Conn
	write bool
	b     *pgx.Batch // queued statements not sent yet

	// err is the first statement error of the current member: its
	// subtransaction is aborted and nothing more runs until it is rolled
	// back.
	err error
	// fatal ends the whole transaction: the connection failed, or the
	// batch must run again.
	fatal error

	// Row ids and request-JWT hashes the current member read as absent;
	// when its own create then finds one taken, another transaction won
	// the race in between and the member runs again (rerun).
	absentRows map[string]bool
	absentJWTs map[string]bool
	// jwtRows: the row each request-JWT hash the member read named. A row
	// then read as absent was removed in between (a sweep): the member
	// raced for that request JWT as for one read as absent.
	jwtRows map[string]string
	rerun   bool

	// pre is what the member's Prefetch read, until it writes; retain the
	// snapshot retain-untils the member read with a snapshot or set (nil:
	// none); locked the snapshots it locked or stored (PutSnapshot). held
	// is what members that ended locked, with its retain-until: locked
	// until the transaction ends.
	pre    *prefetched
	retain map[string]*int64
	locked map[string]bool
	held   map[string]*int64

	// The current member's savepoint ("" in a View), whether its
	// SAVEPOINT is queued (the member has begun sending), its deferred
	// writes, whether it wrote anything at once (its deferred writes then
	// go with it), and whether it must run again after the group is sent.
	sp       string
	spQueued bool
	own      *writes
	wrote    bool
	restart  bool
	// seqLeaves are SequenceLeaf calls not queued yet: consecutive ones
	// go in one statement.
	seqLeaves []seqLeaf

	// group is the members that ended with deferred writes not sent yet;
	// again the members to run again once the group is sent.
	group []*member
	again []*member

	// mayWait is set in a transaction whose holds of grants wait
	// (HoldGrants); heldElsewhere when the current member, in a
	// transaction whose holds do not wait, found a grant held by another
	// transaction and must run again in one whose holds do.
	mayWait, heldElsewhere bool
}

func newTx(ctx context.Context, conn *pgx.Conn, write bool) *tx {
	return &tx{ctx: ctx, conn: conn, write: write, b: &pgx.Batch{}, absentRows: map[string]bool{}, absentJWTs: map[string]bool{}, jwtRows: map[string]string{},
		retain: map[string]*int64{}, locked: map[string]bool{}, held: map[string]*int64{}}
}

// errReadOnly: a write inside View.
var errReadOnly = errors.New("write in a read-only transaction")

// queue queues a statement outside any member (BEGIN).
func (t *tx) queue(sql string, args ...any) { t.b.Queue(sql, args...) }

// push queues a statement of the current member, to be sent with the next
// round trip: after the member's SAVEPOINT when it is its first, and after
// the leaves SequenceLeaf holds.
func (t *tx) push(sql string, args ...any) *pgx.QueuedQuery {
	t.queueLeaves()
	t.begin()
	return t.b.Queue(sql, args...)
}

// begin queues the current member's SAVEPOINT before its first statement.
func (t *tx) begin() {
	if t.sp != "" && !t.spQueued {
		t.b.Queue("SAVEPOINT " + t.sp)
		t.spQueued = true
	}
}

// blocked returns the error that stops any further statement.
func (t *tx) blocked() error {
	if t.fatal != nil {
		return t.fatal
	}
	return t.err
}

// exec queues a write that returns nothing.
func (t *tx) exec(sql string, args ...any) error {
	if !t.writing() {
		return errReadOnly
	}
	if err := t.blocked(); err != nil {
		return err
	}
	t.push(sql, args...)
	return nil
}

// flush sends the queued statements.
func (t *tx) flush(what string) error { return t.send(what, "", nil, nil) }

// send sends the queued statements and then, when sql is not empty, the
// query sql, whose rows scan reads.
func (t *tx) send(what, sql string, args []any, scan func(pgx.Rows) error) error {
	if err := t.blocked(); err != nil {
		return err
	}
	if sql != "" {
		t.push(sql, args...).Query(scan)
	} else {
		t.queueLeaves()
	}
	b := t.b
	t.b = &pgx.Batch{}
	if b.Len() == 0 {
		return nil
	}
	if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
		return t.fail(what, err)
	}
	return nil
}

// query runs a read (after the queued statements), scanning every row.
func (t *tx) query(what, sql string, args []any, each func(pgx.Rows) error) error {
	return t.send(what, sql, args, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := each(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// queryRow runs a read of at most one row and reports whether there was
// one.
func (t *tx) queryRow(what, sql string, args []any, dest ...any) (bool, error) {
	found := false
	err := t.send(what, sql, args, func(rows pgx.Rows) error {
		if !rows.Next() {
			return rows.Err()
		}
		found = true
		return rows.Scan(dest...)
	})
	return found, err
}

// fail records a failed round trip: a failed connection or a conflict
// that needs the batch run again ends the transaction; any other error
// ends the member (its statements may not have run).
func (t *tx) fail(what string, err error) error {
	switch {
	case !t.write && t.ctx.Err() != nil && errors.Is(err, t.ctx.Err()):
		// A read's caller gave up (its deadline, or it went away): not
		// the database's failure, whatever became of the connection.
		t.fatal = fmt.Errorf("%s: %w", what, err)
		return t.fatal
	case unavailable(err, t.conn):
		t.fatal = unavailableErr(what, err)
		return t.fatal
	case rerunBatch(err):
		t.fatal = fmt.Errorf("%w: %s: %w", errBatch, what, err)
		return t.fatal
	}
	t.err = fmt.Errorf("%s: %w", what, err)
	return t.err
}

// lock is the clause a read in a write transaction adds, so that a read
// and the write it leads to see no other writer in between.
func (t *tx) lock() string {
	if t.write {
		return " FOR UPDATE"
	}
	return ""
}

// member runs one Update call under a savepoint of its own: on error, or
// when it lost a race it must see the end of, its writes are rolled back
// and, for a race, it runs again. A member that wrote nothing at once
// ends with its deferred writes in the group (group.go), whose sending
// may still fail it or run it again (t.again).
func (t *tx) member(m *member, seq *int) {
	for {
		m.runs++
		*seq++
		t.startMember("m" + strconv.Itoa(*seq))
		if m.r.fence != nil {
			// A fenced member's writes go under its savepoint with its
			// lease check (checkFence), which comes last.
			t.wrote = true
		}
		err := m.r.fn(t)
		if t.fatal != nil {
			return
		}
		if t.restart {
			// It met the group's writes after it began: undone, it runs
			// again once they are sent (this run does not count).
			if !t.undoMember() {
				return
			}
			if t.settle(); t.fatal != nil {
				return
			}
			m.runs--
			continue
		}
		if err == nil && t.err == nil && !t.rerun {
			if !t.wrote && !t.own.empty() {
				m.w, t.own = t.own, nil
				t.endMember()
				t.group = append(t.group, m)
				*m.err = nil
				return
			}
			t.sendOwn()
			err = t.flush("write")
			if t.fatal != nil {
				return
			}
			if err == nil && t.err == nil && !t.rerun {
				if err = t.checkFence(m.r.fence); t.fatal != nil {
					return
				}
			}
			if err == nil && t.err == nil && !t.rerun {
				t.endMember()
				*m.err = nil
				return
			}
		}
		if err == nil {
			err = t.err
		}
		if err == nil {
			err = errRaced
		}
		rerun, alone := t.rerun, t.heldElsewhere
		if !t.undoMember() {
			return
		}
		switch {
		case alone:
			*m.err = errAlone
			return
		case !rerun:
			*m.err = err
			return
		case m.runs >= maxMemberRuns:
			*m.err = fmt.Errorf("gave up after %d runs, each losing a race with another writer: %w", m.runs, err)
			return
		}
	}
}

// maxMemberRuns bounds how often one member runs again after losing a
// race: each run sees the winner's row, so one more run is the rule.
const maxMemberRuns = 8

// startMember resets what the tx keeps for one member, whose savepoint is
// sp.
func (t *tx) startMember(sp string) {
	t.err, t.rerun, t.restart, t.wrote, t.heldElsewhere = nil, false, false, false, false
	clear(t.absentRows)
	clear(t.absentJWTs)
	clear(t.jwtRows)
	clear(t.retain)
	clear(t.locked)
	t.pre, t.own, t.seqLeaves = nil, nil, nil
	t.sp, t.spQueued = sp, false
}

// endMember ends the current member successfully: its savepoint is
// released with the next round trip, and the snapshots it locked stay
// locked (held) until the transaction ends.
func (t *tx) endMember() {
	if t.spQueued {
		t.b.Queue("RELEASE SAVEPOINT " + t.sp)
	}
	for id, retain := range t.retain {
		if _, held := t.held[id]; held || t.locked[id] {
			t.held[id] = retain
		}
	}
	t.sp, t.spQueued = "", false
}

// undoMember undoes the current member: its deferred writes are dropped;
// when it sent anything, the statements still queued are sent first (so
// that its savepoint exists), then its subtransaction is rolled back. A
// failure here ends the transaction.
func (t *tx) undoMember() bool {
	t.own, t.seqLeaves = nil, nil
	if t.spQueued {
		if t.err == nil {
			_ = t.flush("write")
			if t.fatal != nil {
				return false
			}
		}
		if !t.rollbackTo(t.sp) {
			return false
		}
	}
	t.err = nil
	t.sp, t.spQueued = "", false
	return true
}

// errAlone: a member found a grant it holds held by another transaction
// (HoldGrants); it runs again in a transaction of its own that waits.
var errAlone = errors.New("the write must run in a transaction of its own")

// errMemberRollback: a failed member could not be rolled back alone; the
// batch's members run one by one instead.
var errMemberRollback = errors.New("could not roll back one write of a batch")

// checkFence makes the lease check of a fenced member, once its writes
// are sent: a write to the lease row, so that it conflicts with a
// takeover, that touches the row only while the lease still has the token
// and is unexpired by the database's clock. From then until the
// transaction ends the row is locked, so no takeover comes between the
// check and the commit: it waits, and finds the token moved on only after
// the commit. When the check fails, the member's writes are rolled back
// with its savepoint and nothing of it commits.
//
// The check comes last, not first, so that the lease's row is locked only
// for the tail of the transaction: a fenced write that waits a long time
// inside its transaction (for a grant's hold, up to CommitTimeout) would
// otherwise hold the row that long, and the holder's own renewals, which
// wait for the row at most a part of the lease's ttl, would fail until
// the holder counted its lease as lost while the write still committed.
func (t *tx) checkFence(f *ledger.Fence) error {
	if f == nil {
		return nil
	}
	held, err := t.queryRow("check lease "+f.Lease,
		`UPDATE leases SET expires_at = expires_at WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp() RETURNING true`,
		[]any{f.Lease, int64(f.Token)}, new(bool))
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("%w: %s under token %d is no longer held", ledger.ErrLeaseLost, f.Lease, f.Token)
	}
	return nil
}

// commit commits the transaction.
func (t *tx) commit() error {
	if err := t.blocked(); err != nil {
		return err
	}
	var tag pgconn.CommandTag
	t.b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	b := t.b
	t.b = &pgx.Batch{}
	if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
		switch {
		case unavailable(err, t.conn):
			// The outcome is unknown: nothing is acknowledged.
			return unavailableErr("commit", err)
		case rerunBatch(err):
			return fmt.Errorf("%w: commit: %w", errBatch, err)
		}
		return fmt.Errorf("%w: %w", errCommit, err)
	}
	if tag.String() != "COMMIT" {
		return fmt.Errorf("%w: the transaction was rolled back (%s)", errCommit, tag)
	}
	return nil
}

// errCommit: COMMIT failed for a reason other than a lost connection or
// a conflict.
var errCommit = errors.New("commit failed")

// unavailable reports whether err means the database cannot be used right
// now: a lost or refused connection, credentials it rejects, a server
// shutting down or starting, too many connections, or a server that takes
// no writes (a standby).
func unavailable(err error, conn *pgx.Conn) bool {
	if err == nil {
		return false
	}
	if credentialsRejected(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutting down, crashed, starting
			pgErr.Code == "53300", // too many connections
			pgErr.Code == "25006": // read-only transaction: a standby
			return true
		}
		return false
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	if conn != nil && conn.IsClosed() {
		return true
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// rerunBatch reports whether err asks for the whole transaction to run
// again: a serialization failure or a deadlock.
func rerunBatch(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// ErrCredentials is the database refusing the user name or password a
// connection gave (SQLSTATE 28P01 or 28000): an error wrapping it also
// wraps ledger.ErrUnavailable. The password changed in the database and
// not where ledgerd reads it, or the other way round.
var ErrCredentials = errors.New("the database rejected the user name or password")

// credentialsRejected reports whether err is the server refusing a
// connection's credentials: invalid_password (28P01) or
// invalid_authorization_specification (28000: no such role, or no
// pg_hba.conf entry lets it in).
func credentialsRejected(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000")
}

// unavailableErr wraps err, a failure to use the database, so that it
// matches ledger.ErrUnavailable and keeps its cause; a refusal of the
// credentials also matches ErrCredentials.
func unavailableErr(what string, err error) error {
	if credentialsRejected(err) {
		return fmt.Errorf("%w: row store (postgres): %w: %s: %w", ledger.ErrUnavailable, ErrCredentials, what, err)
	}
	return fmt.Errorf("%w: row store (postgres): %s: %w", ledger.ErrUnavailable, what, err)
}

// classify wraps err from a statement on conn as unavailable when it is.
func classify(what string, err error, conn *pgx.Conn) error {
	if unavailable(err, conn) {
		return unavailableErr(what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// acquireErr wraps a failure to get a connection from the pool: the
// caller's own cancellation or deadline as it is, anything else as
// unavailable, the store's own deadline (outOfTime) included.
func acquireErr(ctx context.Context, err error) error {
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		return unavailableErr("connect", err)
	}
	if cause := context.Cause(ctx); errors.Is(cause, errOutOfTime) {
		return unavailableErr("connect", cause)
	}
	return err
}

// errOutOfTime is the cause of a deadline the store sets itself (a
// write's CommitTimeout, a read's wait for a connection, a lease call):
// the database did not answer in time, which is an unavailable store,
// unlike a caller's own deadline.
var errOutOfTime = errors.New("the database did not answer in time")

// outOfTime is the cause of a deadline of the store's own that allowed d.
func outOfTime(d time.Duration) error { return fmt.Errorf("%w (%s)", errOutOfTime, d) }
