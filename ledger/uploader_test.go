package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/storage/localdir"
	s3store "github.com/pactledger/pactledger/storage/s3"
	"github.com/pactledger/pactledger/verifier"
)

// faultyStore passes calls to a real evidence store and fails the ones
// fail picks: before the call (after false) or after the real call
// succeeded (after true: a put whose answer was lost).
type faultyStore struct {
	ledger.ObjectStore
	mu    sync.Mutex
	fail  func(op, key string) (fail, after bool)
	calls map[string]int
}

var errInjected = errors.New("injected failure")

func (f *faultyStore) decide(op, key string) (bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op+" "+key]++
	if f.fail == nil {
		return false, false
	}
	return f.fail(op, key)
}

func (f *faultyStore) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	fail, after := f.decide("put", key)
	if fail && !after {
		return ledger.Location{}, errInjected
	}
	loc, err := f.ObjectStore.Put(ctx, key, body, until)
	if fail && err == nil {
		return ledger.Location{}, errInjected
	}
	return loc, err
}

func (f *faultyStore) SetLegalHold(ctx context.Context, loc ledger.Location, on bool) error {
	if fail, _ := f.decide("hold", loc.Key); fail {
		return errInjected
	}
	return f.ObjectStore.SetLegalHold(ctx, loc, on)
}

// evidenceStores are the real evidence stores the outbox tests run on:
// each returns the store and a function listing the keys it holds.
func evidenceStores(t *testing.T) map[string]func(t *testing.T) (ledger.ObjectStore, func() []string) {
	return map[string]func(t *testing.T) (ledger.ObjectStore, func() []string){
		"s3": func(t *testing.T) (ledger.ObjectStore, func() []string) {
			ctx := context.Background()
			bucket := s3test.Bucket()
			s, err := s3store.Open(ctx, s3store.Config{Endpoint: s3srv.Endpoint, Bucket: bucket, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, Insecure: true, CreateBucket: true})
			if err != nil {
				t.Fatal(err)
			}
			c := rawS3(t)
			return s, func() []string {
				var keys []string
				for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: true}) {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					keys = append(keys, o.Key)
				}
				slices.Sort(keys)
				return keys
			}
		},
		"localdir": func(t *testing.T) (ledger.ObjectStore, func() []string) {
			dir := filepath.Join(t.TempDir(), "evidence")
			s, err := localdir.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s, func() []string {
				var keys []string
				err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() || strings.Contains(d.Name(), ".lock") {
						return err
					}
					rel, _ := filepath.Rel(dir, p)
					keys = append(keys, filepath.ToSlash(rel))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(keys)
				return keys
			}
		},
	}
}

// recordedKeys returns the object keys the ledger records for its rows'
// evidence and snapshots.
func recordedKeys(t *testing.T, h *harness) []string {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	rows, _, err := h.l.List(ctx, ledger.Query{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		ev, err := h.l.Evidence(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ev.Objects {
			if !o.Location.Uploaded {
				t.Fatalf("object %s of row %s not uploaded", o.Location.Key, r.ID)
			}
			seen[o.Location.Key] = true
		}
		for _, s := range ev.Snapshots {
			seen[ledger.SnapshotKey(s)] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestLostPutRecordingLeavesNoOrphan: a segment put that reached the store
// but whose recording was lost (its answer failed, then the process
// restarted and more rows arrived) is put again under the same key, so the
// store holds exactly the objects the rows name.
func TestLostPutRecordingLeavesNoOrphan(t *testing.T) {
	for name, open := range evidenceStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			real, list := open(t)
			faulty := &faultyStore{ObjectStore: real, fail: func(op, key string) (bool, bool) {
				return op == "put" && strings.HasPrefix(key, "segments/"), true
			}}
			h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: faulty}
			t.Cleanup(h.sc.Close)
			h.set(time.Now().UTC())
			h.open(t)
			for i := range 6 {
				h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-" + string(rune('a'+i))})))
			}
			if _, err := h.l.UploadRound(ctx, 512, 4); !errors.Is(err, errInjected) {
				t.Fatalf("round with a lost segment answer: %v", err)
			}
			segs := func() []string {
				var out []string
				for _, k := range list() {
					if strings.HasPrefix(k, "segments/") {
						out = append(out, k)
					}
				}
				return out
			}
			if got := segs(); len(got) != 1 {
				t.Fatalf("segments in the store after the lost answer: %v", got)
			}

			// Restart: reopen the row store from its file; writes go on.
			if err := h.store.Close(); err != nil {
				t.Fatal(err)
			}
			h.objects = real
			h.open(t)
			for i := range 4 {
				h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "B-" + string(rune('a'+i))})))
			}
			h.drain(t)
			if got, want := list(), recordedKeys(t, h); !slices.Equal(got, want) {
				t.Fatalf("objects in the store:\n%v\nobjects the rows name:\n%v", got, want)
			}
			if got := segs(); len(got) != 2 { // the replayed plan and the later rows' segment
				t.Fatalf("segments: %v", got)
			}
		})
	}
}

