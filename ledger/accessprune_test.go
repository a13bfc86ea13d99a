package ledger_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// pruneLog is h's access log, kept 12 months, by h's clock, checking its
// clock as the ledger's sweep does; it logs to h.logs.
func pruneLog(h *harness) *ledger.AccessLog {
	return ledger.NewAccessLog(h.store, ledger.AccessLogConfig{Retention: retention.Period{Months: 12}, Now: h.clock,
		CheckClock: h.l.CheckPruneClock, Logger: slog.New(slog.NewTextHandler(h.logs, nil))})
}

// recordReads records n reads and writes them in one batch.
func recordReads(t *testing.T, log *ledger.AccessLog, n int) {
	t.Helper()
	for range n {
		if err := log.Record(context.Background(), ledger.Access{Key: "support", Roles: []string{"support"}, RPC: "GetRow", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// farFuture ends a listing after every record.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// accessRecords is how many records log lists.
func accessRecords(t *testing.T, log *ledger.AccessLog) int {
	t.Helper()
	page, err := log.List(context.Background(), ledger.AccessQuery{Limit: 1000, Before: farFuture})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Records)
}

// refusedBy is pactledger_sweeps_refused_total{sweep} by reason: sweep
// "rows" (the retention sweep) or "access_log" (the access log's prune).
func refusedBy(t *testing.T, reg *prometheus.Registry, sweep string) map[string]int {
	t.Helper()
	got := map[string]int{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "pactledger_sweeps_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["sweep"] == sweep {
				got[labels["reason"]] = int(m.GetCounter().GetValue())
			}
		}
	}
	return got
}

// TestAccessPruneDeletesNothingWhenItsClockIsAheadOfS3: the host's clock
// steps a year and a month forward and ledgerd restarts, which prunes
// the access log at once. The S3 evidence store's clock says the records
// are a day old: the prune removes none of them, says why at ERROR and
// counts the refusal. With the clock put right, nothing is due.
func TestAccessPruneDeletesNothingWhenItsClockIsAheadOfS3(t *testing.T) {
	objects := s3Evidence(t)
	h, reg := clockHarness(t, objects, ledger.ReferenceClock{Name: "the S3 evidence store", Now: objects.ServerTime})
	real := h.clock()
	log := pruneLog(h)
	recordReads(t, log, 5)
	h.drain(t) // the batch is in write-once storage: only the clock keeps the records

	h.set(real.AddDate(1, 1, 0))
	n, err := log.Prune(context.Background())
	var ahead *ledger.ClockAheadError
	if !errors.As(err, &ahead) || n != 0 {
		t.Fatalf("prune a year ahead of S3: removed %d, err %v; want none removed, a *ClockAheadError", n, err)
	}
	if got := accessRecords(t, log); got != 5 {
		t.Fatalf("records after the prune a year ahead: got %d, want 5", got)
	}
	if got := refusedBy(t, reg, "access_log"); got["clock_ahead"] != 1 || got["clock_unread"] != 0 {
		t.Fatalf("refused access-log prunes: got %v, want clock_ahead 1", got)
	}

	// ledgerd prunes at start: the refusal is logged at ERROR.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- log.Run(ctx) }()
	h.within(t, "the refused prune logged", func() bool { return strings.Contains(h.logs.String(), "access log: nothing pruned") })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if line := lineWith(h.logs.String(), "access log: nothing pruned"); !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "ahead of the clock of the S3 evidence store") {
		t.Fatalf("log line: %q", line)
	}
	if got := accessRecords(t, log); got != 5 {
		t.Fatalf("records after ledgerd started a year ahead: got %d, want 5", got)
	}

	h.set(real)
	if n, err := log.Prune(context.Background()); err != nil || n != 0 {
		t.Fatalf("prune at the right time: removed %d, err %v; want none due", n, err)
	}
}

