package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
)

// swappable is a row store that can be replaced under a running ledger,
// as a database restored from a backup while ledgerd runs, or a failover
// to a copy that lags, replaces it: reads and writes go to the store it
// holds now. Its leases are taken and renewed on the first store.
type swappable struct {
	ledger.Store
	cur atomic.Pointer[storeBox]
}

type storeBox struct{ ledger.Store }

func (s *swappable) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.cur.Load().Update(ctx, fn)
}

func (s *swappable) View(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.cur.Load().View(ctx, fn)
}

// swappableLedger is a ledger on objects whose row store can be
// replaced under it: swapped returns the row store it was given last.
func swappableLedger(t *testing.T, objects ledger.ObjectStore) (h *harness, swapped func() *swappable) {
	t.Helper()
	var sw *swappable
	h = &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects, logs: &syncbuf.Buffer{},
		wrap: func(s ledger.Store) ledger.Store {
			sw = &swappable{Store: s}
			sw.cur.Store(&storeBox{s})
			return sw
		}}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	return h, func() *swappable { return sw }
}

// queueOn queues leaf ref-i on store st.
func queueOn(t *testing.T, st ledger.Store, i int) {
	t.Helper()
	err := st.Update(context.Background(), func(tx ledger.Tx) error {
		return tx.QueueLeaf(fmt.Sprintf("ref-%d", i), fmt.Appendf(nil, "%s\nkind receipt\nrow ref-%d\n", ledger.LeafVersion, i))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// headOf is the size of store st's log.
func headOf(t *testing.T, st ledger.Store) int64 {
	t.Helper()
	var size int64
	if err := st.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		size, _, err = tx.LogHead()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return size
}

// A row store replaced under the running integrator by an older copy (the
// published log 10 leaves, the copy's 7) gets no checkpoint signed on it:
// the holder of the lease finds the head it extends is not the one it
// left, and compares the row store's log with the published one again
// before it signs, which finds the divergence.
func TestARowStoreReplacedUnderTheIntegratorGetsNoCheckpoint(t *testing.T) {
	h, swapped, older, bucket := publishedAtTenWithACopyAtSeven(t)

	startIntegrator(t, h.l, h)
	// The integrator checked the bucket and extends the log.
	queueOn(t, h.store, 10)
	waitFor(t, "the integrator to extend the log to 11 leaves", func() bool { return headOf(t, h.store) == 11 })

	// The copy holds the integrator's lease for this holder under the
	// token it holds now, as a copy of the whole database taken while it
	// held the lease does: its writes pass their fence.
	if tok, err := older.AcquireLease(context.Background(), ledger.LeaseLogIntegrator, h.l.Holder(), time.Minute); err != nil || tok != 1 {
		t.Fatalf("the copy's lease: token %d (%v), want 1, the one the integrator holds", tok, err)
	}
	swapped().cur.Store(&storeBox{older})
	queueOn(t, older, 7)
	waitFor(t, "the integrator to find the divergence", func() bool {
		_, err := h.l.LogDiverged()
		return err != nil
	})
	if _, err := h.l.LogDiverged(); !errors.Is(err, ledger.ErrLogDiverged) {
		t.Errorf("LogDiverged: %v; want the divergence", err)
	}
	if size := headOf(t, older); size != 7 {
		t.Errorf("the replaced row store's log has %d leaves, want 7: a checkpoint the published one is not a prefix of was signed", size)
	}
	if !strings.Contains(h.logs.String(), "the row store's Merkle log changed under the integrator") {
		t.Errorf("the integrator did not say the row store's log changed under it:\n%s", h.logs)
	}
	if readObject(t, bucket, ledger.LogPrefix+"checkpoints/8") != nil {
		t.Error("the bucket holds a checkpoint of size 8")
	}
}

// publishedAtTenWithACopyAtSeven is a ledger whose row store can be
// replaced under it (swapped), which published a log of 10 leaves to its
// evidence directory (bucket), open again with its log on, and a copy of
// its row store taken at 7 leaves (older).
func publishedAtTenWithACopyAtSeven(t *testing.T) (h *harness, swapped func() *swappable, older *bolt.Store, bucket string) {
	t.Helper()
	bucket = t.TempDir()
	objects, err := localdir.Open(bucket)
	if err != nil {
		t.Fatal(err)
	}
	h, swapped = swappableLedger(t, objects)
	backup := backedUpAtSeven(t, h)
	if err := h.grow(t, 7, 3); err != nil {
		t.Fatal(err)
	}
	if published := readObject(t, bucket, ledger.LogPrefix+"checkpoint"); !strings.HasPrefix(string(published), testOrigin+"\n10\n") {
		t.Fatalf("the published checkpoint:\n%s\nwant one of size 10", published)
	}
	h.store.Close()
	h.open(t)
	older, err = bolt.Open(backup, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { older.Close() })
	return h, swapped, older, bucket
}

// backedUpAtSeven turns h's log on with a new key, publishes a log of 7
// leaves and returns a copy of h's row store taken then; h is open again
// after it, its log on.
func backedUpAtSeven(t *testing.T, h *harness) (backup string) {
	t.Helper()
	h.logSigner, h.logVKey = logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: h.logSigner}); err != nil {
		t.Fatal(err)
	}
	if err := h.grow(t, 0, 7); err != nil {
		t.Fatal(err)
	}
	backup = filepath.Join(t.TempDir(), "ledger.db")
	h.store.Close()
	copyFile(t, filepath.Join(h.dir, "ledger.db"), backup)
	h.open(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: h.logSigner}); err != nil {
		t.Fatal(err)
	}
	return backup
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited 10 s for %s", what)
		}
	}
}

