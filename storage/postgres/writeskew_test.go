package postgres_test

// Writes at once on two replicas (two stores on one database, at Read
// Committed) whose outcome must be one that some order of the two
// would give. One replica's Update is held, by a channel, right after a
// chosen read while the other replica writes; it is let go once the other
// has committed or waits for a lock the held one took.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/jackc/pgx/v5"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// pause holds the first transaction that reaches it until released.
type pause struct {
	once             sync.Once
	reached, release chan struct{}
}

func newPause() *pause { return &pause{reached: make(chan struct{}), release: make(chan struct{})} }

func (p *pause) hit() {
	p.once.Do(func() {
		close(p.reached)
		<-p.release
	})
}

// pausingStore is a replica's store whose Update transactions can be
// wrapped, to pause after a read.
type pausingStore struct {
	*postgres.Store
	wrap atomic.Pointer[func(ledger.Tx) ledger.Tx]
}

func (s *pausingStore) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	w := s.wrap.Load()
	if w == nil {
		return s.Store.Update(ctx, fn)
	}
	return s.Store.Update(ctx, func(tx ledger.Tx) error { return fn((*w)(tx)) })
}

func (s *pausingStore) pauseWith(f func(ledger.Tx) ledger.Tx) { s.wrap.Store(&f) }

// Each wrapper pauses right after one read returns.
type afterIncidents struct {
	ledger.Tx
	p *pause
}

func (t afterIncidents) Incidents(n int, before uint64) ([]*ledger.IncidentRecord, error) {
	out, err := t.Tx.Incidents(n, before)
	t.p.hit()
	return out, err
}

type afterIncidentSeq struct {
	ledger.Tx
	p *pause
}

func (t afterIncidentSeq) NextIncidentSeq() (uint64, error) {
	n, err := t.Tx.NextIncidentSeq()
	t.p.hit()
	return n, err
}

type afterRow struct {
	ledger.Tx
	p *pause
}

func (t afterRow) Row(id string) (*ledger.Row, error) {
	r, err := t.Tx.Row(id)
	t.p.hit()
	return r, err
}

type afterRevocation struct {
	ledger.Tx
	p *pause
}

func (t afterRevocation) Revocation(grant string) (*ledger.Revocation, error) {
	r, err := t.Tx.Revocation(grant)
	t.p.hit()
	return r, err
}

type afterEvidence struct {
	ledger.Tx
	p *pause
}

func (t afterEvidence) Evidence(id string) ([]byte, error) {
	b, err := t.Tx.Evidence(id)
	t.p.hit()
	return b, err
}

// clockReplica is a ledger on a pausingStore with a clock of its own.
type clockReplica struct {
	store *pausingStore
	l     *ledger.Ledger
	now   atomic.Pointer[time.Time]
}

func (r *clockReplica) set(t time.Time) { r.now.Store(&t) }

// world is one database and evidence store, and the scenario whose
// receipts its replicas verify.
type world struct {
	dsn     string
	sc      *pacttest.Scenario
	objects ledger.ObjectStore
}

func newWorld(t *testing.T) *world {
	t.Helper()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	dir, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &world{dsn: migrated(t), sc: sc, objects: dir}
}

// ledger returns a ledger on store with w's evidence directory, trusting
// w's brands and agents (their keys fetched over loopback).
func (w *world) ledger(t *testing.T, store ledger.Store, cfg ledger.Config) *ledger.Ledger {
	t.Helper()
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), w.sc.Brands(), w.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: w.sc.Audience, CheckedBy: "pactledger test"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(store, w.objects, v, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (w *world) replica(t *testing.T, holder string) *clockReplica {
	t.Helper()
	r := &clockReplica{store: &pausingStore{Store: open(t, postgres.Config{DSN: w.dsn})}}
	r.set(time.Now())
	r.l = w.ledger(t, r.store, ledger.Config{Now: func() time.Time { return *r.now.Load() },
		Logger: slog.New(slog.DiscardHandler), Leases: ledger.LeaseConfig{Holder: holder}})
	return r
}

func input(r *pacttest.Receipt) ledger.ReceiptInput {
	return ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions}
}

