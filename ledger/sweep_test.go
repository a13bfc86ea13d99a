package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/internal/tamper"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/ledger/storetest"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/localdir"
	s3store "github.com/pactledger/pactledger/storage/s3"
)

func (h *harness) drain(t *testing.T) {
	t.Helper()
	for range 20 {
		if n, _ := h.l.OutboxDepth(context.Background()); n == 0 {
			return
		}
		if _, err := h.l.UploadRound(context.Background(), 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("outbox did not drain")
}

// sweepAt sets the clock to at and sweeps.
func (h *harness) sweepAt(t *testing.T, at time.Time) *ledger.SweepResult {
	t.Helper()
	h.set(at)
	res, err := h.l.Sweep(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func ids(items []ledger.SweepItem) map[string]string {
	m := map[string]string{}
	for _, i := range items {
		m[i.RowID] = i.Kept
	}
	return m
}

// TestRetentionBoundariesOnS3 walks the injected clock across every
// retention boundary (read only day 89/91, money moved month 17/19, account
// changed, an incident open for two years then closed) against a real S3
// server with Object Lock.
func TestRetentionBoundariesOnS3(t *testing.T) {
	ctx := context.Background()
	bucket := s3test.Bucket()
	objects, err := s3store.Open(ctx, s3store.Config{Endpoint: s3srv.Endpoint, Bucket: bucket, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, Insecure: true, CreateBucket: true})
	if err != nil {
		t.Fatal(err)
	}
	// Segments span one second here (a day in production) so that S3's
	// retention of the test's segment ends within the test.
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects, span: time.Second}
	t.Cleanup(h.sc.Close)
	real := time.Now().UTC().Truncate(time.Second)
	h.set(real)
	h.open(t)

	// Each row's retention ends 12 s from now (real time), so S3 lets the
	// sweeper delete its objects once the test has waited that long.
	margin := 12 * time.Second
	// Retention counts from when the ledger recorded a row, so each row is
	// recorded with the ledger's clock set to its receipt's time.
	appendAt := func(spec pacttest.Spec) (*ledger.Row, *pacttest.Receipt) {
		t.Helper()
		h.set(spec.At)
		r := h.sc.Mint(spec)
		row, _ := h.append(t, in(r))
		return row, r
	}
	ro, roReceipt := appendAt(pacttest.Spec{Target: "R-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: real.AddDate(0, 0, -90).Add(margin)})
	mm, _ := appendAt(pacttest.Spec{Target: "M-1", At: real.AddDate(0, -18, 0).Add(margin)})
	ac, _ := appendAt(pacttest.Spec{Target: "C-1", Tool: "change_address", Granted: "orders:read account:address", ScopesUsed: []string{"account:address"}, At: real.AddDate(0, -12, 0).Add(margin)})
	// An incident opened on a day two years ago, and an account-change row
	// of the same platform that day (long past its 12 months), both under
	// another grant than the rows above (an open incident holds its grant's
	// rows too).
	// Noon of that day: the sibling a minute later is on the same day
	// whatever the time the test runs at.
	incAt := real.AddDate(-2, 0, 0).Truncate(24 * time.Hour).Add(12 * time.Hour)
	inc, _ := appendAt(pacttest.Spec{GrantID: "a2agrant_INC", Target: "I-1", At: incAt, ScopesUsed: []string{"plan:change"}})
	sib, _ := appendAt(pacttest.Spec{GrantID: "a2agrant_SIB", Target: "S-1", Tool: "change_address", Granted: "orders:read account:address", ScopesUsed: []string{"account:address"}, At: incAt.Add(time.Minute)})
	h.set(real)
	if ro.EvidenceNotKept == "" || mm.EvidenceNotKept != "" {
		t.Fatal("only the read-only row drops its evidence bundle")
	}
	for _, r := range []*ledger.Row{ro, mm, ac} {
		if !r.RetainUntil.Equal(real.Add(margin)) {
			t.Fatalf("%v row retains until %v, want %v", r.Class, r.RetainUntil, real.Add(margin))
		}
	}
	if inc.Status != ledger.Incident || !inc.RetainUntil.IsZero() {
		t.Fatalf("incident row %v until %v", inc.Status, inc.RetainUntil)
	}
	h.drain(t)

	sweep := func(at time.Time, dry bool) *ledger.SweepResult {
		t.Helper()
		h.set(at)
		res, err := h.l.Sweep(ctx, dry)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Day 89 of the read-only row, month 17 of the money-moved row: nothing
	// goes. The incident's sibling, due at the first sweep, is kept by the
	// open incident, and kept with its evidence object for the incident
	// period from then: it is not due at the next sweeps.
	for i, at := range []time.Time{ro.IssuedAt.AddDate(0, 0, 89), mm.IssuedAt.AddDate(0, 17, 0), ac.IssuedAt.AddDate(0, 11, 0)} {
		res := sweep(at, false)
		if len(res.Swept) != 0 {
			t.Fatalf("at %v swept %v", at, ids(res.Swept))
		}
		if why := ids(res.Kept)[sib.ID]; i == 0 && !strings.Contains(why, "open incident") {
			t.Fatalf("at %v the incident's sibling was not kept: %+v", at, res.Kept)
		}
	}
	h.drain(t)
	heldUntil := ro.IssuedAt.AddDate(0, 0, 89).AddDate(0, 12, 0)
	if got, err := h.l.Get(ctx, sib.ID); err != nil || got.RetainUntil.Before(heldUntil) {
		t.Fatalf("the sibling an open incident keeps: %v until %v, want until %v at least", err, got.RetainUntil, heldUntil)
	}
	if until := objectRetainUntil(t, h, bucket, ledger.EvidenceKey(sib.ID)); until.Before(heldUntil) {
		t.Fatalf("the sibling's evidence object is retained until %v, before %v", until, heldUntil)
	}

	time.Sleep(time.Until(real.Add(margin + time.Second))) // S3's own clock passes the retain-until
	day91 := ro.IssuedAt.AddDate(0, 0, 91)
	if !mm.IssuedAt.AddDate(0, 19, 0).After(day91) || !ac.IssuedAt.AddDate(0, 13, 0).After(day91) {
		t.Fatal("test clock arithmetic")
	}
	dry := sweep(day91, true)
	if got := ids(dry.Swept); len(got) != 3 || dry.ObjectsDeleted != 0 {
		t.Fatalf("dry run at day 91: %v", got)
	}
	if _, err := h.l.Get(ctx, ro.ID); err != nil {
		t.Fatalf("dry run removed a row: %v", err)
	}
	res := sweep(day91, false)
	got := ids(res.Swept)
	for _, r := range []*ledger.Row{ro, mm, ac} {
		if _, ok := got[r.ID]; !ok {
			t.Fatalf("%v row not swept at day 91: %v", r.Class, got)
		}
	}
	// The segment of the two rows that kept evidence goes. The sibling's
	// segment, which its bundle left for an object of its own when the
	// incident kept it, is queued too, and refused: S3 retains it for the
	// day it was put with (its row was past its date when uploaded).
	if res.ObjectsDeleted != 1 || res.ObjectsPending != 1 {
		t.Fatalf("objects deleted %d pending %d: %v", res.ObjectsDeleted, res.ObjectsPending, res.DeletionErrors)
	}
	for _, r := range []*ledger.Row{ro, mm, ac} {
		_, err := h.l.Get(ctx, r.ID)
		var ee *ledger.ExpiredError
		if !errors.As(err, &ee) || ee.Tombstone.Class != r.Class || !ee.Tombstone.RetainUntil.Equal(r.RetainUntil) {
			t.Fatalf("%v row after sweep: %v", r.Class, err)
		}
		if rows, _, _ := h.l.List(ctx, ledger.Query{Target: r.Targets()[0]}); len(rows) != 0 {
			t.Fatalf("index entries of %s left", r.ID)
		}
	}
	// Posting a swept receipt again does not bring it back.
	if _, _, err := h.l.AppendReceipt(ctx, in(roReceipt)); !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("re-posting a swept receipt: %v", err)
	}
	c := rawS3(t)
	var segs int
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "segments/", Recursive: true}) {
		if o.Err == nil {
			segs++
		}
	}
	if segs != 1 { // the sibling's segment, still retained
		t.Fatalf("%d segment objects left, want 1", segs)
	}
	// The incident row and its sibling stay while the incident is open.
	if _, err := h.l.Get(ctx, inc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.l.Get(ctx, sib.ID); err != nil {
		t.Fatal(err)
	}

	// Closing the incident after two years: kept until close + 12 months.
	closedAt := day91
	h.set(closedAt)
	if _, err := h.l.CloseIncident(ctx, inc.IncidentID, "resolved", "admin"); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	// Its sibling too (playbook step 5: the platform's other rows that
	// day, until the incident is closed plus 12 months).
	res = sweep(closedAt.AddDate(0, 11, 0), false)
	for _, r := range []*ledger.Row{inc, sib} {
		if _, ok := ids(res.Swept)[r.ID]; ok {
			t.Fatalf("%s row swept before close + 12 months", r.Status)
		}
	}
	// Both go then; S3 still retains their objects (the sibling's put with
	// the minimum retention, the incident's extended to close + 12 months
	// by S3's clock), so the deletions are refused and stay queued.
	res = sweep(closedAt.AddDate(0, 12, 1), false)
	for _, r := range []*ledger.Row{inc, sib} {
		if _, ok := ids(res.Swept)[r.ID]; !ok {
			t.Fatalf("%s row not swept after close + 12 months: %+v", r.Status, res)
		}
	}
	if res.ObjectsPending == 0 {
		t.Fatal("S3 accepted deleting an object before its retain-until")
	}
	if h.l.Policy().Periods[retention.Incident] != (retention.Period{Months: 12}) {
		t.Fatal("policy")
	}
}

// refusingDeletes is a real object store whose deletions are refused while
// refuse is set, as a store still retaining an object refuses them.
type refusingDeletes struct {
	ledger.ObjectStore
	refuse atomic.Bool
}

// LegalHold is the real store's: refusingDeletes changes deletions alone.
func (r *refusingDeletes) LegalHold(ctx context.Context, loc ledger.Location) (bool, error) {
	return r.ObjectStore.(ledger.LegalHoldReader).LegalHold(ctx, loc)
}

func (r *refusingDeletes) Delete(ctx context.Context, loc ledger.Location) error {
	if r.refuse.Load() {
		return errors.New("object still retained")
	}
	return r.ObjectStore.Delete(ctx, loc)
}

// TestSnapshotNamedAgainWhileItsDeletionIsQueued: the last row naming a
// JWKS snapshot is swept and the snapshot's deletion is queued (refused
// while the object is retained); a new row names the same snapshot and it
// is uploaded again into the same object of a directory store. The queued
// deletion must not remove what the new row needs.
func TestSnapshotNamedAgainWhileItsDeletionIsQueued(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := localdir.Open(filepath.Join(dir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	objects := &refusingDeletes{ObjectStore: local}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: dir, objects: objects}
	t.Cleanup(h.sc.Close)
	// Two years ago, so every retain-until involved has passed by the
	// directory store's clock (the wall clock) once the refusals stop.
	t0 := time.Now().UTC().AddDate(-2, 0, 0).Truncate(time.Second)
	h.set(t0)
	h.open(t)
	readOnly := func(target string, at time.Time) *ledger.Row {
		h.set(at)
		row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: target, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at})))
		return row
	}
	first := readOnly("R-1", t0)
	snaps := ledger.SnapshotsOf(first)
	if len(snaps) != 2 {
		t.Fatalf("row names snapshots %v, want the brand's and the agent's", snaps)
	}
	h.drain(t)

	objects.refuse.Store(true)
	h.set(t0.AddDate(0, 0, 91))
	res, err := h.l.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ids(res.Swept)[first.ID]; !ok || res.ObjectsPending != len(snaps) {
		t.Fatalf("first sweep: swept %v, %d deletions pending, want the row and its %d snapshots", ids(res.Swept), res.ObjectsPending, len(snaps))
	}

	second := readOnly("R-2", t0.AddDate(0, 0, 91))
	if got := ledger.SnapshotsOf(second); !slices.Equal(got, snaps) {
		t.Fatalf("the new row names %v, want the same snapshots %v", got, snaps)
	}
	h.drain(t)

	objects.refuse.Store(false)
	h.set(t0.AddDate(0, 0, 92))
	if res, err = h.l.Sweep(ctx, false); err != nil {
		t.Fatal(err)
	}
	if res.ObjectsDeleted != 0 || res.ObjectsPending != 0 || len(res.DeletionErrors) != 0 {
		t.Fatalf("second sweep: %d deleted, %d pending, %v; want the queued deletions dropped", res.ObjectsDeleted, res.ObjectsPending, res.DeletionErrors)
	}
	for _, id := range snaps {
		if _, err := local.Get(ctx, ledger.SnapshotKey(id)); err != nil {
			t.Errorf("snapshot %s named by a live row: %v", id[:8], err)
		}
		if _, loc, err := h.l.Snapshot(ctx, id); err != nil || !loc.Uploaded {
			t.Errorf("snapshot %s: %+v %v", id[:8], loc, err)
		}
	}
	rv, err := h.l.VerifyRow(ctx, second.ID)
	if err != nil || !rv.Same {
		t.Fatalf("the new row no longer verifies: %+v %v", rv, err)
	}
}

// sweptAndChecked integrates the log and checks it: no finding may name
// the rows of a ledger that swept rows and was posted to again.
func sweptAndChecked(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.l.Integrate(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := h.l.CheckIntegrity(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Findings) != 0 {
		t.Fatalf("the integrity check found: %+v", page.Findings)
	}
}

// sweepAfter checks the log, lets the outbox drain, sets h's clock to at
// and sweeps: row id must go.
func sweepAfter(t *testing.T, h *harness, at time.Time, id string) *ledger.SweepResult {
	t.Helper()
	sweptAndChecked(t, h)
	h.drain(t)
	h.set(at)
	res, err := h.l.Sweep(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if kept, ok := ids(res.Swept)[id]; !ok || kept != "" {
		t.Fatalf("row %s was not swept: %+v", id, res)
	}
	return res
}

// TestSweptRefusalIsNotRecordedAgain: a refusal posted again after its
// row was swept answers that the row expired, as a swept receipt does,
// and records nothing: its id keeps its tombstone and its one leaf in
// the log.
func TestSweptRefusalIsNotRecordedAgain(t *testing.T) {
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	h.set(t0)
	ref := ledger.RefusalInput{ClaimedPrincipal: "acct 1", ClaimedAgent: "agent", Tool: "issue_refund", Target: "O-1", Reason: "no receipt", ObservedAt: t0}
	first, err := h.l.AppendRefusal(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	sweepAfter(t, h, t0.AddDate(0, 13, 0), first.ID)
	again, err := h.l.AppendRefusal(ctx, ref)
	if !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("the swept refusal posted again: recorded %v, %v; want it answered as expired", again != nil, err)
	}
	if _, err := h.l.Get(ctx, first.ID); !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("the swept refusal's row after it was posted again: %v; want it expired", err)
	}
	sweptAndChecked(t, h)
}

// TestSweptDuplicateIsNotRecordedAgain: a duplicate row (the receipt again
// with a request JWT whose signature fails, refused class, twelve months)
// swept while the receipt's first row (money moved, eighteen months) is
// kept; its evidence posted again answers that the row expired and
// records nothing.
func TestSweptDuplicateIsNotRecordedAgain(t *testing.T) {
	h := newHarness(t)
	h.enableLog(t, 0)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	h.set(t0)
	r := h.sc.Mint(pacttest.Spec{Target: "A-1", At: t0})
	first, _ := h.append(t, in(r))
	bad := *r
	bad.RequestJWT = r.RequestJWT[:len(r.RequestJWT)-4] + "AAAA"
	dupIn := in(&bad)
	dup, o := h.append(t, dupIn)
	if first.Class != retention.MoneyMoved || o != ledger.DuplicateRecorded || dup.ID == first.ID || dup.Class != retention.Refused {
		t.Fatalf("first row %s in %v; then %v, row %s in %v: want a money-moved row and a refused duplicate of it", first.ID, first.Class, o, dup.ID, dup.Class)
	}
	res := sweepAfter(t, h, t0.AddDate(0, 13, 0), dup.ID)
	if _, ok := ids(res.Swept)[first.ID]; ok {
		t.Fatalf("the first row was swept with its duplicate: %+v", res)
	}
	again, o, err := h.l.AppendReceipt(ctx, dupIn)
	if !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("the swept duplicate posted again: %v, recorded %v, %v; want it answered as expired", o, again != nil, err)
	}
	sweptAndChecked(t, h)
}

// TestSweepWaitsForTheSnapshotsARowNames: a row past its retention whose
// JWKS snapshots still wait in the outbox is kept (its sweep would drop
// the snapshots, and their uploads could then never be done); once they
// are uploaded it is swept, and nothing reaches the dead letters.
func TestSweepWaitsForTheSnapshotsARowNames(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	h.set(t0)
	ro, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "R-1", At: t0, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	if ro.Class != retention.ReadOnly || len(ledger.SnapshotsOf(ro)) == 0 {
		t.Fatalf("row in %v naming snapshots %v; want a read-only row naming its key sets' snapshots", ro.Class, ledger.SnapshotsOf(ro))
	}
	h.set(t0.AddDate(0, 0, 91))
	res, err := h.l.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, swept := ids(res.Swept)[ro.ID]; swept || !strings.Contains(ids(res.Kept)[ro.ID], "JWKS snapshot") {
		t.Fatalf("the row whose snapshots wait in the outbox: swept %v, kept %v; want it kept for them", ids(res.Swept), ids(res.Kept))
	}
	h.drain(t)
	if res, err = h.l.Sweep(ctx, false); err != nil {
		t.Fatal(err)
	}
	if kept, ok := ids(res.Swept)[ro.ID]; !ok || kept != "" {
		t.Fatalf("the row once its snapshots were uploaded: %+v; want it swept", res)
	}
	for range 3 {
		if _, err := h.l.UploadRound(ctx, 512, 4); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := h.l.DeadLetterCount(ctx); err != nil || n != 0 {
		rep, _ := h.l.Outbox(ctx, 10, "")
		t.Fatalf("%d dead letters after the sweep (%v): %+v", n, err, rep.DeadLetters)
	}
}

// TestSnapshotDroppedUnderItsExtension runs the scenario of
// storetest.SnapshotDroppedUnderItsExtension on bbolt.
func TestSnapshotDroppedUnderItsExtension(t *testing.T) {
	storetest.SnapshotDroppedUnderItsExtension(t, func(t *testing.T, sc *pacttest.Scenario, objects ledger.ObjectStore) (*ledger.Ledger, ledger.Store, func(time.Time)) {
		h := &harness{sc: sc, dir: t.TempDir(), objects: objects}
		h.open(t)
		return h.l, h.store, h.set
	})
}

// failingRelease is an object store whose legal-hold releases of JWKS
// snapshots fail while fail is set.
type failingRelease struct {
	ledger.ObjectStore
	fail atomic.Bool
}

func (f *failingRelease) SetLegalHold(ctx context.Context, loc ledger.Location, on bool) error {
	if !on && f.fail.Load() && strings.HasPrefix(loc.Key, "jwks/") {
		return errors.New("slow down")
	}
	return f.ObjectStore.SetLegalHold(ctx, loc, on)
}

// TestReleaseOfASweptSnapshotIsNotDropped: an incident's snapshots are
// released when it closes; the releases fail for a while, and meanwhile
// the row is swept and its snapshots dropped, their objects still held.
// The release is not lost: the sweep releases a dropped object no
// incident holds before it deletes it, and the queued releases leave the
// outbox as moot, without dead letters.
func TestReleaseOfASweptSnapshotIsNotDropped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := localdir.Open(filepath.Join(dir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	objects := &failingRelease{ObjectStore: local}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: dir, objects: objects}
	t.Cleanup(h.sc.Close)
	t0 := time.Now().UTC().AddDate(-3, 0, 0).Truncate(time.Second)
	h.set(t0)
	h.open(t)
	inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "I-1", At: t0, ScopesUsed: []string{"plan:change"}})))
	if inc.Status != ledger.Incident {
		t.Fatalf("row %s, want an incident", inc.Status)
	}
	snaps := ledger.SnapshotsOf(inc)
	h.drain(t)
	closed := t0.AddDate(0, 0, 1)
	h.set(closed)
	closedInc, err := h.l.CloseIncident(ctx, inc.IncidentID, "resolved", "admin")
	if err != nil {
		t.Fatal(err)
	}
	objects.fail.Store(true)
	if _, err := h.l.UploadRound(ctx, 512, 4); err == nil {
		t.Fatal("the round whose snapshot releases fail: no error")
	}
	h.set(closedInc.RetainUntil.AddDate(0, 0, 2))
	if res, err := h.l.Sweep(ctx, false); err != nil || len(res.Swept) != 1 {
		t.Fatalf("sweep: %+v, %v; want the incident's row swept", res, err)
	}
	objects.fail.Store(false)
	if err := storetest.DrainOutbox(ctx, h.l); err != nil {
		t.Fatal(err)
	}
	if dead, err := h.l.DeadLetterCount(ctx); err != nil || dead != 0 {
		t.Errorf("%d dead letters, %v; want none", dead, err)
	}
	res, err := h.l.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.ObjectsPending != 0 {
		t.Errorf("the next sweep left %d deletions pending: %v", res.ObjectsPending, res.DeletionErrors)
	}
	for _, id := range snaps {
		if _, err := local.Get(ctx, ledger.SnapshotKey(id)); err == nil {
			t.Errorf("the dropped snapshot %s is still in write-once storage", id)
		}
	}
}