// hangingLog passes calls to a real evidence store, except that while
// hang is set a put of the log's objects waits, as on a bucket that takes
// connections and does not answer, until its context ends.
type hangingLog struct {
	ledger.ObjectStore
	hang atomic.Bool
	hung chan string
}

func (s *hangingLog) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	if s.hang.Load() && strings.HasPrefix(key, ledger.LogPrefix) {
		select {
		case s.hung <- key:
		default:
		}
		<-ctx.Done()
		return ledger.Location{}, ctx.Err()
	}
	return s.ObjectStore.Put(ctx, key, body, until)
}

// A publication of the log that waits on the bucket holds up neither the
// log's growth in the row store nor the integrator's stop; after a while
// the integrator says it waits.
func TestTheLogGrowsWhileItsPublicationHangs(t *testing.T) {
	defer ledger.SetSlowPublication(50 * time.Millisecond)()
	real, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bucket := &hangingLog{ObjectStore: real, hung: make(chan string, 1)}
	bucket.hang.Store(true)
	h := ledgerOn(t, bucket, nil)
	h.logSigner, h.logVKey = logKeys(t)
	stop := startIntegrator(t, h.l, h)
	queueOn(t, h.store, 0)
	select {
	case key := <-bucket.hung:
		t.Logf("the put of %s hangs", key)
	case <-time.After(10 * time.Second):
		t.Fatal("no publication of the log began")
	}
	for i := 1; i < 5; i++ {
		queueOn(t, h.store, i)
	}
	waitFor(t, "the log to grow to 5 leaves while its publication hangs", func() bool { return headOf(t, h.store) == 5 })
	waitFor(t, "the integrator to say its publication waits", func() bool {
		return strings.Contains(h.logs.String(), "publishing log tiles has waited on write-once storage")
	})
	stop()
}