// TestDoomedEntriesMoveToDeadLetters: an operation naming an object never
// uploaded and an evidence entry whose bytes are missing move to the dead
// letters at once, with their reason, and block nothing behind them;
// retrying puts them back in the outbox.
func TestDoomedEntriesMoveToDeadLetters(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	metrics := ledger.NewMetrics(reg)
	h.l = reopenWithMetrics(t, h, metrics)
	err := h.store.Update(ctx, func(tx ledger.Tx) error {
		if err := tx.Enqueue(ledger.OutboxEntry{Op: ledger.OpHold, Key: "rows/never.json"}, h.clock()); err != nil {
			return err
		}
		return tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: "gone", Key: ledger.EvidenceKey("gone"), Segment: true, RetainUntil: h.clock().Add(time.Hour)}, h.clock())
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-" + string(rune('a'+i))})))
	}
	for range 3 {
		if _, err := h.l.UploadRound(ctx, 512, 4); err != nil {
			t.Fatalf("round: %v", err)
		}
	}
	rep, err := h.l.Outbox(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Depth != 0 || rep.DeadLetterCount != 2 || len(rep.DeadLetters) != 2 || rep.Plans != 0 {
		t.Fatalf("outbox after the rounds: %+v", rep)
	}
	hold, ev := rep.DeadLetters[0], rep.DeadLetters[1]
	if hold.Entry.Key != "rows/never.json" || !strings.Contains(hold.Reason, "never uploaded") || hold.Attempts != 1 || hold.FirstFailure.IsZero() {
		t.Fatalf("dead hold: %+v", hold)
	}
	if ev.Entry.Key != ledger.EvidenceKey("gone") || !strings.Contains(ev.Reason, "not found") {
		t.Fatalf("dead evidence entry: %+v", ev)
	}
	if got := testutil.ToFloat64(metrics.DeadLetters); got != 2 {
		t.Fatalf("dead-letter gauge %v, want 2", got)
	}
	recordedKeys(t, h) // the rows behind the doomed entries are uploaded

	// Retry one by key: back in the outbox, doomed again.
	if n, err := h.l.RetryDeadLetters(ctx, "rows/never.json", false); err != nil || n != 1 {
		t.Fatalf("retry: %d %v", n, err)
	}
	if rep, _ := h.l.Outbox(ctx, 0, ""); rep.Depth != 1 || rep.DeadLetterCount != 1 {
		t.Fatalf("after retry: %+v", rep)
	}
	if _, err := h.l.RetryDeadLetters(ctx, "rows/other.json", false); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("retry of an unknown key: %v", err)
	}
	if _, err := h.l.RetryDeadLetters(ctx, "", false); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("retry of nothing: %v", err)
	}
	if _, err := h.l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatal(err)
	}
	if n, err := h.l.RetryDeadLetters(ctx, "", true); err != nil || n != 2 {
		t.Fatalf("retry all: %d %v", n, err)
	}
	if rep, _ := h.l.Outbox(ctx, 0, ""); rep.Depth != 2 || rep.DeadLetterCount != 0 || rep.OldestQueued.IsZero() {
		t.Fatalf("after retry all: %+v", rep)
	}
}

// TestFailingEntryMovesAsideWhileOthersSucceed: an entry that keeps failing
// while other uploads succeed moves to the dead letters after MaxAttempts
// rounds; during an outage of the whole store nothing moves.
func TestFailingEntryMovesAsideWhileOthersSucceed(t *testing.T) {
	ctx := context.Background()
	real, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var down bool
	var stuck string
	faulty := &faultyStore{ObjectStore: real}
	faulty.fail = func(op, key string) (bool, bool) { return down || key == stuck, false }
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: faulty}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)

	// Outage: every call fails; many rounds move nothing aside.
	down = true
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "O-1"})))
	for range 2 * ledger.DefaultMaxAttempts {
		if _, err := h.l.UploadRound(ctx, 512, 4); !errors.Is(err, errInjected) {
			t.Fatalf("round during the outage: %v", err)
		}
	}
	if rep, _ := h.l.Outbox(ctx, 0, ""); rep.DeadLetterCount != 0 || rep.Depth != 3 {
		t.Fatalf("outage moved entries aside: %+v", rep)
	}
	down = false
	h.drain(t)

	// One incident's evidence (an object of its own) keeps failing while
	// the rows after it upload.
	inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "I-1", ScopesUsed: []string{"plan:change"}})))
	stuck = ledger.EvidenceKey(inc.ID)
	for i := range ledger.DefaultMaxAttempts {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "N-" + string(rune('a'+i))})))
		n, err := h.l.UploadRound(ctx, 512, 4)
		if i < ledger.DefaultMaxAttempts-1 && !errors.Is(err, errInjected) {
			t.Fatalf("round %d: %d %v", i, n, err)
		}
	}
	rep, err := h.l.Outbox(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Depth != 0 || rep.DeadLetterCount != 1 {
		t.Fatalf("outbox: %+v", rep)
	}
	d := rep.DeadLetters[0]
	if d.Entry.Key != stuck || d.Attempts != ledger.DefaultMaxAttempts || !strings.Contains(d.Reason, errInjected.Error()) || d.FirstFailure.IsZero() || d.LastFailure.Before(d.FirstFailure) {
		t.Fatalf("dead letter: %+v", d)
	}
	// Healed, retried: it lands with its legal hold.
	stuck = ""
	if n, err := h.l.RetryDeadLetters(ctx, d.Entry.Key, false); err != nil || n != 1 {
		t.Fatalf("retry: %d %v", n, err)
	}
	h.drain(t)
	ev, err := h.l.Evidence(ctx, inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if loc := ev.Objects[0].Location; !loc.Uploaded || !loc.LegalHold {
		t.Fatalf("incident evidence after retry: %+v", loc)
	}
}

// TestFailingOperationHoldsBackOnlyItsObject: a legal hold that keeps
// failing keeps the later operations on its object waiting, in order,
// while operations on other objects and later puts go through.
func TestFailingOperationHoldsBackOnlyItsObject(t *testing.T) {
	ctx := context.Background()
	real, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var stuck string
	faulty := &faultyStore{ObjectStore: real}
	faulty.fail = func(op, key string) (bool, bool) { return op == "hold" && key == stuck, false }
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: faulty}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	a, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	h.drain(t)
	ev, err := h.l.Evidence(ctx, a.ID)
	if err != nil || len(ev.Snapshots) != 2 {
		t.Fatalf("evidence: %+v %v", ev, err)
	}
	// Two objects of their own: the brand's and the agent's key snapshots.
	k1, k2 := ledger.SnapshotKey(ev.Snapshots[0]), ledger.SnapshotKey(ev.Snapshots[1])
	stuck = k1
	err = h.store.Update(ctx, func(tx ledger.Tx) error {
		for _, e := range []ledger.OutboxEntry{{Op: ledger.OpHold, Key: k1}, {Op: ledger.OpRelease, Key: k1}, {Op: ledger.OpHold, Key: k2}} {
			if err := tx.Enqueue(e, h.clock()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "C-1"})))
	if _, err := h.l.UploadRound(ctx, 512, 4); !errors.Is(err, errInjected) {
		t.Fatalf("round: %v", err)
	}
	faulty.mu.Lock()
	calls := faulty.calls["hold "+k1]
	faulty.mu.Unlock()
	if calls != 1 { // the hold was tried once; the release behind it waited
		t.Fatalf("hold and release calls on the stuck object: %d", calls)
	}
	if rep, _ := h.l.Outbox(ctx, 0, ""); rep.Depth != 2 {
		t.Fatalf("outbox depth %d, want 2 (the failed hold and the release behind it)", rep.Depth)
	}
	object := func(key string) ledger.Location {
		t.Helper()
		var loc ledger.Location
		err := h.store.View(ctx, func(tx ledger.Tx) error {
			var err error
			loc, err = tx.Object(key)
			return err
		})
		if err != nil {
			t.Fatalf("object %s: %v", key, err)
		}
		return loc
	}
	if !object(k2).LegalHold {
		t.Fatal("the hold on the other object waited behind the failing one")
	}
	if ev, _ := h.l.Evidence(ctx, c.ID); !ev.Objects[0].Location.Uploaded {
		t.Fatal("the row after the failing operation was not uploaded")
	}
	stuck = ""
	h.drain(t)
	if rep, _ := h.l.Outbox(ctx, 0, ""); rep.Depth != 0 || rep.DeadLetterCount != 0 {
		t.Fatalf("after healing: %+v", rep)
	}
	if object(k1).LegalHold {
		t.Fatal("the release ran before the hold")
	}
}