// TestIncidentHoldsTheRowsOfItsGrant: a row under a grant, just before
// midnight, is what makes the next receipt under it (just after, the next
// day) exceed countMax 1. While that incident is open, and until its close
// plus 12 months, the sweep keeps the counted row past its own retention,
// though it is of another day; then the row goes.
func TestIncidentHoldsTheRowsOfItsGrant(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	midnight := time.Date(2026, 10, 8, 0, 0, 0, 0, time.UTC)
	appendAt := func(at time.Time, target string) *ledger.Row {
		t.Helper()
		h.set(at.Add(time.Second))
		ri := in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_MIDNIGHT", Target: target, At: at}))
		ri.Limits = &ledger.Limits{CountMax: 1}
		row, _ := h.append(t, ri)
		return row
	}
	counted := appendAt(midnight.Add(-10*time.Second), "A-1")
	over := appendAt(midnight.Add(10*time.Second), "A-2")
	if counted.Status != ledger.Authorized || over.Status != ledger.Incident {
		t.Fatalf("statuses %v, %v; want AUTHORIZED, INCIDENT", counted.Status, over.Status)
	}
	h.drain(t)
	sweep := func(at time.Time) *ledger.SweepResult { t.Helper(); return h.sweepAt(t, at) }
	res := sweep(counted.RetainUntil.Add(time.Hour))
	if why, kept := ids(res.Kept)[counted.ID]; !kept || !strings.Contains(why, "grant") {
		t.Fatalf("the counted row while the incident is open: kept %v (%q); swept %v", kept, why, ids(res.Swept))
	}
	if _, err := h.l.CloseIncident(ctx, over.IncidentID, "resolved", "admin"); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	until := h.l.Policy().Periods[retention.Incident].After(h.clock())
	res = sweep(until.Add(-time.Hour))
	if _, swept := ids(res.Swept)[counted.ID]; swept {
		t.Fatal("the counted row was swept before the close plus 12 months")
	}
	if got, err := h.l.Get(ctx, counted.ID); err != nil || got.RetainUntil.Before(until) {
		t.Fatalf("the counted row before the close plus 12 months: %v, until %v; want kept until %v", err, got.RetainUntil, until)
	}
	res = sweep(until.Add(time.Hour))
	if _, swept := ids(res.Swept)[counted.ID]; !swept {
		t.Fatalf("the counted row after the close plus 12 months: not swept (kept %v)", ids(res.Kept))
	}
}

