package ledger_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
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
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
	s3store "github.com/pactledger/pactledger/storage/s3"
)

// location returns where the row store records the object of key.
func location(t *testing.T, h *harness, key string) ledger.Location {
	t.Helper()
	var loc ledger.Location
	if err := h.store.View(context.Background(), func(tx ledger.Tx) (err error) {
		loc, err = tx.Object(key)
		return err
	}); err != nil {
		t.Fatalf("location of %s: %v", key, err)
	}
	return loc
}

// queuedDeletions returns the objects queued for deletion.
func queuedDeletions(t *testing.T, h *harness) []ledger.Location {
	t.Helper()
	var q []ledger.Location
	if err := h.store.View(context.Background(), func(tx ledger.Tx) (err error) {
		q, err = tx.Deletions(10000)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return q
}

// s3RetainUntil returns the retain-until S3 holds for version of key.
func s3RetainUntil(t *testing.T, bucket, key, version string) time.Time {
	t.Helper()
	st, err := rawS3(t).StatObject(context.Background(), bucket, key, minio.StatObjectOptions{VersionID: version})
	if err != nil {
		t.Fatal(err)
	}
	until, err := time.Parse(time.RFC3339, st.Metadata.Get("X-Amz-Object-Lock-Retain-Until-Date"))
	if err != nil {
		t.Fatalf("retention of %s (%s): %v", key, version, err)
	}
	return until
}

// segmentSharers records, in one upload round, an open incident, another
// customer's row of another day and grant, and a forged receipt claiming
// the incident's agent platform and day under a grant of its own, the
// last two due the same day: they share one segment.
func segmentSharers(t *testing.T, h *harness, start time.Time) (victim, forged *ledger.Row) {
	t.Helper()
	if _, err := h.l.RevokeGrant(context.Background(), "a2agrant_G", time.Unix(0, 0), "", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	if inc, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_G", Target: "G-1", At: start.Add(-time.Minute)}))); inc.Status != ledger.Incident {
		t.Fatalf("the incident's row: %v", inc.Status)
	}
	victim, _ = h.append(t, in(h.sc.Mint(pacttest.Spec{User: "acct-9001", GrantID: "a2agrant_V", Tool: "change_address", Target: "ADDR-9",
		Granted: "account:address", ScopesUsed: []string{"account:address"}, At: start.Add(-48 * time.Hour)})))
	f := h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_F", User: "acct-x", Target: "X-1", At: start.Add(-time.Minute)})
	f.ReceiptJWS = pacttest.TamperSignature(f.ReceiptJWS)
	forged, _ = h.append(t, in(f))
	if forged.ReceiptVerified() {
		t.Fatal("the forged receipt verified")
	}
	h.drain(t)
	if v, f := location(t, h, ledger.EvidenceKey(victim.ID)), location(t, h, ledger.EvidenceKey(forged.ID)); v.Key != f.Key || v.Length == 0 {
		t.Fatalf("the two rows due the same day are in %s and %s, want one segment", v.Key, f.Key)
	}
	return victim, forged
}

// A row a hold keeps past its date (here a forged receipt claiming the
// agent platform and day of an open incident) shares a segment with
// another customer's row due the same day. The sweep removes the
// customer's row and keeps the held one: the held row's bundle is copied
// into an object of its own, retained to the hold's end, and the segment
// is neither extended nor kept for it: its deletion is queued once the
// copy is recorded, and it goes at its own date with the customer's
// bundle.
func TestAHeldRowLeavesTheSegmentItSharedWithOthers(t *testing.T) {
	for _, name := range []string{"s3", "localdir"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var (
				objects ledger.ObjectStore
				bucket  = s3test.Bucket()
				dir     = filepath.Join(t.TempDir(), "evidence")
			)
			// S3 refuses a retain-until in the past: there the rows are
			// dated now, and the test reads the retentions S3 holds. The
			// directory store deletes by the machine's clock: there the
			// rows are dated two years back, so that the segment's
			// retention has passed when a sweep deletes it.
			start := time.Now().UTC().Truncate(time.Second)
			var err error
			if name == "s3" {
				objects, err = s3store.Open(ctx, s3store.Config{Endpoint: s3srv.Endpoint, Bucket: bucket, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey, Insecure: true, CreateBucket: true})
			} else {
				start = start.AddDate(-2, 0, 0)
				objects, err = localdir.Open(dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects, logs: &syncbuf.Buffer{}}
			t.Cleanup(h.sc.Close)
			h.set(start)
			h.open(t)
			victim, forged := segmentSharers(t, h, start)
			seg := location(t, h, ledger.EvidenceKey(victim.ID))
			victimBundle, err := h.l.WriteOnceCopy(ctx, ledger.EvidenceKey(victim.ID))
			if err != nil {
				t.Fatal(err)
			}

			res := h.sweepAt(t, victim.RetainUntil.Add(time.Hour))
			if _, swept := ids(res.Swept)[victim.ID]; !swept {
				t.Fatalf("the customer's row was not swept at its date (kept: %v)", ids(res.Kept))
			}
			var held time.Time
			for _, k := range res.Kept {
				if k.RowID == forged.ID && strings.Contains(k.Kept, "agent platform") {
					held = k.RetainUntil
				}
			}
			if held.IsZero() {
				t.Fatalf("the forged row claiming the incident's day was not kept: %v", ids(res.Kept))
			}
			h.drain(t)

			own := location(t, h, ledger.EvidenceKey(forged.ID))
			if own.Key != ledger.EvidenceKey(forged.ID) || own.Length != 0 || own.RetainUntil.Before(held) {
				t.Fatalf("the held row's evidence is recorded at %s (offset %d, length %d), retained until %s; want an object of its own retained until %s, not the segment %s it shared with the swept row (due %s)",
					own.Key, own.Offset, own.Length, own.RetainUntil.Format(time.RFC3339), held.Format(time.RFC3339), seg.Key, seg.RetainUntil.Format(time.RFC3339))
			}
			copied, err := h.l.WriteOnceCopy(ctx, ledger.EvidenceKey(forged.ID))
			if sum := sha256.Sum256(copied); err != nil || hex.EncodeToString(sum[:]) != forged.EvidenceSHA256 {
				t.Fatalf("the held row's own copy: %v, SHA-256 %x; want its bundle, %s", err, sum, forged.EvidenceSHA256)
			}
			if got := queuedDeletions(t, h); !slices.ContainsFunc(got, func(l ledger.Location) bool { return l.Key == seg.Key && l.Length == 0 }) {
				t.Fatalf("deletions queued: %v; want the segment %s, whose members are both gone", got, seg.Key)
			}

			if name == "s3" {
				if got := s3RetainUntil(t, bucket, seg.Key, seg.VersionID); !got.Equal(seg.RetainUntil) {
					t.Fatalf("S3 retains the segment until %s, want its own date %s", got.Format(time.RFC3339), seg.RetainUntil.Format(time.RFC3339))
				}
				if got := s3RetainUntil(t, bucket, own.Key, own.VersionID); got.Before(held) {
					t.Fatalf("S3 retains the held row's copy until %s, want %s", got.Format(time.RFC3339), held.Format(time.RFC3339))
				}
				return
			}
			// Past the segment's date the next sweep deletes it: no object
			// holds the customer's bundle any more, the held row's copy
			// stays.
			res = h.sweepAt(t, seg.RetainUntil.Add(time.Hour))
			if res.ObjectsDeleted == 0 || res.ObjectsPending != 0 {
				t.Fatalf("objects deleted %d, pending %d: %v", res.ObjectsDeleted, res.ObjectsPending, res.DeletionErrors)
			}
			for _, key := range listDir(t, dir) {
				b, err := objects.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(b, victimBundle) {
					t.Fatalf("%s still holds the swept row's bundle", key)
				}
			}
			if _, err := h.l.WriteOnceCopy(ctx, ledger.EvidenceKey(forged.ID)); err != nil {
				t.Fatalf("the held row's copy after the segment went: %v", err)
			}
		})
	}
}

// listDir returns the object keys a directory store holds.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var keys []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(d.Name(), ".lock") || strings.HasSuffix(d.Name(), ".tmp") {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// The copy of a held row's bundle out of its segment reached the
// evidence store but its recording was lost (the answer failed, then the
// process restarted): the extension is still queued, the next round puts
// the same bytes again and finds them, and the row store records the copy
// once, with the segment counted out once.
func TestACopyOutOfASegmentWhoseRecordingWasLostIsDoneOnce(t *testing.T) {
	for name, open := range evidenceStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			real, list := open(t)
			var armed atomic.Bool // fails the next put of a row's own object, once
			faulty := &faultyStore{ObjectStore: real, fail: func(op, key string) (bool, bool) {
				return op == "put" && strings.HasPrefix(key, "rows/") && armed.CompareAndSwap(true, false), true
			}}
			h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: faulty, logs: &syncbuf.Buffer{}}
			t.Cleanup(h.sc.Close)
			start := time.Now().UTC().Truncate(time.Second)
			h.set(start)
			h.open(t)
			victim, forged := segmentSharers(t, h, start)
			seg := location(t, h, ledger.EvidenceKey(victim.ID))
			h.sweepAt(t, victim.RetainUntil.Add(time.Hour))
			armed.Store(true)
			if _, err := h.l.UploadRound(ctx, 512, 4); !errors.Is(err, errInjected) {
				t.Fatalf("the round whose copy's answer was lost: %v", err)
			}
			if !slices.Contains(list(), ledger.EvidenceKey(forged.ID)) {
				t.Fatalf("the copy is not in the store: %v", list())
			}
			if got := location(t, h, ledger.EvidenceKey(forged.ID)); got.Key != seg.Key {
				t.Fatalf("recorded at %s before the round that records the copy", got.Key)
			}

			// Restart: reopen the row store from its file.
			if err := h.store.Close(); err != nil {
				t.Fatal(err)
			}
			h.objects = real
			h.open(t)
			h.drain(t)
			own := location(t, h, ledger.EvidenceKey(forged.ID))
			if own.Key != ledger.EvidenceKey(forged.ID) || own.Length != 0 {
				t.Fatalf("the held row's evidence after the restart: %+v", own)
			}
			var copies int
			for _, k := range list() {
				if k == own.Key {
					copies++
				}
			}
			var members int
			if err := h.store.View(ctx, func(tx ledger.Tx) (err error) {
				members, err = tx.Count(ledger.RefSegment, seg.Key, 0)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var queued int
			for _, l := range queuedDeletions(t, h) {
				if l.Key == seg.Key {
					queued++
				}
			}
			if copies != 1 || members != 0 || queued != 1 {
				t.Fatalf("%d copies of the held row's bundle in the store, %d members counted in the segment, its deletion queued %d times; want 1, 0, 1", copies, members, queued)
			}
		})
	}
}

