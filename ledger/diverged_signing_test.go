package ledger_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
)

// startIntegrator turns l's log on and runs its integrator until the
// returned stop is called (or the test ends).
func startIntegrator(t *testing.T, l *ledger.Ledger, h *harness) (stop func()) {
	t.Helper()
	if err := l.EnableLog(ledger.LogConfig{Signer: h.logSigner, Interval: integratorInterval}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.RunIntegrator(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("integrator: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// restoredAtSeven is a ledger that published a log of 10 leaves to its
// evidence directory, then had its row store restored from a backup
// taken at 7 leaves (the evidence directory kept at 10). It returns the
// bucket's checkpoint of size 10.
func restoredAtSeven(t *testing.T) (*harness, string, []byte) {
	t.Helper()
	bucket := t.TempDir()
	h := ledgerOnBucket(t, bucket, nil)
	backup := backedUpAtSeven(t, h)
	if err := h.grow(t, 7, 3); err != nil {
		t.Fatal(err)
	}
	published := readObject(t, bucket, ledger.LogPrefix+"checkpoint")
	if !strings.HasPrefix(string(published), testOrigin+"\n10\n") {
		t.Fatalf("the published checkpoint:\n%s\nwant one of size 10", published)
	}
	h.store.Close()
	copyFile(t, backup, filepath.Join(h.dir, "ledger.db"))
	h.logs = &syncbuf.Buffer{}
	h.open(t)
	h.objDir = bucket // for replicas: the same evidence directory
	return h, bucket, published
}

// checkStopped checks that l signs and serves nothing of its log beyond
// the 7 leaves it published, saying the log diverged, and that the
// bucket's checkpoint is still published.
func checkStopped(t *testing.T, l *ledger.Ledger, bucket string, published []byte) {
	t.Helper()
	ctx := context.Background()
	// The integrator signs nothing before its check of the bucket passed
	// (and it found the divergence), nor does an Integrate meanwhile.
	if _, err := l.Integrate(ctx); !errors.Is(err, ledger.ErrLogDiverged) {
		t.Errorf("Integrate while the log diverged: %v; want the divergence", err)
	}
	if size, err := l.TreeSize(ctx); err != nil || size != 7 {
		t.Errorf("the row store's tree after the divergence was found: size %d (%v), want 7: a checkpoint the published one is not a prefix of was signed", size, err)
	}
	diverged := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ledger.ErrLogDiverged) || !strings.Contains(err.Error(), "the log diverged from the one published to write-once storage") ||
			!strings.Contains(err.Error(), "an operator must restore the row store's newest backup") {
			t.Errorf("%s while the log diverged: %v; want the divergence, and what to do", what, err)
		}
	}
	_, err := l.Checkpoint(ctx)
	diverged("the checkpoint", err)
	_, err = l.Proof(ctx, "ref-0")
	diverged("a row's proof", err)
	_, _, _, err = l.Consistency(ctx, 3, 0)
	diverged("a consistency proof", err)
	for _, p := range []string{"tile/0/000.p/8", "tile/0/000.p/10", "tile/entries/000.p/8"} {
		_, err = l.TileData(ctx, p)
		diverged(p, err)
	}
	for _, p := range []string{"tile/0/000.p/7", "tile/entries/000.p/7"} {
		if _, err := l.TileData(ctx, p); err != nil {
			t.Errorf("%s, published before the backup: %v", p, err)
		}
	}
	if got := readObject(t, bucket, ledger.LogPrefix+"checkpoint"); string(got) != string(published) {
		t.Errorf("the bucket's latest checkpoint was replaced:\n%s", got)
	}
	if readObject(t, bucket, ledger.LogPrefix+"checkpoints/8") != nil {
		t.Error("the bucket holds a checkpoint of size 8")
	}
}

// A ledger whose row store was restored from a backup older than the log
// it published (the evidence directory kept) finds it before it signs
// anything: it signs no checkpoint the published one is not a prefix of,
// serves none, nor the tiles past what it published, nor proofs, and
// says so at ERROR; rows are still recorded and their leaves wait. Once
// the published log is a prefix of the row store's again (here the
// bucket's log removed, as a test can), the leaves that waited are
// logged; once the row store's record of what was published to the
// bucket is removed too (a bucket that holds none of the log the row
// store records as published is not published to), they are published.
func TestADivergedLedgerSignsNoCheckpoint(t *testing.T) {
	h, bucket, published := restoredAtSeven(t)
	startIntegrator(t, h.l, h)
	h.queue(t, 50, 2) // rows recorded after the restore
	waitUntil(t, "the divergence found", func() bool {
		_, err := h.l.LogDiverged()
		return err != nil
	})
	checkStopped(t, h.l, bucket, published)
	if !strings.Contains(h.logs.String(), "level=ERROR msg=\"the row store's Merkle log is not an extension of the log published to write-once storage: this ledger stopped signing checkpoints") ||
		!strings.Contains(h.logs.String(), "restore the newest backup") {
		t.Errorf("the ledger did not say at ERROR that it stopped signing, and what to do:\n%s", h.logs)
	}

	if err := os.RemoveAll(filepath.Join(bucket, "log")); err != nil {
		t.Fatal(err)
	}
	waitTreeSize(t, h.l, 9)
	if _, err := h.l.Checkpoint(context.Background()); err != nil {
		t.Errorf("the checkpoint once the logs agree again: %v", err)
	}
	waitUntil(t, "the publication to a bucket without the published log refused", func() bool {
		_, err := h.l.LogPublicationRefused()
		return errors.Is(err, ledger.ErrPublishedLogMissing)
	})
	// Signed in the row store, not published: not yet served.
	if _, err := h.l.Proof(context.Background(), "ref-51"); !errors.Is(err, ledger.ErrNotLogged) {
		t.Errorf("the proof of a row that waited, before its checkpoint is published: %v, want ErrNotLogged", err)
	}
	if err := h.store.Update(context.Background(), func(tx ledger.Tx) error { return tx.SetTilesPublished(0) }); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the checkpoint of size 9 published", func() bool {
		return strings.HasPrefix(string(readObject(t, bucket, ledger.LogPrefix+"checkpoint")), testOrigin+"\n9\n")
	})
	waitUntil(t, "the proof of a row that waited", func() bool {
		_, err := h.l.Proof(context.Background(), "ref-51")
		return err == nil
	})
	if !strings.Contains(h.logs.String(), "this ledger signs and publishes checkpoints again") {
		t.Errorf("the ledger did not say it signs again:\n%s", h.logs)
	}
}