// runPaused runs op, waits until its transaction reached the pause, then
// runs other and lets op's transaction go once other has ended or a
// backend of the database waits for a lock (other waits for op's
// transaction). It returns op's error.
func runPaused(t *testing.T, dsn string, p *pause, op func() error, other func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case <-p.reached:
	case err := <-done:
		t.Fatalf("the held operation ended before its pause: %v", err)
	}
	conn := sqlConn(t, dsn)
	otherDone := make(chan struct{})
	go func() { other(); close(otherDone) }()
	poll(t, "the other write ends or waits for a lock", 30*time.Second, func() bool {
		select {
		case <-otherDone:
			return true
		default:
		}
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	close(p.release)
	<-otherDone
	return <-done
}

// sqlConn connects to dsn for a test's own reads.
func sqlConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestSweepAndAnIncidentOnItsRowAtOnce: row X is due. Replica A's sweep
// reads the open incidents in its deleting transaction (none) and is
// held there; replica B records an incident of X's agent platform and
// day that read X: a duplicate of X (the same receipt with other args, or
// another receipt reusing X's request JWT beyond its grant's scopes), or
// another receipt under X's grant over a countMax of 1 that counted X.
// In any order of the two, either the incident holds X's day and X is
// kept, or X is swept first and the post did not read it (the receipt is
// expired; the other receipt is a first use, or within its limit).
func TestSweepAndAnIncidentOnItsRowAtOnce(t *testing.T) {
	const sameReceipt, requestJWT, counted = "the same receipt, other args", "another receipt, X's request JWT", "another receipt under X's grant, countMax 1"
	for _, post := range []string{sameReceipt, requestJWT, counted} {
		t.Run(post, func(t *testing.T) {
			w := newWorld(t)
			a, b := w.replica(t, "sweeper"), w.replica(t, "writer")
			rc := w.sc.Mint(pacttest.Spec{Target: "X-1"})
			x, _, err := b.l.AppendReceipt(t.Context(), input(rc))
			if err != nil {
				t.Fatal(err)
			}
			if err := storetest.DrainOutbox(t.Context(), b.l); err != nil {
				t.Fatal(err)
			}
			a.set(x.RetainUntil.Add(24 * time.Hour))
			again := input(rc)
			again.Actions = append([]verifier.Action(nil), again.Actions...)
			again.Actions[0].ArgsJSON = `{"order":"Y-other"}`
			switch post {
			case requestJWT:
				other := w.sc.Mint(pacttest.Spec{Target: "Y-1", ScopesUsed: []string{"plan:change"}, Jti: rc.RequestClaims["jti"].(string)})
				other.RequestJWT = rc.RequestJWT
				again = input(other)
			case counted:
				again = input(w.sc.Mint(pacttest.Spec{Target: "Y-1"}))
				again.Limits = &ledger.Limits{CountMax: 1}
			}
			var (
				y       *ledger.Row
				postErr error
				res     *ledger.SweepResult
			)
			p := newPause()
			a.store.pauseWith(func(tx ledger.Tx) ledger.Tx { return afterIncidents{tx, p} })
			err = runPaused(t, w.dsn, p, func() error {
				var err error
				res, err = a.l.Sweep(t.Context(), false)
				return err
			}, func() { y, _, postErr = b.l.AppendReceipt(t.Context(), again) })
			if err != nil {
				t.Fatalf("sweep: %v", err)
			}
			swept := len(res.Swept) == 1 && res.Swept[0].RowID == x.ID
			if errors.Is(postErr, ledger.ErrExpired) && swept {
				t.Logf("X swept first; the post answered %v", postErr)
				return
			}
			if postErr != nil {
				t.Fatalf("the post: %v (X swept: %v)", postErr, swept)
			}
			readX := y.Verifier.DuplicateOf == x.ID
			if post == counted {
				readX = y.Status == ledger.Incident
			}
			switch {
			case swept && readX:
				t.Fatalf("X was swept, and the post, which read X, was recorded %s (incident %s, duplicate of %q): its incident holds X's agent platform and day; no order of the two gives both",
					y.Status, y.IncidentID, y.Verifier.DuplicateOf)
			case !swept && !readX:
				t.Fatalf("X kept (%+v) while the post did not read it (%s, duplicate of %q)", res.Kept, y.Status, y.Verifier.DuplicateOf)
			default:
				t.Logf("X swept: %v; the post read X: %v (%s)", swept, readX, y.Status)
			}
		})
	}
}

// TestSweepSeesAnIncidentCommittedAfterALaterNumberedOne: incident
// numbers come from a sequence, in the order writes ask for them, not
// the order they commit. Replica B records an incident on row X's agent
// platform and day and is held after taking its number (INC-1); replica
// C records an incident of another day (INC-2), which commits. Replica
// A's sweep reads the incidents (INC-2 alone) and decides X goes, and is
// held in its deleting transaction; B commits. The deleting transaction
// must find INC-1, numbered below the highest the sweep read, and keep X.
func TestSweepSeesAnIncidentCommittedAfterALaterNumberedOne(t *testing.T) {
	w := newWorld(t)
	a, b, c := w.replica(t, "sweeper"), w.replica(t, "writer-b"), w.replica(t, "writer-c")
	x, _, err := c.l.AppendReceipt(t.Context(), input(w.sc.Mint(pacttest.Spec{Target: "X-1"})))
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.DrainOutbox(t.Context(), c.l); err != nil {
		t.Fatal(err)
	}
	// Two revoked grants: a write under a revoked grant holds the grant
	// until it commits.
	for _, g := range []string{"a2agrant_REVOKED_B", "a2agrant_REVOKED_C"} {
		if _, err := c.l.RevokeGrant(t.Context(), g, time.Unix(0, 0), "", "writer-key", false); err != nil {
			t.Fatal(err)
		}
	}
	a.set(x.RetainUntil.Add(24 * time.Hour))
	incidentOn := func(r *clockReplica, target string, at time.Time) (*ledger.Row, error) {
		grant := "a2agrant_REVOKED_C"
		if r == b {
			grant = "a2agrant_REVOKED_B"
		}
		row, _, err := r.l.AppendReceipt(t.Context(), input(w.sc.Mint(pacttest.Spec{GrantID: grant, Target: target, At: at})))
		if err == nil && row.Status != ledger.Incident {
			err = fmt.Errorf("row %s is %s, want INCIDENT", target, row.Status)
		}
		return row, err
	}

	pb := newPause()
	b.store.pauseWith(func(tx ledger.Tx) ledger.Tx { return afterIncidentSeq{tx, pb} })
	var early *ledger.Row
	bDone := make(chan error, 1)
	go func() {
		var err error
		early, err = incidentOn(b, "EARLY-1", x.IssuedAt.Add(time.Hour))
		bDone <- err
	}()
	<-pb.reached
	later, err := incidentOn(c, "LATER-1", x.IssuedAt.AddDate(0, 0, -3))
	if err != nil {
		t.Fatal(err)
	}

	pa := newPause()
	a.store.pauseWith(func(tx ledger.Tx) ledger.Tx { return afterRow{tx, pa} })
	var res *ledger.SweepResult
	aDone := make(chan error, 1)
	go func() {
		var err error
		res, err = a.l.Sweep(t.Context(), false)
		aDone <- err
	}()
	select {
	case <-pa.reached:
	case err := <-aDone:
		t.Fatalf("the sweep ended before its deleting transaction: %v (%+v)", err, res)
	}
	close(pb.release)
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	close(pa.release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if early.IncidentID != "INC-1" || later.IncidentID != "INC-2" {
		t.Fatalf("incidents %s and %s, want INC-1 on X's day and INC-2", early.IncidentID, later.IncidentID)
	}
	for _, s := range res.Swept {
		if s.RowID == x.ID {
			t.Fatal("X was swept while INC-1, committed before the sweep's deleting transaction read the incidents, holds its agent platform and day")
		}
	}
	if len(res.Kept) != 1 || res.Kept[0].RowID != x.ID || !strings.Contains(res.Kept[0].Kept, "agent platform") {
		t.Fatalf("kept %+v, want X, for the open incident on its day", res.Kept)
	}
}

// TestRevocationsAtOnceKeepTheEarlier: two revocations of one grant with
// none recorded before. Replica A's (at T2) reads none and is held;
// replica B's (at T1, earlier) is recorded. In any order the earlier time
// stays: both answer T1, the record keeps it, and a receipt issued
// between T1 and T2 fails grant_not_revoked.
func TestRevocationsAtOnceKeepTheEarlier(t *testing.T) {
	w := newWorld(t)
	a, b := w.replica(t, "replica-a"), w.replica(t, "replica-b")
	const grant = "grant-revoked-twice"
	at := time.Date(2026, 10, 7, 13, 12, 44, 0, time.UTC)
	rc := w.sc.Mint(pacttest.Spec{Target: "R-1", GrantID: grant, At: at})
	t1, t2 := at.Add(-time.Hour), at.Add(time.Hour)
	var revA, revB ledger.Revocation
	var errB error
	p := newPause()
	a.store.pauseWith(func(tx ledger.Tx) ledger.Tx { return afterRevocation{tx, p} })
	errA := runPaused(t, w.dsn, p, func() error {
		var err error
		revA, err = a.l.RevokeGrant(t.Context(), grant, t2, "the later report", "ops-a", false)
		return err
	}, func() { revB, errB = b.l.RevokeGrant(t.Context(), grant, t1, "the earlier report", "ops-b", false) })
	if errA != nil || errB != nil {
		t.Fatalf("revocations: %v, %v", errA, errB)
	}
	v, err := b.l.Grant(t.Context(), grant)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Revocation.RevokedAt.Equal(t1) || !revB.RevokedAt.Equal(t1) {
		t.Fatalf("recorded revokedAt %s (A answered %s, B %s); want the earlier %s kept", v.Revocation.RevokedAt, revA.RevokedAt, revB.RevokedAt, t1)
	}
	row, _, err := b.l.AppendReceipt(t.Context(), input(rc))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range row.Verifier.Checks {
		if c.Name == verifier.CheckGrantNotRevoked && c.Result != verifier.Fail {
			t.Errorf("a receipt issued between the two revocations: %s %v (%s), want FAIL", c.Name, c.Result, c.Detail)
		}
	}
}

// TestRestoreEvidenceAndSweepAtOnce: row X's stored evidence was
// altered. Replica A restores it from the write-once copy and is held
// after reading the altered bundle; replica B sweeps X. In any order no
// bundle is left for a swept row: a restore before the sweep is removed
// with the row, a restore after it finds the row expired.
func TestRestoreEvidenceAndSweepAtOnce(t *testing.T) {
	w := newWorld(t)
	a, b := w.replica(t, "restorer"), w.replica(t, "sweeper")
	x, _, err := a.l.AppendReceipt(t.Context(), input(w.sc.Mint(pacttest.Spec{Target: "E-1"})))
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.DrainOutbox(t.Context(), a.l); err != nil {
		t.Fatal(err)
	}
	conn := sqlConn(t, w.dsn)
	if _, err := conn.Exec(t.Context(), "UPDATE evidence SET bundle = 'altered' WHERE row_id = $1", x.ID); err != nil {
		t.Fatal(err)
	}
	b.set(x.RetainUntil.Add(24 * time.Hour))
	var res *ledger.SweepResult
	var sweepErr error
	p := newPause()
	a.store.pauseWith(func(tx ledger.Tx) ledger.Tx { return afterEvidence{tx, p} })
	restoreErr := runPaused(t, w.dsn, p, func() error {
		_, _, err := a.l.RestoreEvidence(t.Context(), x.ID)
		return err
	}, func() { res, sweepErr = b.l.Sweep(t.Context(), false) })
	if restoreErr != nil && !errors.Is(restoreErr, ledger.ErrExpired) || sweepErr != nil {
		t.Fatalf("restore: %v; sweep: %v", restoreErr, sweepErr)
	}
	var rows, bundles int
	if err := conn.QueryRow(t.Context(), "SELECT (SELECT count(*) FROM ledger_rows WHERE id = $1), (SELECT count(*) FROM evidence WHERE row_id = $1)", x.ID).Scan(&rows, &bundles); err != nil {
		t.Fatal(err)
	}
	if len(res.Swept) != 1 || rows != 0 || bundles != 0 {
		t.Fatalf("swept %d rows; X's rows %d, evidence bundles %d; want X swept with its bundle", len(res.Swept), rows, bundles)
	}
}

// TestSnapshotDroppedUnderItsExtension runs the scenario of
// storetest.SnapshotDroppedUnderItsExtension on PostgreSQL.
func TestSnapshotDroppedUnderItsExtension(t *testing.T) {
	storetest.SnapshotDroppedUnderItsExtension(t, func(t *testing.T, sc *pacttest.Scenario, objects ledger.ObjectStore) (*ledger.Ledger, ledger.Store, func(time.Time)) {
		w := &world{dsn: migrated(t), sc: sc, objects: objects}
		r := w.replica(t, "replica")
		return r.l, r.store, r.set
	})
}