// closedIncidentHolding records an incident (a plan change its grant does
// not allow), a read-only row of its agent platform's day under another
// grant, and a read-only row of its grant on the next day; closes the
// incident on the day after, with the incident period at twelve months;
// and returns the two read-only rows and the close's time.
func closedIncidentHolding(t *testing.T, h *harness) (inc, day, grant *ledger.Row, closedAt time.Time) {
	t.Helper()
	ctx := context.Background()
	start := h.clock()
	inc, _ = h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_INC", Target: "I-1", ScopesUsed: []string{"plan:change"}, At: start})))
	h.set(start.Add(time.Minute))
	day, _ = h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_DAY", Target: "D-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: h.clock()})))
	h.set(start.AddDate(0, 0, 1))
	grant, _ = h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_INC", Target: "G-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: h.clock()})))
	if inc.Status != ledger.Incident || day.Class != retention.ReadOnly || grant.Class != retention.ReadOnly || !grant.ReceiptVerified() {
		t.Fatalf("rows %v, %v, %v; want an INCIDENT and two read-only rows", inc.Status, day.Class, grant.Class)
	}
	h.drain(t)
	closedAt = start.AddDate(0, 0, 2)
	h.set(closedAt)
	if _, err := h.l.CloseIncident(ctx, inc.IncidentID, "resolved", "admin"); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	return inc, day, grant, closedAt
}