// On a shared row store, the replica that takes the integrator's lease
// from one that found the log diverged checks again before it signs, and
// signs nothing either.
func TestAReplicaTakingTheLeaseDoesNotSignADivergedLog(t *testing.T) {
	h, bucket, published := restoredAtSeven(t)
	var logA, logB syncbuf.Buffer
	a := h.anotherLogging(t, h.store, ledger.LeaseConfig{Holder: "replica-a"}, slog.New(slog.NewTextHandler(&logA, nil)))
	b := h.anotherLogging(t, h.store, ledger.LeaseConfig{Holder: "replica-b"}, slog.New(slog.NewTextHandler(&logB, nil)))
	stopA := startIntegrator(t, a, h)
	h.queue(t, 50, 2)
	waitUntil(t, "replica a found the divergence", func() bool {
		_, err := a.LogDiverged()
		return err != nil
	})
	stopA() // releases the lease
	if _, err := a.LogDiverged(); err != nil {
		t.Errorf("replica a reports the divergence after it released the lease: %v", err)
	}
	startIntegrator(t, b, h)
	waitUntil(t, "replica b found the divergence", func() bool {
		_, err := b.LogDiverged()
		return err != nil
	})
	checkStopped(t, b, bucket, published)
}

// A replica that does not hold the integrator's lease reports and serves
// what the holder found: while the holder finds the log diverged, the
// other replica serves no checkpoint or proof either, says why and who
// found it, and sets pactledger_log_diverged; once the holder's check
// passes again, both serve the log again.
func TestReplicasReportTheDivergenceTheHolderFound(t *testing.T) {
	h, bucket, published := restoredAtSeven(t)
	a := h.anotherLogging(t, h.store, ledger.LeaseConfig{Holder: "replica-a"}, slog.New(slog.DiscardHandler))
	metricsB := ledger.NewMetrics(prometheus.NewRegistry())
	b := h.anotherWithMetrics(t, h.store, ledger.LeaseConfig{Holder: "replica-b"}, slog.New(slog.DiscardHandler), metricsB)
	startIntegrator(t, a, h)
	h.queue(t, 50, 2)
	waitUntil(t, "replica a found the divergence", func() bool {
		_, err := a.LogDiverged()
		return err != nil
	})
	startIntegrator(t, b, h) // a holds the lease: b follows
	waitUntil(t, "replica b reports the divergence", func() bool {
		_, err := b.LogDiverged()
		return err != nil
	})
	sinceA, _ := a.LogDiverged()
	sinceB, err := b.LogDiverged()
	if !sinceB.Equal(sinceA) || !strings.Contains(err.Error(), "found by replica-a") {
		t.Errorf("replica b: since %v (a: %v), %v; want a's time and a's name", sinceB, sinceA, err)
	}
	if got := testutil.ToFloat64(metricsB.LogDiverged); got != 1 {
		t.Errorf("replica b's pactledger_log_diverged = %v, want 1", got)
	}
	ctx := context.Background()
	if _, err := b.Checkpoint(ctx); !errors.Is(err, ledger.ErrLogDiverged) || !strings.Contains(err.Error(), "an operator must restore the row store's newest backup") {
		t.Errorf("replica b's checkpoint while the log diverged: %v; want the divergence", err)
	}
	if _, err := b.Proof(ctx, "ref-0"); !errors.Is(err, ledger.ErrLogDiverged) {
		t.Errorf("replica b's proof while the log diverged: %v; want the divergence", err)
	}
	if _, err := b.TileData(ctx, "tile/0/000.p/8"); !errors.Is(err, ledger.ErrLogDiverged) {
		t.Errorf("replica b's tile past what was published: %v; want the divergence", err)
	}
	if got := readObject(t, bucket, ledger.LogPrefix+"checkpoint"); string(got) != string(published) {
		t.Errorf("the bucket's latest checkpoint was replaced:\n%s", got)
	}

	// The holder's check passes again (the bucket's log removed, as a
	// test can): the record goes, and b serves the log again.
	if err := os.RemoveAll(filepath.Join(bucket, "log")); err != nil {
		t.Fatal(err)
	}
	waitTreeSize(t, a, 9)
	waitUntil(t, "replica b serves the log again", func() bool {
		_, err := b.LogDiverged()
		return err == nil
	})
	if _, err := b.Checkpoint(ctx); err != nil {
		t.Errorf("replica b's checkpoint once the logs agree again: %v", err)
	}
	if got := testutil.ToFloat64(metricsB.LogDiverged); got != 0 {
		t.Errorf("replica b's pactledger_log_diverged once the logs agree = %v, want 0", got)
	}
}