// reopenWithMetrics returns a ledger over h's stores that records metrics.
func reopenWithMetrics(t *testing.T, h *harness, m *ledger.Metrics) *ledger.Ledger {
	t.Helper()
	objects, err := localdir.Open(h.objDir)
	if err != nil {
		t.Fatal(err)
	}
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, h.sc.Brands(), h.sc.Agents())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := verifier.New(verifier.Config{Audience: h.sc.Audience, CheckedBy: "pactledger test"})
	l, err := ledger.New(h.store, objects, v, reg, ledger.Config{Now: h.clock, Logger: slog.New(slog.DiscardHandler), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestOccupiedKeyMovesAsideAtOnce: write-once storage holding other bytes
// under an object's key dooms its put; it moves to the dead letters in the
// first round, even one where nothing else succeeded.
func TestOccupiedKeyMovesAsideAtOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	real, err := localdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var holdsFail bool
	faulty := &faultyStore{ObjectStore: real}
	faulty.fail = func(op, key string) (bool, bool) { return holdsFail && op == "hold", false }
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: faulty}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-1"})))
	h.drain(t)
	// An incident: its evidence is an object of its own, put with a hold,
	// and the snapshots it names get holds (failing here).
	holdsFail = true
	inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "I-1", ScopesUsed: []string{"plan:change"}})))
	if _, err := real.Put(ctx, ledger.EvidenceKey(inc.ID), []byte("other bytes"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.UploadRound(ctx, 512, 4); !errors.Is(err, errInjected) {
		t.Fatalf("round: %v", err)
	}
	rep, err := h.l.Outbox(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeadLetterCount != 1 || rep.DeadLetters[0].Entry.Key != ledger.EvidenceKey(inc.ID) || !strings.Contains(rep.DeadLetters[0].Reason, "already holds") {
		t.Fatalf("outbox: %+v", rep)
	}
	if rep.Depth == 0 {
		t.Fatal("the failing holds were moved aside although nothing succeeded")
	}
}

// stallingStore passes calls to a real evidence store, except a put of the
// key it is told to stall: that waits until its context ends, and each
// such put is announced on stalled.
type stallingStore struct {
	ledger.ObjectStore
	mu      sync.Mutex
	key     string
	stalled chan string
}

func (s *stallingStore) stall(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

func (s *stallingStore) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	s.mu.Lock()
	stall := key == s.key
	s.mu.Unlock()
	if stall {
		s.stalled <- key
		<-ctx.Done()
		return ledger.Location{}, ctx.Err()
	}
	return s.ObjectStore.Put(ctx, key, body, until)
}

// uploadingWithAStalledPut is a ledger (with metrics, when given) whose
// evidence store never answers the put of an incident's evidence,
// recorded first (inc), and whose uploader runs with cfg; stop ends the
// uploader, as the test's end does.
func uploadingWithAStalledPut(t *testing.T, metrics *ledger.Metrics, cfg ledger.UploaderConfig) (h *harness, st *stallingStore, inc *ledger.Row, stop func()) {
	t.Helper()
	real, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st = &stallingStore{ObjectStore: real, stalled: make(chan string)}
	h = &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: st, metrics: metrics}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)

	inc, _ = h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "I-1", ScopesUsed: []string{"plan:change"}})))
	st.stall(ledger.EvidenceKey(inc.ID))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = h.l.RunUploader(ctx, cfg)
	}()
	stop = func() { cancel(); <-stopped }
	t.Cleanup(func() { stop(); close(st.stalled) })
	return h, st, inc, stop
}

