package ledger_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
)

// BenchmarkIntegrate measures the integrator's rounds over the leaves of
// rows already recorded: ns a leaf.
func BenchmarkIntegrate(b *testing.B) {
	h := newHarness(b)
	h.enableLog(b, 0)
	ctx := context.Background()
	const rows = 2000
	corpus := make([]*pacttest.Receipt, rows)
	for i := range corpus {
		corpus[i] = h.sc.Mint(pacttest.Spec{Target: "B-" + strconv.Itoa(i)})
	}
	next := 0
	var cpu time.Duration
	rusage := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for range 200 {
			if next == rows {
				b.Fatal("corpus used up")
			}
			if _, _, err := h.l.AppendReceipt(ctx, in(corpus[next])); err != nil {
				b.Fatal(err)
			}
			next++
		}
		b.StartTimer()
		c0 := rusage()
		if n, err := h.l.Integrate(ctx); err != nil || n != 200 {
			b.Fatal(n, err)
		}
		cpu += rusage() - c0
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next), "ns/leaf")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(next), "cpu-ns/leaf")
}