// A closed incident holds its agent platform's rows of its day, and its
// grant's rows, until its close plus the incident period in force at the
// close: a restart with a shorter period ends the hold no sooner.
func TestAClosedIncidentHoldsForThePeriodInForceAtItsClose(t *testing.T) {
	h := newHarness(t)
	_, day, grant, closedAt := closedIncidentHolding(t, h)
	h.reopenWithIncidentPeriod(t, 6)
	end := closedAt.AddDate(0, 12, 0)
	res := h.sweepAt(t, closedAt.AddDate(0, 9, 0))
	for _, r := range []*ledger.Row{day, grant} {
		if why, kept := ids(res.Kept)[r.ID]; !kept || !strings.Contains(why, "closed incident") {
			t.Fatalf("row %s nine months after the close: kept %v (%q), swept %v; want kept until %v", r.ID, kept, why, ids(res.Swept), end)
		}
	}
	res = h.sweepAt(t, end.Add(time.Hour))
	for _, r := range []*ledger.Row{day, grant} {
		if _, swept := ids(res.Swept)[r.ID]; !swept {
			t.Fatalf("row %s after the close plus twelve months: not swept (kept %v)", r.ID, ids(res.Kept))
		}
	}
}

// An incident closed before its record kept the hold's end, day and
// grant holds until the retain-until its close gave its row (never
// earlier than the close plus the period then), not the period in force
// now, and takes the day and grant from its row.
func TestAnIncidentClosedBeforeItsHoldWasRecordedHoldsUntilItsRetainUntil(t *testing.T) {
	h := newHarness(t)
	inc, day, grant, closedAt := closedIncidentHolding(t, h)
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	err := tamper.Apply(filepath.Join(h.dir, "ledger.db"), tamper.EditIncident(inc.IncidentID, func(rec *ledger.IncidentRecord) {
		rec.Day, rec.GrantSHA256, rec.HoldsUntil = "", "", time.Time{}
	}))
	if err != nil {
		t.Fatal(err)
	}
	h.policy = retention.DefaultPolicy()
	h.policy.Periods[retention.Incident] = retention.Period{Months: 6}
	h.open(t)
	res := h.sweepAt(t, closedAt.AddDate(0, 9, 0))
	for _, r := range []*ledger.Row{day, grant} {
		if why, kept := ids(res.Kept)[r.ID]; !kept || !strings.Contains(why, "closed incident") {
			t.Fatalf("row %s nine months after the close: kept %v (%q), swept %v", r.ID, kept, why, ids(res.Swept))
		}
	}
}