// TestUploadStopsWhenItsClaimRunsOut: a put the evidence store never
// answers is given up when the round's claim on its entry runs out, and
// the uploader claims again; those rounds are not counted against the
// entry, even while the other uploads of the same rounds succeed, so it
// lands once the store answers, with nothing moved to the dead letters.
func TestUploadStopsWhenItsClaimRunsOut(t *testing.T) {
	h, st, inc, stop := uploadingWithAStalledPut(t, nil, ledger.UploaderConfig{ClaimTTL: 200 * time.Millisecond, Idle: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})

	// Each stalled put ends with its claim; a row appended meanwhile makes
	// the next round's other upload succeed.
	for i := range ledger.DefaultMaxAttempts + 2 {
		select {
		case <-st.stalled:
		case <-time.After(10 * time.Second):
			if rep, _ := h.l.Outbox(context.Background(), 0, ""); rep.DeadLetterCount != 0 {
				t.Fatalf("the stalled entry was counted against and moved aside after %d rounds: %+v", i, rep.DeadLetters)
			}
			t.Fatalf("put %d of the stalled object never came: the one before waited past its claim", i+1)
		}
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("N-%d", i)})))
	}
	// The store answers again: the uploader stops, and the rounds run
	// here drain the outbox with nothing moved aside.
	st.stall("")
	go func() { // a put that stalled before the store answered again
		for range st.stalled {
		}
	}()
	stop()
	h.drain(t)
	rep, err := h.l.Outbox(context.Background(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeadLetterCount != 0 || rep.Depth != 0 {
		t.Fatalf("the stalled entry was counted against and moved aside: %+v", rep)
	}
	ev, err := h.l.Evidence(context.Background(), inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Objects[0].Location.Uploaded {
		t.Fatalf("incident evidence: %+v", ev.Objects[0].Location)
	}
}

// The outbox's gauge follows the outbox while a round waits on an
// evidence store that takes the put and never answers: the rows recorded
// meanwhile show in it before the round's claim runs out.
func TestOutboxGaugeFollowsTheOutboxWhileAPutHangs(t *testing.T) {
	h, st, _, _ := uploadingWithAStalledPut(t, ledger.NewMetrics(prometheus.NewRegistry()), ledger.UploaderConfig{ClaimTTL: time.Hour, DepthEvery: 10 * time.Millisecond})
	select {
	case <-st.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the put never came")
	}
	for i := range 3 {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("N-%d", i)})))
	}
	want, err := h.l.OutboxDepth(context.Background())
	if err != nil || want < 4 {
		t.Fatalf("outbox depth %d (%v), want the incident's entries and three rows'", want, err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for got := testutil.ToFloat64(h.metrics.OutboxDepth); got != float64(want); got = testutil.ToFloat64(h.metrics.OutboxDepth) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("pactledger_outbox_depth reads %v while the put hangs, the outbox holds %d", got, want)
		}
	}
}

// TestUploaderInterval: after a round that uploaded less than a batch,
// the next starts Interval after it, whatever rows come meanwhile; the
// rows recorded in between wait for that round and share its segment.
func TestUploaderInterval(t *testing.T) {
	h := newHarness(t)
	first, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "P-1"})))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = h.l.RunUploader(ctx, ledger.UploaderConfig{Interval: time.Hour})
	}()
	defer func() { cancel(); <-stopped }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for n, _ := h.l.OutboxDepth(context.Background()); n != 0; n, _ = h.l.OutboxDepth(context.Background()) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the first round did not upload the first row's evidence: %d entries queued", n)
		}
	}
	second, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "P-2"})))
	third, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "P-3"})))
	cancel()
	<-stopped
	if n, err := h.l.OutboxDepth(context.Background()); err != nil || n != 2 {
		t.Fatalf("%d entries queued (%v), want the two rows recorded after the first round: a round started within the interval", n, err)
	}
	h.drain(t)
	key := func(r *ledger.Row) string {
		ev, err := h.l.Evidence(context.Background(), r.ID)
		if err != nil || !ev.Objects[0].Location.Uploaded {
			t.Fatalf("evidence of %s: %+v, %v", r.ID, ev, err)
		}
		return ev.Objects[0].Location.Key
	}
	if a, b, c := key(first), key(second), key(third); b != c || a == b {
		t.Fatalf("segments %s, %s, %s: want the second and third rows in one segment, the first in its own", a, b, c)
	}
}

// TestUploaderIntervalDefault: an unset interval is the default; a
// negative one leaves rounds back to back.
func TestUploaderIntervalDefault(t *testing.T) {
	if got := ledger.UploaderIntervalOf(ledger.UploaderConfig{}); got != ledger.DefaultUploadInterval {
		t.Errorf("unset: %v, want %v", got, ledger.DefaultUploadInterval)
	}
	if got := ledger.UploaderIntervalOf(ledger.UploaderConfig{Interval: -1}); got >= 0 {
		t.Errorf("negative: %v, want none", got)
	}
}

