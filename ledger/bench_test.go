package ledger_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
)

// BenchmarkAppendReceipt measures verify + durable commit in process,
// parallel like concurrent pipelines.
func BenchmarkAppendReceipt(b *testing.B) {
	h := newHarness(b)
	corpus := make([]*pacttest.Receipt, b.N)
	for i := range corpus {
		corpus[i] = h.sc.Mint(pacttest.Spec{Target: "B-" + strconv.Itoa(i)})
	}
	var next = make(chan int, b.N)
	for i := range b.N {
		next <- i
	}
	close(next)
	b.ResetTimer()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := <-next
			if _, _, err := h.l.AppendReceipt(context.Background(), in(corpus[i])); err != nil {
				b.Error(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