// A closed incident's hold does not rest on its own row: with the row
// gone (removed by whoever holds the row store), the rows it holds stay
// until its close plus the incident period.
func TestAClosedIncidentHoldsWithoutItsOwnRow(t *testing.T) {
	h := newHarness(t)
	inc, day, grant, closedAt := closedIncidentHolding(t, h)
	h.sweepEarly(t, inc.ID)
	res := h.sweepAt(t, closedAt.AddDate(0, 9, 0))
	for _, r := range []*ledger.Row{day, grant} {
		if why, kept := ids(res.Kept)[r.ID]; !kept || !strings.Contains(why, "closed incident") {
			t.Fatalf("row %s nine months after the close, the incident's row gone: kept %v (%q), swept %v", r.ID, kept, why, ids(res.Swept))
		}
	}
}

// objectRetainUntil returns the retain-until S3 holds for the version of
// the object at key's recorded location.
func objectRetainUntil(t *testing.T, h *harness, bucket, key string) time.Time {
	t.Helper()
	var loc ledger.Location
	if err := h.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		loc, err = tx.Object(key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st, err := rawS3(t).StatObject(context.Background(), bucket, loc.Key, minio.StatObjectOptions{VersionID: loc.VersionID})
	if err != nil {
		t.Fatal(err)
	}
	until, err := time.Parse(time.RFC3339, st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
	if err != nil {
		t.Fatalf("retention of %s (%s): %v", loc.Key, loc.VersionID, err)
	}
	return until
}

// A row under dispute is what the dispute is about: opening one a month
// before the row's retention ends keeps it, and its evidence, the incident
// period past the dispute; one still open then keeps it on, and the
// resolution keeps it the incident period past the resolution.
func TestADisputedRowIsKeptWhileItsDisputeIsOpen(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5531"})))
	if row.Class != retention.MoneyMoved {
		t.Fatalf("class %v, want money moved", row.Class)
	}
	h.drain(t)
	period := h.l.Policy().Periods[retention.Incident]
	sweep := func(at time.Time) *ledger.SweepResult { t.Helper(); return h.sweepAt(t, at) }
	evidenceUntil := func() time.Time {
		t.Helper()
		h.drain(t)
		var loc ledger.Location
		if err := h.store.View(ctx, func(tx ledger.Tx) error {
			var err error
			loc, err = tx.Object(ledger.EvidenceKey(row.ID))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return loc.RetainUntil
	}

	opened := row.RetainUntil.Add(-30 * 24 * time.Hour)
	h.set(opened)
	if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, "chargeback", "support-key"); err != nil {
		t.Fatal(err)
	}
	want := period.After(opened)
	if got, err := h.l.Get(ctx, row.ID); err != nil || !got.RetainUntil.Equal(want) {
		t.Fatalf("after the dispute opened: %v, retained until %v; want %v", err, got.RetainUntil, want)
	}
	if got := evidenceUntil(); got.Before(want) {
		t.Fatalf("its evidence is retained until %v, want %v", got, want)
	}
	res := sweep(row.RetainUntil.Add(time.Hour))
	if _, swept := ids(res.Swept)[row.ID]; swept {
		t.Fatal("the row under an open dispute was swept at its class's end")
	}

	// Still open the incident period later: kept on.
	stillOpen := want.Add(time.Hour)
	res = sweep(stillOpen)
	if why, kept := ids(res.Kept)[row.ID]; !kept || why != "its dispute is open" {
		t.Fatalf("the row whose dispute is still open: kept %v (%q), swept %v", kept, why, ids(res.Swept))
	}
	if got := res.Kept[0].RetainUntil; !got.Equal(period.After(stillOpen)) {
		t.Fatalf("the sweep lists the kept row until %v, want the hold's end %v", got, period.After(stillOpen))
	}
	if got := evidenceUntil(); got.Before(period.After(stillOpen)) {
		t.Fatalf("its evidence is retained until %v, want %v", got, period.After(stillOpen))
	}

	resolved := stillOpen.Add(24 * time.Hour)
	h.set(resolved)
	if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeResolvedCustomerAuthorized, "the grant covers it", "support-key"); err != nil {
		t.Fatal(err)
	}
	end := period.After(resolved)
	if res = sweep(end.Add(-time.Hour)); len(res.Swept) != 0 {
		t.Fatalf("swept %v before the resolution plus the incident period", ids(res.Swept))
	}
	res = sweep(end.Add(time.Hour))
	if _, swept := ids(res.Swept)[row.ID]; !swept {
		t.Fatalf("the resolved row after the resolution plus the incident period: not swept (kept %v)", ids(res.Kept))
	}
}

// A Brand-signed receipt recorded UNAUTHORIZED (here posted with another
// grant's delegation token, as a writer could post it before the
// pipeline's) records an action that ran: its row is kept as long as its
// actions imply, not the refused class's twelve months.
func TestAnUnauthorizedRowOfASignedReceiptIsKeptAsLongAsItsActions(t *testing.T) {
	h := newHarness(t)
	mine := h.sc.Mint(pacttest.Spec{Target: "A-5531"})
	other := h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_OTHER", User: "acct-7", Target: "W-1"})
	early := *mine
	early.DelegationToken = other.DelegationToken
	row, _ := h.append(t, in(&early))
	if row.Status != ledger.Unauthorized || !row.ReceiptVerified() {
		t.Fatalf("status %v, receipt verified %v; want UNAUTHORIZED with its receipt's signature passed", row.Status, row.ReceiptVerified())
	}
	want := h.l.Policy().RetainUntil(retention.MoneyMoved, row.RetentionStart())
	if row.Class != retention.MoneyMoved || !row.RetainUntil.Equal(want) {
		t.Fatalf("class %v, retained until %v; want money moved, until %v", row.Class, row.RetainUntil, want)
	}
	// A forged receipt's claims do not lengthen anything: refused.
	forged := h.sc.Mint(pacttest.Spec{Target: "A-5532"})
	forged.ReceiptJWS = pacttest.TamperSignature(forged.ReceiptJWS)
	if f, _ := h.append(t, in(forged)); f.Status != ledger.Unauthorized || f.Class != retention.Refused {
		t.Fatalf("the forged receipt: %v, class %v; want UNAUTHORIZED, refused", f.Status, f.Class)
	}
}

// A Brand-signed receipt posted first with the request JWT and delegation
// token of another row (another receipt, recorded earlier) is recorded
// UNAUTHORIZED, its duplicate check naming that other row. It records an
// action that ran all the same: it keeps its actions' class, and a sweep
// past the refused class's twelve months leaves it.
func TestASignedReceiptWithAnotherRowsRequestJWTKeepsItsClass(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	other := h.sc.Mint(pacttest.Spec{Target: "W-1", GrantID: "a2agrant_OTHER", User: "acct-7", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})
	first, _ := h.append(t, in(other))
	mine := h.sc.Mint(pacttest.Spec{Target: "A-5531"})
	early := *mine
	early.RequestJWT = other.RequestJWT
	early.DelegationToken = other.DelegationToken
	row, _ := h.append(t, in(&early))
	if row.Status != ledger.Unauthorized || !row.ReceiptVerified() || row.Verifier.DuplicateOf != first.ID {
		t.Fatalf("status %v, receipt verified %v, duplicate of %q; want UNAUTHORIZED with its receipt's signature passed, duplicate of %s",
			row.Status, row.ReceiptVerified(), row.Verifier.DuplicateOf, first.ID)
	}
	want := h.l.Policy().RetainUntil(retention.MoneyMoved, row.RetentionStart())
	if row.Class != retention.MoneyMoved || !row.RetainUntil.Equal(want) {
		t.Fatalf("class %v, retained until %v; want money moved, until %v", row.Class, row.RetainUntil, want)
	}
	h.drain(t)
	h.sweepAt(t, h.clock().AddDate(0, 13, 0))
	if _, err := h.l.Get(ctx, row.ID); err != nil {
		t.Fatalf("the receipt's row at thirteen months: %v; want it kept until %v", err, want)
	}
}

// pagesRead counts the pages of due rows sweeps read (Rows.Expired).
type pagesRead struct {
	ledger.Store
	n *atomic.Int64
}

func (s pagesRead) View(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.View(ctx, func(tx ledger.Tx) error { return fn(expiredCounted{tx, s.n}) })
}

type expiredCounted struct {
	ledger.Tx
	n *atomic.Int64
}

func (t expiredCounted) Expired(now time.Time, after string, n int) ([]*ledger.Row, string, error) {
	t.n.Add(1)
	return t.Tx.Expired(now, after, n)
}

// A dry run is its listing: once the listing is full it stops reading,
// where a preview far ahead would otherwise read every row of the ledger.
// A sweep reads on: it removes every row due.
func TestADryRunStopsReadingOnceItsListingIsFull(t *testing.T) {
	ctx := context.Background()
	pages := &atomic.Int64{}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), logs: &syncbuf.Buffer{},
		wrap: func(s ledger.Store) ledger.Store { return pagesRead{s, pages} }}
	t.Cleanup(h.sc.Close)
	h.set(time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC))
	h.open(t)
	defer ledger.SetSweepPaging(2, 2)()
	for i := range 7 {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("D-%d", i), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}})))
	}
	h.drain(t)
	later := h.clock().AddDate(1, 0, 0)
	pages.Store(0)
	res, err := h.l.SweepPreview(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if n := pages.Load(); !res.TruncatedReport || len(res.Swept) != 2 || n != 2 {
		t.Fatalf("a preview listing 2 of 7 due rows: truncated %v, %d listed, %d pages read; want truncated, 2, 2 pages", res.TruncatedReport, len(res.Swept), n)
	}
	h.set(later)
	pages.Store(0)
	if res, err = h.l.Sweep(ctx, false); err != nil || !res.TruncatedReport {
		t.Fatalf("the sweep: %v, listing truncated %v; want 7 rows swept, 2 of them listed", err, res.TruncatedReport)
	}
	if n := pages.Load(); n < 4 {
		t.Fatalf("a sweep of 7 due rows read %d pages of 2, want 4", n)
	}
	if got, _, err := h.l.List(ctx, ledger.Query{PageSize: 10}); err != nil || len(got) != 0 {
		t.Fatalf("after the sweep: %d rows held (%v), want none", len(got), err)
	}
}

