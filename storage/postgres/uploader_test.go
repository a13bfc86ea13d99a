package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// The uploader's rounds on two replicas sharing one database: the claims
// are PostgreSQL's own (FOR UPDATE, SKIP LOCKED, the database's clock),
// where the ledger's tests play the other replica with a store wrapper.

// countedPuts is the evidence store the replicas share: a local directory
// that counts puts by key and fails segment puts while failing is set.
type countedPuts struct {
	ledger.ObjectStore
	mu      sync.Mutex
	failing bool
	puts    map[string]int
}

var errPutRefused = errors.New("segment put refused")

func (s *countedPuts) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	s.mu.Lock()
	s.puts[key]++
	fail := s.failing && strings.HasPrefix(key, "segments/")
	s.mu.Unlock()
	if fail {
		return ledger.Location{}, errPutRefused
	}
	return s.ObjectStore.Put(ctx, key, body, until)
}

func (s *countedPuts) fail(on bool) {
	s.mu.Lock()
	s.failing = on
	s.mu.Unlock()
}

// segmentPuts is how many segment puts the store has had.
func (s *countedPuts) segmentPuts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.puts {
		if strings.HasPrefix(k, "segments/") {
			n += c
		}
	}
	return n
}

// replica is one ledger on a store of its own over the shared database.
type replica struct {
	store *postgres.Store
	l     *ledger.Ledger
	logs  *syncbuf.Buffer
}

