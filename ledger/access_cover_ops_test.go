package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/objecttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/localdir"
)

// fsckClean fails t with the findings fsck reports, if any.
func fsckClean(t *testing.T, h *harness, when string) {
	t.Helper()
	if p := problems(integrity(t, h)); p != "" {
		t.Fatalf("%s:\n%s", when, p)
	}
}

// A batch of access records whose put keeps being refused goes to the
// dead letters while later batches are put; fsck finds no numbers in no
// batch then, nor after the dead letter is retried (ledgerctl outbox
// retry) and put.
func TestIntegrityAcceptsAnAccessBatchDeadLetteredAndRetried(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.accessKept = retention.Period{Months: 12}
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	dir, err := localdir.Open(filepath.Join(h.dir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	objects := objecttest.NewRefusingPuts(dir, ledger.AccessKey(4, 6))
	h.objects = objects
	h.open(t)
	log := h.accessLog()
	reads(t, log, "auditor", 3) // 1-3
	h.drain(t)
	reads(t, log, "support-leads", 3) // 4-6, refused
	// Each round another batch is put, so the refusal is counted.
	for i := 0; ; i++ {
		if n, err := h.l.DeadLetterCount(ctx); err != nil || n == 1 {
			break
		}
		if i == 2*ledger.DefaultMaxAttempts {
			t.Fatal("the refused batch never became a dead letter")
		}
		reads(t, log, "auditor", 1)
		if _, err := h.l.UploadRound(ctx, 512, 4); err != nil && !errors.Is(err, objecttest.ErrPutRefused) {
			t.Fatal(err)
		}
		fsckClean(t, h, fmt.Sprintf("round %d, the batch of 4-6 refused", i))
	}
	h.drain(t)
	fsckClean(t, h, "the batch of 4-6 in the dead letters")
	objects.Refuse(ledger.AccessKey(4, 6), false)
	if n, err := h.l.RetryDeadLetters(ctx, ledger.AccessKey(4, 6), false); err != nil || n != 1 {
		t.Fatalf("retry: %d, %v", n, err)
	}
	fsckClean(t, h, "the batch of 4-6 queued again")
	h.drain(t)
	if n, err := h.l.DeadLetterCount(ctx); err != nil || n != 0 {
		t.Fatalf("dead letters after the retry: %d, %v", n, err)
	}
	if _, err := h.l.WriteOnceCopy(ctx, ledger.AccessKey(4, 6)); err != nil {
		t.Fatalf("the retried batch's copy: %v", err)
	}
	fsckClean(t, h, "the batch of 4-6 put after the retry")
}

// Access records pruned by the log's retention, including the first
// records of a batch whose later records are kept (reads queued for a
// month while the row store took no writes), are no finding, whether or
// not the batch's object is past its retain-until.
func TestIntegrityAcceptsAccessRecordsPrunedAcrossABatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // past the first record's retention
	}{
		{"object past its retain-until", 48 * time.Hour},
		{"object still retained", 2 * time.Minute}, // within the 5 minutes fsck allows for skew
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h, log := accessHarness(t)
			start := h.clock()
			reads(t, log, "auditor", 3) // 1-3 at start
			h.drain(t)
			// 4-7 in one batch: two reads at start, two a month later.
			for i := range 4 {
				if i == 2 {
					h.set(start.AddDate(0, 1, 0))
				}
				if err := log.Record(ctx, ledger.Access{Key: "support-leads", RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := log.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			h.drain(t)
			reads(t, log, "auditor", 2) // 8-9 a month later
			h.drain(t)
			fsckClean(t, h, "before the prune")
			h.set(start.AddDate(0, 12, 0).Add(tc.after))
			if n, err := log.Prune(ctx); err != nil || n != 5 {
				t.Fatalf("pruned %d, %v; want records 1-5", n, err)
			}
			fsckClean(t, h, "after the prune")
			reads(t, log, "auditor", 2) // 10-11
			fsckClean(t, h, "a batch queued after the prune")
			h.drain(t)
			fsckClean(t, h, "a batch put after the prune")
		})
	}
}

// Reads recorded in memory and never written (ledgerd killed, or its store
// closed before the access log's last write) leave no number in no batch:
// fsck on the file opened again finds nothing, and later reads are numbered
// and anchored without a gap.
func TestIntegrityAcceptsReadsLostBeforeTheirWrite(t *testing.T) {
	ctx := context.Background()
	h, log := accessHarness(t)
	reads(t, log, "auditor", 3) // 1-3
	h.drain(t)
	for i := range 5 {
		if err := log.Record(ctx, ledger.Access{Key: "support-leads", RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	// The store closes under a write in flight: the write commits whole
	// or not at all.
	flushed := make(chan error, 1)
	go func() { flushed <- log.Flush(ctx) }()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	ferr := <-flushed
	h.open(t)
	lost := log.Queued()
	if (ferr == nil) != (lost == 0) {
		t.Fatalf("flush: %v with %d records still queued", ferr, lost)
	}
	log = h.accessLog() // the process's memory is gone
	fsckClean(t, h, fmt.Sprintf("reopened after %d reads were lost", lost))
	reads(t, log, "auditor", 2)
	fsckClean(t, h, "a batch queued after the reopen")
	h.drain(t)
	fsckClean(t, h, "a batch put after the reopen")
}

// A write of access records that fails in its transaction (another write
// of its group commit fails, or the write itself) hands its numbers back
// on bbolt: the records written again get them, and fsck finds no gap.
func TestIntegrityAcceptsAccessWritesThatFailedAndWereRetried(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.accessKept = retention.Period{Months: 12}
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failNext := false
	errInjected := errors.New("injected failure after the access records were appended")
	h.open(t)
	log := ledger.NewAccessLog(failingUpdates{Store: h.store, mu: &mu, fail: &failNext, err: errInjected}, ledger.AccessLogConfig{Retention: h.accessKept, Now: h.clock})
	reads(t, log, "auditor", 3)
	for i := range 3 {
		for j := range 2 {
			if err := log.Record(ctx, ledger.Access{Key: "support-leads", RPC: "ListRows", Principal: fmt.Sprint("acct-", i, j), Result: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		failNext = true
		mu.Unlock()
		if err := log.Flush(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("flush with the write failing: %v", err)
		}
		// A context cancelled as the write is queued: it is written or
		// kept for the next write.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_ = log.Flush(cctx)
		if err := log.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			h.drain(t)
		}
		fsckClean(t, h, fmt.Sprintf("after failed write %d", i))
	}
	h.drain(t)
	fsckClean(t, h, "drained")
}

// failingUpdates fails the next Update after its fn ran, when *fail is set.
type failingUpdates struct {
	ledger.Store
	mu   *sync.Mutex
	fail *bool
	err  error
}

func (s failingUpdates) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	s.mu.Lock()
	fail := *s.fail
	*s.fail = false
	s.mu.Unlock()
	if !fail {
		return s.Store.Update(ctx, fn)
	}
	return s.Store.Update(ctx, func(tx ledger.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return s.err
	})
}

// fsck run while reads are written and their batches put (and the
// outbox's entries move from queued to recorded during the check) finds
// nothing.
func TestIntegrityAcceptsAccessBatchesMovingDuringTheCheck(t *testing.T) {
	ctx := context.Background()
	h, log := accessHarness(t)
	reads(t, log, "auditor", 3)
	h.drain(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // reads, written in small batches
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				errs <- log.Flush(ctx)
				return
			default:
			}
			if err := log.Record(ctx, ledger.Access{Key: "support-leads", RPC: "ListRows", Principal: fmt.Sprint("acct-", i), Result: "ok"}); err != nil {
				errs <- err
				return
			}
			if i%3 == 2 {
				if err := log.Flush(ctx); err != nil {
					errs <- err
					return
				}
			}
		}
	}()
	go func() { // the uploader
		defer wg.Done()
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if _, err := h.l.UploadRound(ctx, 4, 2); err != nil {
				errs <- err
				return
			}
		}
	}()
	recorded := func() int {
		var locs []ledger.Location
		if err := h.store.View(ctx, func(tx ledger.Tx) error {
			var err error
			locs, err = tx.ObjectsUnder("access/", "", 1000)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return len(locs)
	}
	var findings string
	// At least 40 checks, and until 20 batches were put meanwhile.
	for i := 0; i < 40 || recorded() < 21 && i < 2000; i++ {
		p, err := h.l.CheckIntegrity(ctx, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		if s := problems(p); s != "" {
			findings = fmt.Sprintf("check %d:\n%s", i, s)
			break
		}
	}
	close(stop)
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if findings != "" {
		t.Fatal(findings)
	}
	h.drain(t)
	fsckClean(t, h, "drained")
}
