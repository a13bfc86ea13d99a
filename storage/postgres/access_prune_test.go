package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// Reads recorded 13 months ago whose batch is still queued for
// write-once storage are kept by the access log's prune on PostgreSQL
// until the batch is put, then removed.
func TestAccessPruneKeepsRecordsUntilTheirBatchIsPut(t *testing.T) {
	ctx := t.Context()
	dsn, sc, dir := accessSetting(t)
	var mu sync.Mutex
	now := time.Now().UTC().AddDate(-1, -1, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := accessReplica(t, dsn, sc, dir, "replica-a", clock, retention.Period{Months: 12})
	log := ledger.NewAccessLog(r.store, ledger.AccessLogConfig{Retention: retention.Period{Months: 12}, Now: clock})
	for range 5 {
		if err := log.Record(ctx, ledger.Access{Key: "support", RPC: "GetRow", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = time.Now().UTC()
	mu.Unlock()
	left := func() int {
		page, err := log.List(ctx, ledger.AccessQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Records)
	}

	if n, err := log.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("prune while the batch is queued: removed %d, err %v; want none removed", n, err)
	}
	if got := left(); got != 5 {
		t.Fatalf("records while the batch is queued: got %d, want 5", got)
	}
	for range 10 {
		if depth, err := r.l.OutboxDepth(ctx); err != nil || depth == 0 {
			break
		}
		if _, err := r.l.UploadRound(ctx, 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	if depth, err := r.l.OutboxDepth(ctx); err != nil || depth != 0 {
		t.Fatalf("outbox after uploading: %d, %v", depth, err)
	}
	if n, err := log.Prune(ctx); err != nil || n != 5 {
		t.Fatalf("prune once the batch is put: removed %d, err %v; want 5", n, err)
	}
	if got := left(); got != 0 {
		t.Fatalf("records once the batch is put and pruned: got %d, want 0", got)
	}
}