// newReplica opens a ledger named holder on a store of its own over the
// database at dsn, verifying sc's receipts, its evidence in objects.
func newReplica(t *testing.T, dsn string, sc *pacttest.Scenario, objects ledger.ObjectStore, holder string) replica {
	t.Helper()
	r := replica{store: open(t, postgres.Config{DSN: dsn}), logs: &syncbuf.Buffer{}}
	reg, err := verifier.NewRegistry(verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true}), sc.Brands(), sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, err := verifier.New(verifier.Config{Audience: sc.Audience, CheckedBy: "pactledger test"})
	if err != nil {
		t.Fatal(err)
	}
	r.l, err = ledger.New(r.store, objects, v, reg, ledger.Config{Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Leases: ledger.LeaseConfig{Holder: holder}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// replicasOver opens replicas a and b on one fresh database, verifying the
// receipts of the scenario it returns, with their evidence in an evidence
// directory as wrap wraps it.
func replicasOver[S ledger.ObjectStore](t *testing.T, wrap func(*localdir.Store) S) (sc *pacttest.Scenario, a, b replica, objects S) {
	t.Helper()
	return replicasOn(t, migrated(t), wrap)
}

// replicasOn is replicasOver on the database at dsn.
func replicasOn[S ledger.ObjectStore](t *testing.T, dsn string, wrap func(*localdir.Store) S) (sc *pacttest.Scenario, a, b replica, objects S) {
	t.Helper()
	sc = pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	dir, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objects = wrap(dir)
	return sc, newReplica(t, dsn, sc, objects, "replica-a"), newReplica(t, dsn, sc, objects, "replica-b"), objects
}

// twoReplicas opens replicas a and b on one fresh database and one
// evidence store, and appends three receipts through a.
func twoReplicas(t *testing.T) (a, b replica, objects *countedPuts) {
	t.Helper()
	sc, a, b, objects := replicasOver(t, func(dir *localdir.Store) *countedPuts { return &countedPuts{ObjectStore: dir, puts: map[string]int{}} })
	for i := range 3 {
		r := sc.Mint(pacttest.Spec{Target: fmt.Sprint("T-", i)})
		if _, _, err := a.l.AppendReceipt(t.Context(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, objects
}

// outboxIs fails t unless r sees depth entries queued, plans segment
// plans and no dead letters.
func outboxIs(t *testing.T, r replica, when string, depth, plans int) {
	t.Helper()
	rep, err := r.l.Outbox(t.Context(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Depth != depth || rep.Plans != plans || rep.DeadLetterCount != 0 {
		t.Fatalf("%s: %d entries queued, %d plans, %d dead letters %+v; want %d, %d, none",
			when, rep.Depth, rep.Plans, rep.DeadLetterCount, rep.DeadLetters, depth, plans)
	}
}

// TestReplicaLeavesAPlanToItsHolder: replica a records a segment plan and
// its put fails, so a's claim on the plan's members stays live; replica
// b's round claims none of them and puts nothing, and the plan stays; a's
// next round puts it and the outbox drains.
func TestReplicaLeavesAPlanToItsHolder(t *testing.T) {
	ctx := t.Context()
	a, b, objects := twoReplicas(t)
	objects.fail(true)
	if _, err := a.l.UploadRound(ctx, 512, 4); !errors.Is(err, errPutRefused) {
		t.Fatalf("a's round with segment puts refused: %v", err)
	}
	objects.fail(false)
	// The plan's members are left: the bundles (the key sets' snapshots
	// went up as objects of their own).
	var plans []ledger.SegmentPlan
	if err := a.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		plans, err = tx.SegmentPlans()
		return err
	}); err != nil || len(plans) != 1 {
		t.Fatalf("plans after a's failed put: %+v, %v; want one", plans, err)
	}
	depth := len(plans[0].Entries)
	outboxIs(t, a, "after a's failed put", depth, 1)
	puts := objects.segmentPuts()

	if n, err := b.l.UploadRound(ctx, 512, 4); err != nil || n != 0 {
		t.Fatalf("b's round while a holds every entry: %d entries left the outbox, %v; want none, no error", n, err)
	}
	if again := objects.segmentPuts() - puts; again != 0 {
		t.Fatalf("b put %d segments of entries a holds", again)
	}
	outboxIs(t, b, "after b's round", depth, 1)

	if _, err := a.l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatal(err)
	}
	outboxIs(t, a, "after a's next round", 0, 0)
}

// TestReplicaLeavesAWaitedPutToItsHolder: an operation is queued ahead of
// its object's put, and replica b holds the put's claim. Replica a's round
// of one entry claims the operation, cannot claim the put, and leaves the
// operation queued without putting anything or moving it aside; b's round
// puts the object; a's next round applies the operation.
func TestReplicaLeavesAWaitedPutToItsHolder(t *testing.T) {
	ctx := t.Context()
	a, b, objects := twoReplicas(t)
	var put ledger.OutboxEntry
	err := a.store.Update(ctx, func(tx ledger.Tx) error {
		var err error
		put, _, err = storetest.OpsAheadOfPut(tx, 1, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	depth, err := a.l.OutboxDepth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = b.store.Update(ctx, func(tx ledger.Tx) error {
		all, err := tx.Outbox(100)
		if err != nil || len(all) == 0 {
			return fmt.Errorf("outbox %+v: %v", all, err)
		}
		got, err := tx.ClaimEntries([]uint64{all[len(all)-1].Seq}, "replica-b", 5*time.Minute)
		if err == nil && (len(got) != 1 || got[0].Key != put.Key || got[0].Op != "") {
			err = fmt.Errorf("b claimed %+v; want the put of %s", got, put.Key)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := a.l.UploadRound(ctx, 1, 4); err != nil {
		t.Fatal(err)
	}
	if n := objects.segmentPuts(); n != 0 {
		t.Fatalf("a put %d segments while b held the put its operation waits on", n)
	}
	outboxIs(t, a, "after a's round of one", depth, 0)
	if logs := a.logs.String(); !strings.Contains(logs, "operations wait on the puts of their objects") || !strings.Contains(logs, "claimed=0") {
		t.Fatalf("a's round logged:\n%s\nwant the operation waiting and the put left to its holder", logs)
	}

	// b's round takes the put it holds and the entries no one holds, and
	// passes over the operation a holds.
	if _, err := b.l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatal(err)
	}
	outboxIs(t, b, "after b's round", 1, 0)
	if _, err := a.l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatal(err)
	}
	outboxIs(t, a, "after a's next round", 0, 0)
}

// TestAccessBatchesUploadAsWritten: access records written to PostgreSQL
// read back as the bytes their outbox entry hashed when it queued them,
// so the uploader puts their batch, which fsck then finds as written.
func TestAccessBatchesUploadAsWritten(t *testing.T) {
	ctx := t.Context()
	_, a, _, _ := replicasOver(t, func(dir *localdir.Store) *localdir.Store { return dir })
	log := ledger.NewAccessLog(a.store, ledger.AccessLogConfig{})
	for i := range 5 {
		if err := log.Record(ctx, ledger.Access{Key: "support-leads", RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatal(err)
	}
	outboxIs(t, a, "after the round", 0, 0)
	if _, err := a.l.WriteOnceCopy(ctx, ledger.AccessKey(1, 5)); err != nil {
		t.Fatalf("the batch's write-once copy: %v", err)
	}
	page, err := a.l.CheckIntegrity(ctx, 100, "")
	if err != nil || len(page.Findings) != 0 {
		t.Fatalf("fsck: %+v, %v", page.Findings, err)
	}
}

// TestIntegrityFindsAnAccessBatchRemovedWithItsRecord: PostgreSQL's
// sequence skips the numbers of rolled-back writes, so a run of access
// record numbers no batch holds is no finding by itself; one of whose
// numbers write-once storage holds a batch the row store neither records
// nor queues is: the batch and its records were removed from the database.
func TestIntegrityFindsAnAccessBatchRemovedWithItsRecord(t *testing.T) {
	ctx := t.Context()
	dsn := migrated(t)
	_, a, _, _ := replicasOn(t, dsn, func(dir *localdir.Store) *localdir.Store { return dir })
	log := ledger.NewAccessLog(a.store, ledger.AccessLogConfig{})
	batch := func(key string) {
		t.Helper()
		for i := range 3 {
			if err := log.Record(ctx, ledger.Access{Key: key, RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.l.UploadRound(ctx, 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	fsck := func() string {
		t.Helper()
		page, err := a.l.CheckIntegrity(ctx, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var ps []string
		for _, f := range page.Findings {
			ps = append(ps, f.Problem)
		}
		return strings.Join(ps, "\n")
	}
	batch("auditor") // 1-3
	// Numbers 4 and 5 go to writes rolled back.
	sqlValue[int64](t, dsn, "SELECT nextval('access_seq')")
	sqlValue[int64](t, dsn, "SELECT nextval('access_seq')")
	batch("support-leads") // 6-8
	batch("auditor")       // 9-11
	if p := fsck(); p != "" {
		t.Fatalf("numbers skipped by rolled-back writes:\n%s", p)
	}
	removed := sqlValue[int64](t, dsn, `WITH r AS (DELETE FROM access_log WHERE seq BETWEEN 6 AND 8 RETURNING 1),
o AS (DELETE FROM objects WHERE key = $1 RETURNING 1) SELECT (SELECT count(*) FROM r) + (SELECT count(*) FROM o)`, ledger.AccessKey(6, 8))
	if removed != 4 {
		t.Fatalf("removed %d records and object records, want 4", removed)
	}
	want := "access records 6–8 are in no batch the row store records or queues, but write-once storage holds " + ledger.AccessKey(6, 8)
	if p := fsck(); !strings.Contains(p, want) {
		t.Fatalf("findings:\n%s\nwant %q", p, want)
	}
}