// A divergence record left in the row store (a backup taken while the
// log diverged, restored once it was settled) stops every replica from
// serving the log, the holder too until its own check of the published
// log, which removes it: then every replica serves the log again.
func TestALeftDivergenceRecordIsRemovedByTheHoldersCheck(t *testing.T) {
	bucket := t.TempDir()
	h := ledgerOnBucket(t, bucket, nil)
	h.objDir = bucket
	h.logSigner, h.logVKey = logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: h.logSigner}); err != nil {
		t.Fatal(err)
	}
	if err := h.grow(t, 0, 3); err != nil {
		t.Fatal(err)
	}
	left := []byte(`{"since":"2026-10-01T00:00:00Z","holder":"replica-x","error":"the Merkle log in write-once storage is not this ledger's: a test"}`)
	if err := h.store.Update(context.Background(), func(tx ledger.Tx) error { return tx.SetLogDivergence(left) }); err != nil {
		t.Fatal(err)
	}
	a := h.anotherLogging(t, h.store, ledger.LeaseConfig{Holder: "replica-a"}, slog.New(slog.DiscardHandler))
	b := h.anotherLogging(t, h.store, ledger.LeaseConfig{Holder: "replica-b"}, slog.New(slog.DiscardHandler))
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	t.Cleanup(ledger.SetCheckedHook(func() {
		select {
		case held <- struct{}{}:
		default:
		}
		<-hold
	}))
	startIntegrator(t, a, h)
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before a stops
	<-held             // a holds the lease, its check held up
	startIntegrator(t, b, h)
	waitUntil(t, "replica b reports the record", func() bool {
		_, err := b.LogDiverged()
		return err != nil && strings.Contains(err.Error(), "found by replica-x")
	})
	if since, _ := b.LogDiverged(); !since.Equal(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("replica b reports since %v, want the record's", since)
	}
	if _, err := b.Checkpoint(context.Background()); !errors.Is(err, ledger.ErrLogDiverged) {
		t.Errorf("replica b's checkpoint while the record says the log diverged: %v", err)
	}
	// The holder, its check held up, reports the record as the others do
	// (it took the lease while the bucket is out, say): it has nothing of
	// its own to say yet.
	waitUntil(t, "replica a, the holder before its check, reports the record", func() bool {
		_, err := a.LogDiverged()
		return err != nil && strings.Contains(err.Error(), "found by replica-x")
	})
	release()
	waitUntil(t, "replicas a and b serve the log again", func() bool {
		_, errA := a.Checkpoint(context.Background())
		_, errB := b.Checkpoint(context.Background())
		return errA == nil && errB == nil
	})
	var rec []byte
	if err := h.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		rec, err = tx.LogDivergence()
		return err
	}); err != nil || rec != nil {
		t.Errorf("the record after the holder's check passed: %q, %v; want none", rec, err)
	}
}

// A ledger that takes the integrator's lease while the bucket cannot be
// read signs nothing until it has read the published log: a row store
// restored from an old backup, started during an outage of the bucket,
// would otherwise sign a fork before it could tell.
func TestALedgerSignsNothingBeforeItHasReadThePublishedLog(t *testing.T) {
	h, bucket, published := restoredAtSeven(t)
	away := bucket + ".away"
	if err := os.Rename(bucket, away); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bucket, nil, 0o600); err != nil { // the bucket unreadable: not a directory
		t.Fatal(err)
	}
	h.queue(t, 50, 2) // rows recorded after the restore
	startIntegrator(t, h.l, h)
	waitUntil(t, "the integrator's check of the unreadable bucket", func() bool {
		return strings.Contains(h.logs.String(), "checking the log published to write-once storage")
	})
	if err := os.Remove(bucket); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, bucket); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the divergence found once the bucket reads", func() bool {
		_, err := h.l.LogDiverged()
		return err != nil
	})
	checkStopped(t, h.l, bucket, published)
}
