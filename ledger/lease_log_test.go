package ledger_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
)

// leaseLine is one JSON log line about a lease.
type leaseLine struct {
	Level, Msg, Lease, Holder string
}

// waitLeaseLine waits up to 30 s for a line of log with level and msg
// about lease name held by holder.
func waitLeaseLine(t *testing.T, log *syncbuf.Buffer, level, msg, name, holder string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for line := range strings.Lines(log.String()) {
			var l leaseLine
			if json.Unmarshal([]byte(line), &l) == nil && l == (leaseLine{level, msg, name, holder}) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s %q line for lease %s and holder %s in the log:\n%s", level, msg, name, holder, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeaseChangesAreLogged: a ledger that takes a lease logs it at INFO
// ("lease taken"), naming the lease and itself as holder; one whose
// renewals stop reaching the store logs that it lost it ("lease lost",
// WARN: its job was stopped), and the ledger that takes it over logs
// taking it; stopping logs the release at INFO ("lease released").
func TestLeaseChangesAreLogged(t *testing.T) {
	h := newHarness(t)
	const name = "test-logged"
	cfg := ledger.LeaseConfig{TTL: 600 * time.Millisecond, Margin: 200 * time.Millisecond}
	pa := &partitioned{Store: h.store, cut: make(chan struct{})}
	var logA, logB syncbuf.Buffer
	cfg.Holder = "holder-a"
	a := h.anotherLogging(t, pa, cfg, slog.New(slog.NewJSONHandler(&logA, nil)))
	cfg.Holder = "holder-b"
	b := h.anotherLogging(t, h.store, cfg, slog.New(slog.NewJSONHandler(&logB, nil)))
	job := func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}
	run := func(l *ledger.Ledger) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.RunUnderLease(ctx, name, job) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("RunUnderLease: %v", err)
			}
		}
	}

	stopA := run(a)
	defer stopA()
	waitLeaseLine(t, &logA, "INFO", "lease taken", name, "holder-a")
	stopB := run(b)
	close(pa.cut) // a's renewals fail from now on
	waitLeaseLine(t, &logA, "WARN", "lease lost", name, "holder-a")
	waitLeaseLine(t, &logB, "INFO", "lease taken", name, "holder-b")
	stopB()
	waitLeaseLine(t, &logB, "INFO", "lease released", name, "holder-b")
}
