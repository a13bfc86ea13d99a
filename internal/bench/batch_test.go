package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// driveBatches posts every entry once, in batches of at most batch, and
// counts each entry's result.
func TestDriveBatches(t *testing.T) {
	corpus := make([]*ledgerv1.AppendReceiptRequest, 103)
	for i := range corpus {
		corpus[i] = &ledgerv1.AppendReceiptRequest{ContextId: string(rune('a' + i%26))}
	}
	var (
		mu            sync.Mutex
		seen          = map[*ledgerv1.AppendReceiptRequest]int{}
		largest, runs int
	)
	refused := corpus[50]
	res, err := driveBatches(context.Background(), corpus, 16, 4, time.Hour, func(_ context.Context, reqs []*ledgerv1.AppendReceiptRequest) []error {
		mu.Lock()
		defer mu.Unlock()
		largest = max(largest, len(reqs))
		runs++
		errs := make([]error, len(reqs))
		for i, r := range reqs {
			seen[r]++
			if r == refused {
				errs[i] = errors.New("refused")
			}
		}
		return errs
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(corpus) {
		t.Fatalf("%d of %d entries posted", len(seen), len(corpus))
	}
	for r, n := range seen {
		if n != 1 {
			t.Fatalf("entry %q posted %d times", r.GetContextId(), n)
		}
	}
	if largest != 4 || runs != 26 {
		t.Fatalf("batches of up to %d, %d calls; want 4 and 26", largest, runs)
	}
	if res.ok != 102 || res.errors != 1 || len(res.lat) != 102 {
		t.Fatalf("ok %d, errors %d, %d latencies; want 102, 1, 102", res.ok, res.errors, len(res.lat))
	}
}

// The benchmark refuses batches AppendReceipts would refuse, or that do
// not divide the receipts in flight, and a profiled phase in batches asked
// for REST or an offered rate.
func TestCheckBatches(t *testing.T) {
	for _, c := range []Config{
		{Concurrency: 64, Batch: 8},
		{Concurrency: 64, Batch: 0, ProfileBatch: 16},
		{Concurrency: 100, Batch: 100},
	} {
		if err := c.checkBatches(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range []Config{
		{Concurrency: 64, Batch: -1},
		{Concurrency: 202, Batch: 101},
		{Concurrency: 64, Batch: 10},
		{Concurrency: 64, ProfileBatch: 48},
		{Concurrency: 64, ProfileBatch: 8, ProfileREST: true},
		{Concurrency: 64, ProfileBatch: 8, ProfileOffered: 1000},
	} {
		if err := c.checkBatches(); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
}