// TestPlanWithoutQueuedMembersIsDropped: a recorded plan whose members
// have all left the outbox (a round whose claim ran out before it
// recorded its plan, while another round uploaded the same entries) is
// dropped by the next round without a put (it would be an object no row
// names), and an operation queued on one of its members' keys does not
// wait behind it.
func TestPlanWithoutQueuedMembersIsDropped(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "S-1"})))
	var member ledger.OutboxEntry
	if err := h.store.View(ctx, func(tx ledger.Tx) error {
		all, err := tx.Outbox(100)
		for _, e := range all {
			if e.Kind == ledger.ObjectEvidence && e.Op == "" {
				member = e
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if member.Key == "" {
		t.Fatal("no evidence entry queued")
	}
	h.drain(t)

	stale := ledger.SegmentPlan{
		Key:         ledger.SegmentKey(h.clock().UTC().Truncate(24*time.Hour), member.Seq, member.Seq) + ".stale",
		RetainUntil: h.clock().Add(48 * time.Hour),
		Entries:     []ledger.OutboxEntry{member},
	}
	if err := h.store.Update(ctx, func(tx ledger.Tx) error {
		if err := tx.PlanSegment(stale); err != nil {
			return err
		}
		return tx.Enqueue(ledger.OutboxEntry{Op: ledger.OpExtend, Key: member.Key, RetainUntil: h.clock().Add(90 * 24 * time.Hour)}, h.clock())
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := h.l.UploadRound(ctx, 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := h.l.Outbox(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Plans != 0 || rep.Depth != 0 || rep.DeadLetterCount != 0 {
		t.Fatalf("after three rounds: %d plans, %d entries queued, %d dead letters; want none", rep.Plans, rep.Depth, rep.DeadLetterCount)
	}
	if _, err := os.Stat(filepath.Join(h.objDir, filepath.FromSlash(stale.Key))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale plan's object %s: %v; want it never put", stale.Key, err)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "segment plan dropped unput") || strings.Contains(logs, "dead letters") {
		t.Errorf("the ledger logged:\n%s\nwant the plan dropped unput, and nothing moved to the dead letters", logs)
	}
}

// recordedHarness opens a harness whose evidence store records its calls
// (a local directory behind a faultyStore that fails none), its row store
// wrapped by wrap when set, its log kept in h.logs, and appends three
// receipts for targets prefix-0, prefix-1, prefix-2.
func recordedHarness(t *testing.T, wrap func(ledger.Store) ledger.Store, prefix string) (*harness, *faultyStore) {
	t.Helper()
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := &faultyStore{ObjectStore: objects}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: rec, wrap: wrap, logs: &syncbuf.Buffer{}}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	for i := range 3 {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("%s-%d", prefix, i)})))
	}
	return h, rec
}

// callCount is how many calls the store has had.
func (f *faultyStore) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n += c
	}
	return n
}

// recordedNothing fails t unless the round just run recorded no segment
// plan, left all depth entries queued and made no call to the evidence
// store.
func recordedNothing(t *testing.T, h *harness, rec *faultyStore, depth int, when string) {
	t.Helper()
	rep, err := h.l.Outbox(context.Background(), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if calls := rec.callCount(); rep.Plans != 0 || rep.Depth != depth || calls != 0 {
		t.Fatalf("%s: %d plans recorded, %d of %d entries queued, %d calls to the evidence store; want none, all, none",
			when, rep.Plans, rep.Depth, depth, calls)
	}
}

// TestNoPlanAfterTheClaimRanOut: a round whose claim ran out before it
// recorded its segment plans records none and puts nothing (another
// round may hold its entries by then and plan them itself); the next
// round with a live claim uploads them.
func TestNoPlanAfterTheClaimRanOut(t *testing.T) {
	ctx := context.Background()
	h, rec := recordedHarness(t, nil, "C")
	depth, err := h.l.OutboxDepth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A claim of a nanosecond has run out by the time the round has read
	// its entries.
	if _, err := h.l.UploadRoundWith(ctx, ledger.UploaderConfig{ClaimTTL: time.Nanosecond}); !errors.Is(err, ledger.ErrClaimRanOut) {
		t.Fatalf("round whose claim ran out: %v, want its claim ran out", err)
	}
	recordedNothing(t, h, rec, depth, "after a round whose claim ran out")
	h.drain(t)
	if len(recordedKeys(t, h)) == 0 { // recordedKeys fails on a row not uploaded
		t.Fatal("nothing uploaded after the round with a live claim")
	}
}

// sharedStore is a row store as one of several uploaders sharing it sees
// it: Claim passes over the entries others names (another replica holds
// them), and HoldsClaim answers false for the entries gone names (another
// holder took them). Either may be nil.
type sharedStore struct {
	ledger.Store
	gone   func(seqs []uint64) bool
	others func(seq uint64) bool
}

type sharedTx struct {
	ledger.Tx
	s sharedStore
}

func (s sharedStore) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.Update(ctx, func(tx ledger.Tx) error { return fn(sharedTx{tx, s}) })
}

func (tx sharedTx) HoldsClaim(holder string, seqs []uint64) (bool, error) {
	if tx.s.gone != nil && tx.s.gone(seqs) {
		return false, nil
	}
	return tx.Tx.HoldsClaim(holder, seqs)
}

func (tx sharedTx) Claim(n int, holder string, ttl time.Duration) ([]ledger.OutboxEntry, error) {
	es, err := tx.Tx.Claim(n, holder, ttl)
	if tx.s.others != nil {
		es = slices.DeleteFunc(es, func(e ledger.OutboxEntry) bool { return tx.s.others(e.Seq) })
	}
	return es, err
}

// TestNoPlanWhenTheStoreSaysTheClaimIsGone: when the store finds the new
// plans' members no longer queued under this round's claim, the round
// records no plan, puts nothing and leaves every entry queued; once the
// store finds the claim held again, a round uploads them.
func TestNoPlanWhenTheStoreSaysTheClaimIsGone(t *testing.T) {
	ctx := context.Background()
	var gone atomic.Bool
	gone.Store(true)
	h, rec := recordedHarness(t, func(s ledger.Store) ledger.Store {
		return sharedStore{Store: s, gone: func([]uint64) bool { return gone.Load() }}
	}, "G")
	depth, err := h.l.OutboxDepth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.UploadRound(ctx, 512, 4); !errors.Is(err, ledger.ErrClaimRanOut) {
		t.Fatalf("round whose claim the store says is gone: %v", err)
	}
	recordedNothing(t, h, rec, depth, "after a round the store refused")
	gone.Store(false)
	h.drain(t)
	if len(recordedKeys(t, h)) == 0 { // recordedKeys fails on a row not uploaded
		t.Fatal("nothing uploaded once the store found the claim held")
	}
}

// uploading runs h's uploader, its rounds back to back and retried at
// once, until t ends.
func (h *harness) uploading(t *testing.T, cfg ledger.UploaderConfig) {
	cfg.Interval, cfg.Idle, cfg.MaxBackoff = -1, time.Millisecond, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = h.l.RunUploader(ctx, cfg)
	}()
	t.Cleanup(func() { cancel(); <-stopped })
}

