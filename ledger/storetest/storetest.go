// Package storetest is the conformance suite of the ledger's row store:
// every backend of ledger.Store runs Run against itself and must pass it
// unchanged.
//
// The suite checks what the ledger relies on, not how a backend keeps it:
// rows and every index with page tokens, the index of the rows that can
// count under a grant, dedupe under concurrent writers,
// group commit with a failing member, outbox order and claims, tombstones
// and what becomes deletable under the ledger's rules, reference counts,
// JWKS snapshots and the rows naming them, drill and incident pages, the drill pool and sampling from it, the access log, the Merkle
// log's queue and leaves, leases and fenced writes, restart, and Update
// after Close. Each sub-test opens its own store in its own directory.
package storetest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/pactledger/pactledger/ledger"
)

// Options describe what a backend does not do, so that Run skips the
// cases that do not apply, and how to make the state an earlier version
// of it left. The zero value runs every case but those that need such a
// state.
type Options struct {
	// SingleUploader says one uploader at a time uses the store (bbolt:
	// its file lock keeps other processes out), so Claim may hand out the
	// first entries without recording a claim; the case of several holders
	// claiming at once is skipped.
	SingleUploader bool
	// EarlierRequestJWTEntry writes, into the store kept in dir while it
	// is closed, the request-JWT entry naming row id under hash sha that
	// versions before ledger.IndexesRequestJWT wrote for any row with a
	// request JWT (a forged copy's among them), as they wrote it. Nil
	// skips the case of a row taking such an entry over.
	EarlierRequestJWTEntry func(t *testing.T, dir, sha, id string)
}

// Run runs the conformance suite against the backend that open opens.
//
// open opens the store kept in dir, creating an empty one when dir holds
// none, and returns it with the function that closes it. The suite calls
// open again on the same dir after closing, to check what survives a
// restart, and calls each close function exactly once. A backend whose
// rows live outside dir (a database server) keys its database by dir.
// At most one Options may be given.
func Run(t *testing.T, open func(t *testing.T, dir string) (ledger.Store, func() error), opts ...Options) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	h := opener(open)
	for _, c := range []struct {
		name string
		run  func(*testing.T, opener)
		skip string
	}{
		{name: "RowsAndIndexes", run: testRowsAndIndexes},
		{name: "PageTokens", run: testPageTokens},
		{name: "BoundedScan", run: testBoundedScan},
		{name: "ScanCounts", run: testScanCounts},
		{name: "SignedRows", run: testSignedRows},
		{name: "RowsByIDAndRowAfter", run: testRowsByID},
		{name: "RowUpdates", run: testRowUpdates},
		{name: "FarFutureTimes", run: testFarFutureTimes},
		{name: "EdgeArguments", run: testEdgeArguments},
		{name: "DedupeRace", run: testDedupeRace},
		{name: "GrantHolds", run: testGrantHolds},
		{name: "RequestJWTIndex", run: testRequestJWTIndex},
		{name: "RequestJWTTakenOver", run: func(t *testing.T, open opener) { testRequestJWTTakenOver(t, open, o.EarlierRequestJWTEntry) },
			skip: skipIf(o.EarlierRequestJWTEntry == nil, "no way given to write the request-JWT entry of an earlier version")},
		{name: "GroupCommitFailingMember", run: testGroupCommitFailingMember},
		{name: "OutboxOrder", run: testOutboxOrder},
		{name: "OutboxConcurrentEnqueue", run: testOutboxConcurrentEnqueue},
		{name: "OutboxOfKind", run: testOutboxOfKind},
		{name: "DequeueAndFailures", run: testDequeueAndFailures},
		{name: "RecordUploads", run: testRecordUploads},
		{name: "DeadLetters", run: testDeadLetters},
		{name: "SegmentPlans", run: testSegmentPlans},
		{name: "Claims", run: testClaims, skip: skipIf(o.SingleUploader, "a single uploader: Claim need not record claims")},
		{name: "Queued", run: testQueued},
		{name: "QueuedPuts", run: testQueuedPuts},
		{name: "ClaimEntries", run: func(t *testing.T, open opener) { testClaimEntries(t, open, !o.SingleUploader) }},
		{name: "HoldsClaimQueued", run: testHoldsClaimQueued},
		{name: "HoldsClaimHolders", run: testHoldsClaimHolders, skip: skipIf(o.SingleUploader, "a single uploader: no claims to hold")},
		{name: "References", run: testReferences},
		{name: "Tombstones", run: testTombstones},
		{name: "Expired", run: testExpired},
		{name: "Holds", run: testHolds},
		{name: "Snapshots", run: testSnapshots},
		{name: "SnapshotLinks", run: testSnapshotLinks},
		{name: "Revocations", run: testRevocations},
		{name: "RevocationsAfter", run: testRevocationsAfter},
		{name: "Prefetch", run: testPrefetch},
		{name: "Drills", run: testDrills},
		{name: "DrillPool", run: testDrillPool},
		{name: "Incidents", run: testIncidents},
		{name: "AccessLog", run: testAccessLog},
		{name: "PruneAccessKeeps", run: testPruneAccessKeeps},
		{name: "ObjectsUnder", run: testObjectsUnder},
		{name: "Log", run: testLog},
		{name: "LogDivergence", run: testLogDivergence},
		{name: "LeafQueued", run: testLeafQueued},
		{name: "LeafIndexNotMoved", run: testLeafIndexNotMoved},
		{name: "LogPrune", run: testLogPrune},
		{name: "Leases", run: testLeases},
		{name: "FencedBatch", run: testFencedBatch},
		{name: "Restart", run: testRestart},
		{name: "UpdateAfterClose", run: testUpdateAfterClose},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			c.run(t, h)
		})
	}
}

// skipIf returns why when cond holds, else "".
func skipIf(cond bool, why string) string {
	if cond {
		return why
	}
	return ""
}

// store is an open store under test and its close function, called once.
type store struct {
	ledger.Store
	once  sync.Once
	close func() error
	err   error
}

// Close closes the store once and returns the close error.
func (s *store) Close() error {
	s.once.Do(func() { s.err = s.close() })
	return s.err
}

// opener opens the store kept in a directory (see Run).
type opener func(t *testing.T, dir string) (ledger.Store, func() error)

// start opens the store in dir; it is closed when the test ends unless the
// test closed it first.
func (open opener) start(t *testing.T, dir string) *store {
	t.Helper()
	ls, closeFn := open(t, dir)
	s := &store{Store: ls, close: closeFn}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// fresh opens a store in a new directory.
func (open opener) fresh(t *testing.T) *store {
	t.Helper()
	return open.start(t, t.TempDir())
}

// update runs fn in Update and fails the test on an error.
// atOnce runs fn(i) for each i below n, on goroutines let go together,
// and returns each one's error.
func atOnce(n int, fn func(i int) error) []error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func update(t *testing.T, s ledger.Store, fn func(ledger.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// view runs fn in View and fails the test on an error.
func view(t *testing.T, s ledger.Store, fn func(ledger.Tx) error) {
	t.Helper()
	if err := s.View(t.Context(), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// same reports whether two values encode to the same JSON: what a row
// store keeps of a value is what the ledger reads back.
func same(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// show renders v for a failure message.
func show(v any) string {
	j, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(j)
}

// wantNotFound fails the test unless err wraps ledger.ErrNotFound.
func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("%s: got error %v, want one wrapping ledger.ErrNotFound", what, err)
	}
}