// Leaves waiting in the queue while the log does not grow are reported
// on a replica that does not hold the integrator's lease, as when the
// lease is held by a holder that does not integrate: LogWaiting says
// since when, pactledger_log_waiting_seconds how long; both clear once
// the log grows.
func TestLeavesWaitingWhileTheLogDoesNotGrowAreReported(t *testing.T) {
	ctx := context.Background()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), logs: &syncbuf.Buffer{}, metrics: ledger.NewMetrics(prometheus.NewRegistry())}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	h.logSigner, h.logVKey = logKeys(t)
	if _, err := h.store.AcquireLease(ctx, ledger.LeaseLogIntegrator, "a holder that does not integrate", time.Hour); err != nil {
		t.Fatal(err)
	}
	startIntegrator(t, h.l, h)
	queueOn(t, h.store, 0)
	waitFor(t, "the leaf to be seen waiting", func() bool { return !h.l.LogWaiting().IsZero() })
	since := h.l.LogWaiting()
	h.set(h.clock().Add(2 * time.Minute))
	waitFor(t, "pactledger_log_waiting_seconds to read two minutes", func() bool { return testutil.ToFloat64(h.metrics.LogWaiting) >= 120 })
	if got := h.l.LogWaiting(); !got.Equal(since) {
		t.Errorf("LogWaiting moved from %v to %v while the log did not grow", since, got)
	}
	if size := headOf(t, h.store); size != 0 {
		t.Fatalf("the log has %d leaves: the lease's holder was to integrate none", size)
	}
	// The log grows (here extended without the lease, as a test can).
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the wait to clear once the log grew", func() bool {
		return h.l.LogWaiting().IsZero() && testutil.ToFloat64(h.metrics.LogWaiting) == 0
	})
}

// cutShort is an evidence directory whose puts of one key fail (fail)
// or wait until their context ends (hang), as a publication is cut short
// between its tiles and its checkpoint by a restart, or hangs there.
type cutShort struct {
	*localdir.Store
	fail, hang atomic.Pointer[string]
	hung       chan string
}

func (s *cutShort) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	if k := s.fail.Load(); k != nil && *k == key {
		return ledger.Location{}, errors.New("connection reset")
	}
	if k := s.hang.Load(); k != nil && *k == key {
		select {
		case s.hung <- key:
		default:
		}
		<-ctx.Done()
		return ledger.Location{}, ctx.Err()
	}
	return s.Store.Put(ctx, key, body, until)
}