// within polls done until it holds, failing t after 30 s with the outbox
// and the ledger's log.
func (h *harness) within(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		if time.Now().After(deadline) {
			rep, _ := h.l.Outbox(context.Background(), 0, "")
			t.Fatalf("%s: not within 30s; outbox %+v; the ledger logged:\n%s", what, rep, h.logs.String())
		}
		<-tick.C
	}
}

// drained reports whether h's outbox is empty.
func (h *harness) drained() bool {
	n, err := h.l.OutboxDepth(context.Background())
	return err == nil && n == 0
}

// TestRoundsShrinkWhenTheyOutlastTheirClaim: a store that finds the claim
// gone on more than one plan member at a time stands for rounds that
// outlast their claim with more entries than that. Were every round to
// claim the whole batch again, none would ever record its plans; the
// uploader claims fewer entries after each such round, says so, and
// drains the outbox.
func TestRoundsShrinkWhenTheyOutlastTheirClaim(t *testing.T) {
	h, _ := recordedHarness(t, func(s ledger.Store) ledger.Store {
		return sharedStore{Store: s, gone: func(seqs []uint64) bool { return len(seqs) > 1 }}
	}, "S")
	logs := h.logs
	h.uploading(t, ledger.UploaderConfig{})
	h.within(t, "the outbox drained", h.drained)
	if !strings.Contains(logs.String(), "the next rounds claim fewer") {
		t.Errorf("the uploader did not say its rounds claim fewer entries; it logged:\n%s", logs.String())
	}
	recordedKeys(t, h) // fails on a row not uploaded
}

// TestPlansOfOtherRoundsAreLeftToThem: a recorded segment plan whose
// members another uploader holds is not put by this one's rounds (each
// replica would put every plan otherwise, and wait on each stalled one);
// once a round claims its members, it puts the plan and the outbox drains.
func TestPlansOfOtherRoundsAreLeftToThem(t *testing.T) {
	ctx := context.Background()
	var othersHold atomic.Bool
	var held sync.Map // seqs another uploader holds while othersHold is set
	h, rec := recordedHarness(t, func(s ledger.Store) ledger.Store {
		return sharedStore{Store: s, others: func(seq uint64) bool {
			_, ok := held.Load(seq)
			return ok && othersHold.Load()
		}}
	}, "P")
	// A round records its plan and its put fails: the plan stays.
	rec.mu.Lock()
	rec.fail = func(op, key string) (bool, bool) { return strings.HasPrefix(key, "segments/"), false }
	rec.mu.Unlock()
	if _, err := h.l.UploadRound(ctx, 512, 4); err == nil {
		t.Fatal("round with its segment put failing: no error")
	}
	var plan ledger.SegmentPlan
	if err := h.store.View(ctx, func(tx ledger.Tx) error {
		plans, err := tx.SegmentPlans()
		if len(plans) == 1 {
			plan = plans[0]
		}
		return err
	}); err != nil || plan.Key == "" {
		t.Fatalf("plans after the failed put: %+v, %v; want one", plan, err)
	}
	for _, m := range plan.Entries {
		held.Store(m.Seq, true)
	}
	rec.mu.Lock()
	rec.fail = nil
	puts := rec.calls["put "+plan.Key]
	rec.mu.Unlock()

	othersHold.Store(true)
	if _, err := h.l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatal(err)
	}
	rep, err := h.l.Outbox(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	again := rec.calls["put "+plan.Key] - puts
	rec.mu.Unlock()
	if again != 0 || rep.Plans != 1 || rep.Depth != len(plan.Entries) {
		t.Fatalf("while another uploader holds the plan's members: %d puts of it, %d plans, %d entries queued; want 0, 1, %d",
			again, rep.Plans, rep.Depth, len(plan.Entries))
	}

	othersHold.Store(false)
	h.drain(t)
	if rep, err = h.l.Outbox(ctx, 0, ""); err != nil || rep.Plans != 0 || rep.Depth != 0 {
		t.Fatalf("once this uploader claims the members: %d plans, %d entries queued (%v); want none", rep.Plans, rep.Depth, err)
	}
	recordedKeys(t, h) // fails on a row not uploaded
}

