package ledger_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/mod/sumdb/note"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// While the bucket refuses the log's tiles, the integrator keeps extending
// the log in the row store and tries publishing again after a wait that
// doubles with each failure, with a warning for each attempt, instead of
// every round; once the bucket takes them the tiles are published and the
// log says after how many failures.
func TestPublishingBacksOffWhileTheBucketIsDown(t *testing.T) {
	objects, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	var refused []time.Time // one a publishing attempt: it stops at its first refused put
	rec := &faultyStore{ObjectStore: objects, fail: func(op, key string) (bool, bool) {
		if op != "put" || !strings.HasPrefix(key, ledger.LogPrefix) || !down.Load() {
			return false, false
		}
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, time.Now())
		return true, false
	}}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: rec, logs: &syncbuf.Buffer{}}
	t.Cleanup(h.sc.Close)
	h.set(time.Now().UTC())
	h.open(t)
	signer, _ := logKeys(t)
	runIntegrator(t, h.l, signer)

	h.queue(t, 0, 3)
	waitTreeSize(t, h.l, 3) // the log grows while its tiles cannot be published
	const attempts = 6
	waitUntil(t, "six refused publishing attempts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) >= attempts
	})
	mu.Lock()
	checkDoubling(t, "publishing", refused[:attempts])
	mu.Unlock()
	logs := h.logs.String()
	if n := strings.Count(logs, "publishing log tiles failed; will retry"); n < attempts-1 || !strings.Contains(logs, "failures=5") || !strings.Contains(logs, "retry_in=160ms") {
		t.Errorf("%d warnings of the refused attempts, want one each with its failures and retry_in; the ledger logged:\n%s", n, logs)
	}

	down.Store(false)
	waitUntil(t, "the tiles published again", func() bool {
		return strings.Contains(h.logs.String(), "publishing log tiles succeeded again")
	})
	if raw, err := objects.Get(context.Background(), ledger.LogPrefix+"checkpoints/3"); err != nil || len(raw) == 0 {
		t.Errorf("the bucket's checkpoint of size 3 after the outage: %v", err)
	}
}

// flakySigner signs checkpoints while up is set and fails otherwise,
// noting when each failed attempt came.
type flakySigner struct {
	note.Signer
	up     atomic.Bool
	mu     sync.Mutex
	failed []time.Time
}

func (s *flakySigner) Sign(msg []byte) ([]byte, error) {
	if s.up.Load() {
		return s.Signer.Sign(msg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = append(s.failed, time.Now())
	return nil, errors.New("signer unavailable")
}

func (s *flakySigner) failures() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failed)
}

// While the log cannot be extended (here its checkpoint cannot be
// signed), the integrator tries again after a doubling wait, with a
// warning for each attempt, and extends it once it can.
func TestExtendingBacksOffWhileItFails(t *testing.T) {
	h := newHarness(t)
	s, _ := logKeys(t)
	signer := &flakySigner{Signer: s}
	runIntegrator(t, h.l, signer)

	h.queue(t, 0, 3)
	const attempts = 6
	waitUntil(t, "six failed attempts to extend the log", func() bool { return len(signer.failures()) >= attempts })
	checkDoubling(t, "extending the log", signer.failures()[:attempts])
	if n := strings.Count(h.logs.String(), "extending the Merkle log failed; will retry"); n < attempts-1 {
		t.Errorf("%d warnings of the failed attempts, want one each; the ledger logged:\n%s", n, h.logs.String())
	}

	signer.up.Store(true)
	waitTreeSize(t, h.l, 3)
	waitUntil(t, "the log extended again", func() bool {
		return strings.Contains(h.logs.String(), "extending the Merkle log succeeded again")
	})
}

// integratorInterval is the log's interval in these tests.
const integratorInterval = 10 * time.Millisecond

// runIntegrator turns l's log on with signer and runs its integrator until
// the test ends.
func runIntegrator(t *testing.T, l *ledger.Ledger, signer note.Signer) {
	t.Helper()
	if err := l.EnableLog(ledger.LogConfig{Signer: signer, Interval: integratorInterval}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.RunIntegrator(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("integrator: %v", err)
		}
	})
}

// checkDoubling fails t unless each of the attempts at came at least the
// backoff after the one before: the interval, doubled with each failure
// (a wait is never shorter than the backoff set).
func checkDoubling(t *testing.T, step string, at []time.Time) {
	t.Helper()
	for i := 1; i < len(at); i++ {
		if gap, least := at[i].Sub(at[i-1]), integratorInterval<<(i-1); gap < least {
			t.Errorf("attempt %d at %s came %v after the one before, want at least %v", i+1, step, gap, least)
		}
	}
}

// waitUntil polls cond until it holds, failing t after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		<-tick.C
	}
}