// A forged receipt's grant, agent platform and day are the writer's
// claims. An incident holds the rows under its grant because a countMax
// check counted them, and none counts a forged row: one naming the
// incident's grant on another day goes at its date, while the incident
// holds the row it counted, of the day before. One claiming the incident's agent
// platform and day is kept, as the incident's review lists it
// (TestAHeldRowLeavesTheSegmentItSharedWithOthers).
func TestAForgedRowIsNotHeldByTheGrantItClaims(t *testing.T) {
	h := newHarness(t)
	day := time.Date(2026, 10, 7, 10, 0, 0, 0, time.UTC)
	appendAt := func(at time.Time, target string) *ledger.Row {
		t.Helper()
		ri := in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_COUNTED", Target: target, At: at}))
		ri.Limits = &ledger.Limits{CountMax: 1}
		row, _ := h.append(t, ri)
		return row
	}
	counted := appendAt(day.AddDate(0, 0, -1), "A-1")
	over := appendAt(day.Add(time.Minute), "A-2")
	if counted.Status != ledger.Authorized || over.Status != ledger.Incident {
		t.Fatalf("statuses %v, %v; want AUTHORIZED, INCIDENT", counted.Status, over.Status)
	}
	f := h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_COUNTED", Target: "A-3", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: day.AddDate(0, 0, -2)})
	f.ReceiptJWS = pacttest.TamperSignature(f.ReceiptJWS)
	forged, _ := h.append(t, in(f))
	if forged.ReceiptVerified() || forged.GrantID != "a2agrant_COUNTED" {
		t.Fatalf("the forged row: verified %v, grant %q", forged.ReceiptVerified(), forged.GrantID)
	}
	h.drain(t)
	res := h.sweepAt(t, forged.RetainUntil.Add(time.Hour))
	if why, kept := ids(res.Kept)[forged.ID]; kept {
		t.Fatalf("the forged row naming the incident's grant was kept: %q", why)
	}
	if _, swept := ids(res.Swept)[forged.ID]; !swept {
		t.Fatalf("the forged row was not swept at its date: swept %v", ids(res.Swept))
	}
	res = h.sweepAt(t, counted.RetainUntil.Add(time.Hour))
	if why := ids(res.Kept)[counted.ID]; !strings.Contains(why, "grant") {
		t.Fatalf("the counted row: kept for %q (swept %v), want the rows of its grant", why, ids(res.Swept))
	}
}