// TestOperationBehindAPlanOfAnotherRound: an operation queued ahead of its
// object's put (as after the put was retried from the dead letters),
// the put planned into a segment whose first put failed, and rounds of
// one entry, which claim the operation and never the plan's member (a
// single uploader claims the first entries): the round that claims the
// operation puts the plan it waits on, and the outbox drains.
func TestOperationBehindAPlanOfAnotherRound(t *testing.T) {
	ctx := context.Background()
	h, rec := recordedHarness(t, nil, "W")
	var put ledger.OutboxEntry
	if err := h.store.Update(ctx, func(tx ledger.Tx) error {
		all, err := tx.Outbox(100)
		if err != nil {
			return err
		}
		for _, e := range all {
			if e.Kind == ledger.ObjectEvidence && e.Op == "" && e.Segment && put.Key == "" {
				put = e
			}
			if _, err := tx.Dequeue(e.Seq); err != nil {
				return err
			}
		}
		if put.Key == "" {
			return errors.New("no evidence bundle queued")
		}
		if err := tx.Enqueue(ledger.OutboxEntry{Op: ledger.OpExtend, Key: put.Key, RetainUntil: h.clock().Add(90 * 24 * time.Hour)}, h.clock()); err != nil {
			return err
		}
		return tx.Enqueue(put, h.clock())
	}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.fail = func(op, key string) (bool, bool) { return strings.HasPrefix(key, "segments/"), false }
	rec.mu.Unlock()
	if _, err := h.l.UploadRound(ctx, 512, 4); err == nil {
		t.Fatal("round with its segment put failing: no error")
	}
	rec.mu.Lock()
	rec.fail = nil
	rec.mu.Unlock()
	for range 10 {
		if _, err := h.l.UploadRound(ctx, 1, 4); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := h.l.Outbox(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Depth != 0 || rep.Plans != 0 || rep.DeadLetterCount != 0 {
		t.Fatalf("after ten rounds of one entry: %d entries queued, %d plans, %d dead letters; want none", rep.Depth, rep.Plans, rep.DeadLetterCount)
	}
}

// opsAheadOfPut rearranges h's outbox so that n operations on the first
// evidence bundle's key come first and the bundle's put last, with at
// least two other entries between (storetest.OpsAheadOfPut), and returns
// the key.
func opsAheadOfPut(t *testing.T, h *harness, n int) string {
	t.Helper()
	var put ledger.OutboxEntry
	if err := h.store.Update(context.Background(), func(tx ledger.Tx) error {
		var between int
		var err error
		put, between, err = storetest.OpsAheadOfPut(tx, n, h.clock())
		if err == nil && between < 2 {
			err = fmt.Errorf("%d entries besides the bundle's put; want two more", between)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return put.Key
}

// TestOperationWaitsForItsPutBeyondTheRound: a round that claims an
// operation and not the put of its object, queued after it, leaves the
// operation queued (it used to move it to the dead letters as "never
// uploaded"), claims the put too and uploads it; the next round applies
// the operation.
func TestOperationWaitsForItsPutBeyondTheRound(t *testing.T) {
	ctx := context.Background()
	h, rec := recordedHarness(t, nil, "B")
	key := opsAheadOfPut(t, h, 1)
	depth, err := h.l.OutboxDepth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, wantDepth int) {
		t.Helper()
		rep, err := h.l.Outbox(ctx, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if rep.DeadLetterCount != 0 || rep.Depth != wantDepth {
			t.Fatalf("%s: %d dead letters %+v, %d entries queued; want none, %d", when, rep.DeadLetterCount, rep.DeadLetters, rep.Depth, wantDepth)
		}
	}
	if _, err := h.l.UploadRound(ctx, 1, 4); err != nil {
		t.Fatal(err)
	}
	check("after a round that claimed the operation alone", depth-1)
	if !strings.Contains(h.logs.String(), "operations wait on the puts of their objects") {
		t.Errorf("the round did not say the operation waited; it logged:\n%s", h.logs.String())
	}
	rec.mu.Lock()
	var putKey string
	for call := range rec.calls {
		if strings.HasPrefix(call, "put segments/") {
			putKey = call
		}
	}
	rec.mu.Unlock()
	if putKey == "" {
		t.Fatalf("the round did not put the segment with %s; the evidence store had %v", key, rec.calls)
	}
	if _, err := h.l.UploadRound(ctx, 1, 4); err != nil {
		t.Fatal(err)
	}
	check("after the next round of one", depth-2)
	h.drain(t)
	check("after the outbox drained", 0)
}

// TestRoundsReachAWaitedPut: the first entries are operations whose
// object's put is queued last, so that a round claims them, and not the
// put: with the uploader's rounds down to one entry (rounds outlasted
// their claim), and with more operations waiting than a batch. The rounds
// claim the put the operations wait on, and the outbox drains with
// nothing moved to the dead letters.
func TestRoundsReachAWaitedPut(t *testing.T) {
	for _, c := range []struct {
		name   string
		shrunk bool
		batch  int
		ops    int
	}{
		{"rounds down to one entry", true, 0, 1},
		{"more operations waiting than a batch", false, 2, 3},
		{"ten operations, rounds of one", false, 1, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			var gone atomic.Bool
			gone.Store(c.shrunk)
			h, _ := recordedHarness(t, func(s ledger.Store) ledger.Store {
				return sharedStore{Store: s, gone: func([]uint64) bool { return gone.Load() }}
			}, "R")
			opsAheadOfPut(t, h, c.ops)
			h.uploading(t, ledger.UploaderConfig{Batch: c.batch})
			if c.shrunk {
				h.within(t, "rounds down to one entry", func() bool { return strings.Contains(h.logs.String(), "next=1 ") })
				gone.Store(false)
			}
			h.within(t, "the outbox drained", h.drained)
			if rep, err := h.l.Outbox(context.Background(), 0, ""); err != nil || rep.DeadLetterCount != 0 {
				t.Fatalf("%d dead letters %+v (%v); want none", rep.DeadLetterCount, rep.DeadLetters, err)
			}
		})
	}
}

// reversedFailures is an evidence store whose puts of first and second
// fail, second's before first's: first's put waits until second's has
// failed, as a slower answer would.
type reversedFailures struct {
	ledger.ObjectStore
	first, second string
	secondFailed  chan struct{}
}

func (s *reversedFailures) Put(ctx context.Context, key string, body []byte, until time.Time) (ledger.Location, error) {
	switch key {
	case s.first:
		select {
		case <-s.secondFailed:
		case <-ctx.Done():
			return ledger.Location{}, ctx.Err()
		case <-time.After(time.Minute):
			return ledger.Location{}, errors.New("the second put never came")
		}
		return ledger.Location{}, errInjected
	case s.second:
		close(s.secondFailed)
		return ledger.Location{}, errInjected
	}
	return s.ObjectStore.Put(ctx, key, body, until)
}

// writeOrder is a row store that records, in order, the seqs of the
// outbox entries whose failure records and dead letters are written.
type writeOrder struct {
	ledger.Store
	mu                *sync.Mutex
	failures, letters *[]uint64
}

type writeOrderTx struct {
	ledger.Tx
	s writeOrder
}

func (s writeOrder) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.Update(ctx, func(tx ledger.Tx) error { return fn(writeOrderTx{tx, s}) })
}

func (tx writeOrderTx) SetFailure(seq uint64, f ledger.OutboxFailure) error {
	tx.s.mu.Lock()
	*tx.s.failures = append(*tx.s.failures, seq)
	tx.s.mu.Unlock()
	return tx.Tx.SetFailure(seq, f)
}

func (tx writeOrderTx) PutDeadLetter(d ledger.DeadLetter) error {
	tx.s.mu.Lock()
	*tx.s.letters = append(*tx.s.letters, d.Entry.Seq)
	tx.s.mu.Unlock()
	return tx.Tx.PutDeadLetter(d)
}

// TestFailuresRecordedInEntryOrder: the uploads of a round fail in any
// order, and the round records their failures and moves them to the dead
// letters in the order of their entries, the order in which the round's
// other writes take entries: two uploaders' rounds that record the same
// entries then lock them in one order on a shared store.
func TestFailuresRecordedInEntryOrder(t *testing.T) {
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &reversedFailures{ObjectStore: objects, secondFailed: make(chan struct{})}
	var mu sync.Mutex
	var failures, letters []uint64
	wrap := func(s ledger.Store) ledger.Store { return writeOrder{s, &mu, &failures, &letters} }
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: st, wrap: wrap}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)

	// Incidents' evidence goes up as objects of its own, one put each; a
	// read-only row's goes in a segment, whose put succeeds, so that the
	// failures are counted against their entries.
	first, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "I-1", ScopesUsed: []string{"plan:change"}})))
	second, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "I-2", ScopesUsed: []string{"plan:change"}})))
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "R-1"})))
	st.first, st.second = ledger.EvidenceKey(first.ID), ledger.EvidenceKey(second.ID)

	// One attempt moves an entry aside: the round writes both records.
	if _, err := h.l.UploadRoundWith(context.Background(), ledger.UploaderConfig{Workers: 4, MaxAttempts: 1}); err != nil {
		t.Fatalf("round: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) != 2 || !slices.IsSorted(failures) {
		t.Errorf("failure records written for entries %v; want both incidents' entries, in seq order", failures)
	}
	if len(letters) != 2 || !slices.IsSorted(letters) {
		t.Errorf("dead letters written for entries %v; want both incidents' entries, in seq order", letters)
	}
}

