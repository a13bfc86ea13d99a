package postgres_test

import (
	"github.com/go-jose/go-jose/v4"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/objecttest"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// failingWrites fails the Update after its fn ran while *fail is above
// zero (counting down): the write's savepoint rolls back in its group
// commit, and PostgreSQL's sequence skips the numbers it took.
type failingWrites struct {
	ledger.Store
	mu   *sync.Mutex
	fail *int
}

var errWriteFailed = errors.New("injected failure after the access records were appended")

func (s failingWrites) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	s.mu.Lock()
	fail := *s.fail > 0
	if fail {
		*s.fail--
	}
	s.mu.Unlock()
	if !fail {
		return s.Store.Update(ctx, fn)
	}
	return s.Store.Update(ctx, func(tx ledger.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errWriteFailed
	})
}

// accessSetting is a migrated database, a scenario and an evidence
// directory, for replicas that share them (accessReplica).
func accessSetting(t *testing.T) (string, *pacttest.Scenario, *localdir.Store) {
	t.Helper()
	dsn := migrated(t)
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	dir, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dsn, sc, dir
}

// accessReplica is newReplica with the ledger's clock and the access log's
// retention.
func accessReplica(t *testing.T, dsn string, sc *pacttest.Scenario, objects ledger.ObjectStore, holder string, now func() time.Time, kept retention.Period) replica {
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
	r.l, err = ledger.New(r.store, objects, v, reg, ledger.Config{Now: now, AccessRetention: kept, Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Leases: ledger.LeaseConfig{Holder: holder}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fsckProblems(t *testing.T, r replica) string {
	t.Helper()
	page, err := r.l.CheckIntegrity(t.Context(), 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, f := range page.Findings {
		ps = append(ps, f.Problem)
	}
	return strings.Join(ps, "\n")
}

// Two replicas on one database and one bucket record reads by several
// keys at once, some of their writes failing in their group commit (the
// sequence skips those numbers) and written again, while both upload and
// fsck runs: no check finds anything, nor one after the outbox drained.
func TestIntegrityFindsNoGapInTheAccessLogOfTwoReplicas(t *testing.T) {
	ctx := t.Context()
	dsn, sc, dir := accessSetting(t)
	reps := []replica{
		accessReplica(t, dsn, sc, dir, "replica-a", time.Now, retention.Period{}),
		accessReplica(t, dsn, sc, dir, "replica-b", time.Now, retention.Period{}),
	}
	var mu sync.Mutex
	fails := []int{0, 0}
	logs := make([]*ledger.AccessLog, 2)
	for i, r := range reps {
		logs[i] = ledger.NewAccessLog(failingWrites{Store: r.store, mu: &mu, fail: &fails[i]}, ledger.AccessLogConfig{})
	}
	const rounds = 30
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for i := range reps {
		for k, key := range []string{"support-leads", "auditor"} {
			wg.Add(1)
			go func() { // reads by key, each write of them failing now and then
				defer wg.Done()
				for n := range rounds {
					for j := range 3 {
						a := ledger.Access{Key: key, RPC: "ListRows", Principal: fmt.Sprintf("acct-%d-%d-%d", i, n, j), Result: "ok"}
						if err := logs[i].Record(ctx, a); err != nil {
							errs <- err
							return
						}
					}
					if n%5 == k {
						mu.Lock()
						fails[i]++
						mu.Unlock()
					}
					if err := logs[i].Flush(ctx); err != nil && !errors.Is(err, errWriteFailed) {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // the replica's uploader
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := reps[i].l.UploadRound(ctx, 8, 2); err != nil {
					errs <- fmt.Errorf("replica %d's round: %w", i, err)
					return
				}
			}
		}()
	}
	var findings string
	for n := 0; n < 10 && findings == ""; n++ {
		if p := fsckProblems(t, reps[n%2]); p != "" {
			findings = fmt.Sprintf("check %d, while reads were written and put:\n%s", n, p)
		}
	}
	// The writers end; then the uploaders.
	done := make(chan struct{})
	go func() {
		for i := range logs {
			for logs[i].Queued() > 0 {
				if err := logs[i].Flush(ctx); err != nil && !errors.Is(err, errWriteFailed) {
					errs <- err
					break
				}
			}
		}
		close(done)
	}()
	<-done
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if findings != "" {
		t.Fatal(findings)
	}
	for i := range logs {
		if err := logs[i].Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if n, _ := reps[0].l.OutboxDepth(ctx); n == 0 {
			break
		}
		if _, err := reps[0].l.UploadRound(ctx, 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	outboxIs(t, reps[0], "drained", 0, 0)
	if p := fsckProblems(t, reps[1]); p != "" {
		t.Fatalf("drained:\n%s", p)
	}
	// Every read was written once or more, and numbers were skipped.
	last := sqlValue[int64](t, dsn, "SELECT last_value FROM access_seq")
	kept := sqlValue[int64](t, dsn, "SELECT count(*) FROM access_log")
	if kept < 2*2*rounds*3 || last <= kept {
		t.Fatalf("%d records kept, the sequence at %d: want every read written and some numbers skipped", kept, last)
	}
}

// Access records pruned by the log's retention on PostgreSQL, where a
// record's number and its time need not go in the same order across
// replicas, and of batches that span the pruning boundary: no finding.
func TestIntegrityAcceptsAccessRecordsPrunedOnPostgres(t *testing.T) {
	ctx := t.Context()
	dsn, sc, dir := accessSetting(t)
	var clockMu sync.Mutex
	start := time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)
	now := start
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	set := func(t time.Time) { clockMu.Lock(); now = t; clockMu.Unlock() }
	kept := retention.Period{Months: 12}
	a := accessReplica(t, dsn, sc, dir, "replica-a", clock, kept)
	b := accessReplica(t, dsn, sc, dir, "replica-b", clock, kept)
	logA := ledger.NewAccessLog(a.store, ledger.AccessLogConfig{Retention: kept, Now: clock})
	logB := ledger.NewAccessLog(b.store, ledger.AccessLogConfig{Retention: kept, Now: clock})
	record := func(log *ledger.AccessLog, key string, n int) {
		t.Helper()
		for i := range n {
			if err := log.Record(ctx, ledger.Access{Key: key, RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush := func(log *ledger.AccessLog) {
		t.Helper()
		if err := log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() {
		t.Helper()
		for range 20 {
			if n, _ := a.l.OutboxDepth(ctx); n == 0 {
				return
			}
			if _, err := a.l.UploadRound(ctx, 512, 4); err != nil {
				t.Fatal(err)
			}
		}
	}
	// b records two reads at start and writes them after a's two reads of
	// a minute later: b's records have the higher numbers and the older
	// times.
	record(logB, "auditor", 2)
	set(start.Add(time.Minute))
	record(logA, "support-leads", 2)
	flush(logA) // 1-2 at start+1m
	flush(logB) // 3-4 at start
	// A batch spanning the boundary: two reads at start+1m, two a month later.
	record(logA, "support-leads", 2)
	set(start.AddDate(0, 1, 0))
	record(logA, "support-leads", 2)
	flush(logA) // 5-8
	drain()
	if p := fsckProblems(t, a); p != "" {
		t.Fatalf("before the prune:\n%s", p)
	}
	for _, at := range []time.Time{
		start.AddDate(0, 12, 0).Add(30 * time.Second), // 3-4 due, 1-2 not
		start.AddDate(0, 12, 0).Add(2 * time.Minute),  // 1-2 and 5-6 due, their objects still retained
		start.AddDate(0, 12, 0).Add(time.Hour),        // their objects past their retain-until
	} {
		set(at)
		if _, err := logB.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		if p := fsckProblems(t, a); p != "" {
			t.Fatalf("pruned at %s:\n%s", at, p)
		}
		record(logB, "auditor", 1)
		flush(logB)
		if p := fsckProblems(t, b); p != "" {
			t.Fatalf("pruned at %s, a batch queued:\n%s", at, p)
		}
		drain()
		if p := fsckProblems(t, b); p != "" {
			t.Fatalf("pruned at %s, a batch put:\n%s", at, p)
		}
	}
	if n := sqlValue[int64](t, dsn, "SELECT count(*) FROM access_log WHERE seq <= 8"); n != 2 {
		t.Fatalf("%d of records 1-8 kept, want 7-8", n)
	}
}

// A batch of access records dead-lettered on PostgreSQL (its put refused
// while later batches were put) and retried: no finding while it waits, is
// queued again or is put.
func TestIntegrityAcceptsAnAccessDeadLetterRetriedOnPostgres(t *testing.T) {
	ctx := t.Context()
	dsn, sc, dir := accessSetting(t)
	objects := objecttest.NewRefusingPuts(dir, ledger.AccessKey(4, 6))
	a := accessReplica(t, dsn, sc, objects, "replica-a", time.Now, retention.Period{})
	b := accessReplica(t, dsn, sc, objects, "replica-b", time.Now, retention.Period{})
	log := ledger.NewAccessLog(a.store, ledger.AccessLogConfig{})
	batch := func(key string, n int) {
		t.Helper()
		for i := range n {
			if err := log.Record(ctx, ledger.Access{Key: key, RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	batch("auditor", 3)       // 1-3
	batch("support-leads", 3) // 4-6, refused
	for i := 0; ; i++ {
		rep, err := a.l.Outbox(ctx, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if rep.DeadLetterCount == 1 {
			break
		}
		if i == 2*ledger.DefaultMaxAttempts {
			t.Fatalf("the refused batch never became a dead letter: %+v", rep)
		}
		batch("auditor", 1)
		if _, err := []replica{a, b}[i%2].l.UploadRound(ctx, 512, 4); err != nil && !errors.Is(err, objecttest.ErrPutRefused) {
			t.Fatal(err)
		}
		if p := fsckProblems(t, b); p != "" {
			t.Fatalf("round %d, the batch of 4-6 refused:\n%s", i, p)
		}
	}
	if p := fsckProblems(t, b); p != "" {
		t.Fatalf("the batch of 4-6 in the dead letters:\n%s", p)
	}
	objects.Refuse(ledger.AccessKey(4, 6), false)
	if n, err := b.l.RetryDeadLetters(ctx, ledger.AccessKey(4, 6), false); err != nil || n != 1 {
		t.Fatalf("retry: %d, %v", n, err)
	}
	if p := fsckProblems(t, a); p != "" {
		t.Fatalf("the batch of 4-6 queued again:\n%s", p)
	}
	if _, err := b.l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatal(err)
	}
	outboxIs(t, a, "after the retry", 0, 0)
	if p := fsckProblems(t, a); p != "" {
		t.Fatalf("the batch of 4-6 put after the retry:\n%s", p)
	}
}