// lineWith is the first line of s that holds sub.
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// TestAccessPruneKeepsRecordsUntilTheirBatchIsPut: reads recorded 13
// months ago whose batch is still queued for write-once storage (the
// store was away, or the uploader behind) are past the retention at the
// right time, but the batch is put from them: the prune keeps them until
// it is, then removes them.
func TestAccessPruneKeepsRecordsUntilTheirBatchIsPut(t *testing.T) {
	ctx := context.Background()
	h, _ := clockHarness(t, nil)
	real := h.clock()
	log := pruneLog(h)
	h.set(real.AddDate(-1, -1, 0))
	recordReads(t, log, 5)
	h.set(real)

	if n, err := log.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("prune while the batch is queued: removed %d, err %v; want none removed", n, err)
	}
	if got := accessRecords(t, log); got != 5 {
		t.Fatalf("records while the batch is queued: got %d, want 5", got)
	}
	h.drain(t)
	if n, err := log.Prune(ctx); err != nil || n != 5 {
		t.Fatalf("prune once the batch is put: removed %d, err %v; want 5", n, err)
	}
	if got := accessRecords(t, log); got != 0 {
		t.Fatalf("records once the batch is put and pruned: got %d, want 0", got)
	}
}

// TestAccessReadsAreRefusedWhileTheClockIsOff: the ledger's clock steps
// 13 months back (or 10 minutes ahead) between two readings of a
// reference clock. A read recorded then would be dated so, and the prune
// of a replica whose clock is right would remove it at once (or keep it
// too long): the read is refused, as writes are (a *ClockOffError,
// UNAVAILABLE to the reader), and nothing is recorded. Once the clock is
// right, reads are recorded again; no read is pruned, and fsck is clean.
func TestAccessReadsAreRefusedWhileTheClockIsOff(t *testing.T) {
	var real time.Time
	h, _ := clockHarness(t, nil, ledger.ReferenceClock{Name: "the PostgreSQL row store", Now: func(context.Context) (time.Time, error) { return real, nil }})
	real = h.clock()
	h.accessKept = retention.Period{Months: 12}
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	h.open(t)
	watchClocks(t, h)
	log := ledger.NewAccessLog(h.store, ledger.AccessLogConfig{Retention: h.accessKept, Now: h.clock, CheckClock: h.l.CheckPruneClock, CheckRecordClock: h.l.CheckReadClock})
	reads(t, log, "support-before", 2)
	for _, step := range []time.Duration{-13 * 30 * 24 * time.Hour, 10 * time.Minute} {
		h.set(real.Add(step))
		err := log.Record(context.Background(), ledger.Access{Key: "support-off", RPC: "GetRow", Row: "r", RowPrincipal: "acct-48213", Rows: 1, Result: "ok"})
		var off *ledger.ClockOffError
		if !errors.As(err, &off) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("a read at a clock %s off the reference: %v; want a *ClockOffError", step, err)
		}
	}
	h.set(real)
	reads(t, log, "support-after", 2)
	h.drain(t)
	if n, err := log.Prune(context.Background()); err != nil || n != 0 {
		t.Fatalf("prune: removed %d, %v; want none due", n, err)
	}
	if got := accessRecords(t, log); got != 4 {
		t.Fatalf("%d records, want the 4 reads made while the clocks agreed", got)
	}
	fsckClean(t, h, "after reads refused for the clock")
}

// TestAccessRecordsAreNotStampedEarlierAfterTheClockStepsBack: with no
// reference clock to check against, the host's clock steps 13 months
// back after a read. The reads made then are stamped no earlier than the
// one before, so the next prune removes none of them (their batch in
// write-once storage, nothing else keeps them) and fsck is clean.
func TestAccessRecordsAreNotStampedEarlierAfterTheClockStepsBack(t *testing.T) {
	h, _ := accessHarness(t)
	real := h.clock()
	now := real // the access log's host clock; the ledger's stays right
	log := ledger.NewAccessLog(h.store, ledger.AccessLogConfig{Retention: h.accessKept, Now: func() time.Time { return now }})
	reads(t, log, "support-before", 1)
	now = real.AddDate(0, -13, 0)
	reads(t, log, "support-after-the-step", 3)
	h.drain(t)
	now = real
	if n, err := log.Prune(context.Background()); err != nil || n != 0 {
		t.Fatalf("prune with the clock put right: removed %d, %v; want none due", n, err)
	}
	page, err := log.List(context.Background(), ledger.AccessQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 4 {
		t.Fatalf("%d records, want 4", len(page.Records))
	}
	for _, r := range page.Records {
		if !r.At.Equal(real) {
			t.Errorf("record %d (%s) stamped %s, want %s: not earlier than the read before it", r.Seq, r.Key, r.At, real)
		}
	}
	fsckClean(t, h, "after the clock stepped back")
}