// queueFork queues leaves from..from+n-1 of another history than queue's.
func queueFork(t *testing.T, st ledger.Store, from, n int) {
	t.Helper()
	err := st.Update(context.Background(), func(tx ledger.Tx) error {
		for i := from; i < from+n; i++ {
			if err := tx.QueueLeaf(fmt.Sprintf("fork-%d", i), fmt.Appendf(nil, "%s\nkind test\nrow fork-%d\n", ledger.LeafVersion, i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A publication cut short after its tiles (10 leaves) and before its
// checkpoint leaves the bucket's largest checkpoint at 7; a row store
// restored at 7 then gets no checkpoint signed: the checkpoint of 10
// leaves the publication put first, as a record of what it began, shows
// they were signed and published, which the row store lacks.
func TestTilesPastTheCheckpointsStopARestoredLedger(t *testing.T) {
	dir, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bucket := &cutShort{Store: dir, hung: make(chan string, 1)}
	h := ledgerOn(t, bucket, nil)
	backup := backedUpAtSeven(t, h)
	cut := ledger.LogPrefix + "checkpoints/10"
	bucket.fail.Store(&cut)
	if err := h.grow(t, 7, 3); err == nil {
		t.Fatal("the publication of 10 leaves passed its checkpoint's put")
	}
	bucket.fail.Store(nil)
	h.store.Close()
	copyFile(t, backup, filepath.Join(h.dir, "ledger.db"))
	h.open(t)

	startIntegrator(t, h.l, h)
	queueFork(t, h.store, 7, 2)
	waitFor(t, "the integrator to find the divergence", func() bool {
		_, err := h.l.LogDiverged()
		return err != nil
	})
	if _, err := h.l.LogDiverged(); !strings.Contains(err.Error(), "the bucket's log/pending has 10 leaves, this ledger's log 7") {
		t.Errorf("LogDiverged: %v; want it to say the publication begun had 10 leaves", err)
	}
	if size := headOf(t, h.store); size != 7 {
		t.Errorf("the restored row store's log has %d leaves, want 7: a fork of the published tiles was signed", size)
	}
}

// A publication that waits on the bucket when the row store is replaced
// under the integrator ends before the integrator checks the bucket
// again: it puts nothing more of the log it read before, nor records it
// published in the new row store, which gets no checkpoint signed.
func TestAPublicationUnderWayWhenTheRowStoreIsReplacedEnds(t *testing.T) {
	bucketDir := t.TempDir()
	dir, err := localdir.Open(bucketDir)
	if err != nil {
		t.Fatal(err)
	}
	bucket := &cutShort{Store: dir, hung: make(chan string, 1)}
	h, swapped := swappableLedger(t, bucket)
	h.logSigner, h.logVKey = logKeys(t)
	if err := h.l.EnableLog(ledger.LogConfig{Signer: h.logSigner}); err != nil {
		t.Fatal(err)
	}
	if err := h.grow(t, 0, 7); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "ledger.db")
	h.store.Close()
	copyFile(t, filepath.Join(h.dir, "ledger.db"), backup)
	h.open(t)
	older, err := bolt.Open(backup, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { older.Close() })

	hang := ledger.LogPrefix + "checkpoints/10"
	bucket.hang.Store(&hang)
	startIntegrator(t, h.l, h)
	h.queue(t, 7, 3)
	select {
	case <-bucket.hung:
	case <-time.After(10 * time.Second):
		t.Fatal("the publication of 10 leaves did not reach its checkpoint")
	}
	if tok, err := older.AcquireLease(context.Background(), ledger.LeaseLogIntegrator, h.l.Holder(), time.Minute); err != nil || tok != 1 {
		t.Fatalf("the copy's lease: token %d (%v), want 1", tok, err)
	}
	swapped().cur.Store(&storeBox{older})
	queueFork(t, older, 7, 1)
	waitFor(t, "the integrator to find the divergence", func() bool {
		_, err := h.l.LogDiverged()
		return err != nil
	})
	bucket.hang.Store(nil)
	if size := headOf(t, older); size != 7 {
		t.Errorf("the replaced row store's log has %d leaves, want 7: a fork was signed", size)
	}
	var published int64
	if err := older.View(context.Background(), func(tx ledger.Tx) error {
		published, err = tx.TilesPublished()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if published != 7 {
		t.Errorf("the replaced row store records %d leaves published, want 7: the publication of the log before it was recorded in it", published)
	}
	if got := readObject(t, bucketDir, ledger.LogPrefix+"checkpoint"); !strings.HasPrefix(string(got), testOrigin+"\n7\n") {
		t.Errorf("the bucket's latest checkpoint:\n%s\nwant the one of size 7", got)
	}
}

// A row store replaced under the holder just after its first check of
// the published log passed (the check compared the 10 leaves published,
// the copy holds 7) gets no checkpoint signed on it: the head the holder
// goes on from is the one its check compared, and the copy's differs,
// so it checks again, which finds the divergence.
func TestARowStoreReplacedRightAfterTheCheckGetsNoCheckpoint(t *testing.T) {
	h, swapped, older, _ := publishedAtTenWithACopyAtSeven(t)
	if tok, err := older.AcquireLease(context.Background(), ledger.LeaseLogIntegrator, h.l.Holder(), time.Minute); err != nil || tok != 1 {
		t.Fatalf("the copy's lease: token %d (%v), want 1, the one the integrator will hold", tok, err)
	}
	queueOn(t, older, 7)
	var once atomic.Bool
	t.Cleanup(ledger.SetCheckedHook(func() {
		if once.CompareAndSwap(false, true) {
			swapped().cur.Store(&storeBox{older})
		}
	}))

	startIntegrator(t, h.l, h)
	waitFor(t, "the integrator to find the divergence", func() bool {
		_, err := h.l.LogDiverged()
		return err != nil
	})
	if size := headOf(t, older); size != 7 {
		t.Errorf("the replaced row store's log has %d leaves, want 7: a checkpoint the published one is not a prefix of was signed", size)
	}
	if !strings.Contains(h.logs.String(), "the row store's log held 10 leaves when the check of the published log began and 7 after it") {
		t.Errorf("the integrator did not say the head moved during its check:\n%s", h.logs)
	}
}