// A row's dispute is open as its dispute events say, which the log holds:
// the status kept beside them edited to resolved in the row store does
// not let the sweep take the row while its dispute is open.
func TestAnOpenDisputeKeepsItsRowWhateverItsStoredStatusSays(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5531"})))
	h.drain(t)
	h.set(row.RetainUntil.Add(-30 * 24 * time.Hour))
	if _, err := h.l.AppendDispute(ctx, row.ID, ledger.DisputeOpen, "chargeback", "support-key"); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	err := tamper.Apply(filepath.Join(h.dir, "ledger.db"), tamper.EditRow(row.ID, func(r *ledger.Row) {
		r.Dispute = ledger.DisputeResolvedCustomerAuthorized
	}))
	if err != nil {
		t.Fatal(err)
	}
	h.open(t)
	period := h.l.Policy().Periods[retention.Incident]
	res := h.sweepAt(t, period.After(row.RetainUntil).Add(time.Hour))
	if why, kept := ids(res.Kept)[row.ID]; !kept || why != "its dispute is open" {
		t.Fatalf("the row whose dispute events say open, its stored status resolved: kept %v (%q), swept %v", kept, why, ids(res.Swept))
	}
}

// A longer incident period set after the close holds the day's and the
// grant's rows to the close plus it: the hold recorded at the close is
// never the sooner end.
func TestALongerIncidentPeriodSetSinceTheCloseHoldsLonger(t *testing.T) {
	h := newHarness(t)
	_, day, grant, closedAt := closedIncidentHolding(t, h)
	h.reopenWithIncidentPeriod(t, 24)
	res := h.sweepAt(t, closedAt.AddDate(0, 15, 0))
	for _, r := range []*ledger.Row{day, grant} {
		if why, kept := ids(res.Kept)[r.ID]; !kept || !strings.Contains(why, "closed incident") {
			t.Fatalf("row %s fifteen months after the close, the period now 24 months: kept %v (%q), swept %v", r.ID, kept, why, ids(res.Swept))
		}
	}
}

// reopenWithIncidentPeriod closes h's ledger and opens it again with the
// default policy but an incident period of months, as a ledgerd
// restarted with another configuration.
func (h *harness) reopenWithIncidentPeriod(t *testing.T, months int) {
	t.Helper()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	h.policy = retention.DefaultPolicy()
	h.policy.Periods[retention.Incident] = retention.Period{Months: months}
	h.open(t)
}