// holdRecorder is a real evidence store that records the last legal hold
// placed or released on each key, and refuses releases of JWKS snapshots
// while refuse is set.
type holdRecorder struct {
	ledger.ObjectStore
	refuse atomic.Bool
	mu     sync.Mutex
	held   map[string]bool
}

func (h *holdRecorder) SetLegalHold(ctx context.Context, loc ledger.Location, on bool) error {
	if !on && h.refuse.Load() && strings.HasPrefix(loc.Key, "jwks/") {
		return errInjected
	}
	if err := h.ObjectStore.SetLegalHold(ctx, loc, on); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[loc.Key] = on
	return nil
}

func (h *holdRecorder) isHeld(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[key]
}

// TestRetriedReleaseKeepsANewerIncidentsHold: incident A's close queues
// the release of the JWKS snapshots it held; the releases fail until they
// go to the dead letters. Incident B then holds the same snapshots. When
// the dead letters are retried, A's release runs after B's hold, and
// leaves the outbox without releasing what B holds; once B closes, its
// own release is applied.
func TestRetriedReleaseKeepsANewerIncidentsHold(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := localdir.Open(filepath.Join(dir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	objects := &holdRecorder{ObjectStore: local, held: map[string]bool{}}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: dir, objects: objects, now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)}
	t.Cleanup(h.sc.Close)
	h.open(t)
	incident := func(target string) *ledger.Row {
		t.Helper()
		r := h.sc.Mint(pacttest.Spec{Target: target})
		r.Actions[0].ArgsJSON = `{"order":"` + target + `","refund":"all"}` // not what was signed
		row, _ := h.append(t, in(r))
		if row.Status != ledger.Incident {
			t.Fatalf("row %v, want an incident", row.Status)
		}
		return row
	}
	a := incident("A-1")
	h.drain(t)
	snap := ledger.SnapshotKey(a.Agent.JWKSSnapshot)
	if !objects.isHeld(snap) {
		t.Fatalf("%s not held by incident %s", snap, a.IncidentID)
	}
	if _, err := h.l.CloseIncident(ctx, a.IncidentID, "resolved", "admin"); err != nil {
		t.Fatal(err)
	}
	objects.refuse.Store(true)
	for range 3 {
		if n, _ := h.l.OutboxDepth(ctx); n == 0 {
			break
		}
		_, _ = h.l.UploadRoundWith(ctx, ledger.UploaderConfig{MaxAttempts: 1})
	}
	if dead, err := h.l.DeadLetterCount(ctx); err != nil || dead == 0 {
		t.Fatalf("%d dead letters, %v; want the refused releases", dead, err)
	}
	b := incident("B-1")
	if ledger.SnapshotKey(b.Agent.JWKSSnapshot) != snap {
		t.Fatal("incident B names another snapshot")
	}
	objects.refuse.Store(false)
	h.drain(t)
	if !objects.isHeld(snap) {
		t.Fatalf("%s not held by incident %s", snap, b.IncidentID)
	}
	if _, err := h.l.RetryDeadLetters(ctx, "", true); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	if !objects.isHeld(snap) {
		t.Fatalf("%s released by incident %s's retried release while incident %s is open", snap, a.IncidentID, b.IncidentID)
	}
	if dead, err := h.l.DeadLetterCount(ctx); err != nil || dead != 0 {
		t.Fatalf("%d dead letters, %v; want none", dead, err)
	}
	if _, err := h.l.CloseIncident(ctx, b.IncidentID, "resolved", "admin"); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	if objects.isHeld(snap) {
		t.Fatalf("%s still held after both incidents closed", snap)
	}
}
