package ledger_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
)

// A held row's bundle is copied out of its segment as the hold ends, and
// the row is swept while the copy is put: the copy's record is not made
// (the row is gone), so its deletion is queued, and no object keeps the
// bundle past the hold.
func TestACopyOutWhoseRowWasSweptMeanwhileIsDeleted(t *testing.T) {
	ctx := context.Background()
	real, list := evidenceStores(t)["localdir"](t)
	var h *harness
	var later time.Time
	var forgedKey string
	var swept bool
	faulty := &faultyStore{ObjectStore: real, fail: func(op, key string) (bool, bool) {
		if op == "put" && key == forgedKey && !swept {
			swept = true
			// The hold has ended: a sweep runs while the put is answered.
			res := h.sweepAt(t, later)
			if len(res.Swept) == 0 {
				t.Errorf("the sweep during the copy-out swept nothing: kept %v", ids(res.Kept))
			}
		}
		return false, false
	}}
	h = &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: faulty, logs: &syncbuf.Buffer{}}
	t.Cleanup(h.sc.Close)
	start := time.Now().UTC().Truncate(time.Second)
	h.set(start)
	h.open(t)
	victim, forged := segmentSharers(t, h, start)
	forgedKey = ledger.EvidenceKey(forged.ID)
	incs, _, err := h.l.Incidents(ctx, 10, "")
	if err != nil || len(incs) != 1 {
		t.Fatal(incs, err)
	}
	h.set(victim.RetainUntil.Add(-time.Hour))
	if _, err := h.l.CloseIncident(ctx, incs[0].ID, "closed", "ops"); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	h.sweepAt(t, victim.RetainUntil.Add(time.Hour))
	r, err := h.l.Get(ctx, forged.ID)
	if err != nil {
		t.Fatal(err)
	}
	later = r.RetainUntil.Add(48 * time.Hour)
	for range 5 {
		if _, err := h.l.UploadRound(ctx, 512, 4); err != nil && !errors.Is(err, errInjected) {
			t.Fatal(err)
		}
	}
	if _, err := h.l.Get(ctx, forged.ID); !errors.Is(err, ledger.ErrExpired) {
		t.Fatalf("forged row not swept: %v", err)
	}
	if !swept {
		t.Fatal("no copy of the held row's bundle was put")
	}
	// The local directory keeps its objects by the wall clock, not the
	// ledger's, so the deletion is seen queued, not done.
	if !slices.ContainsFunc(list(), func(k string) bool { return strings.HasSuffix(k, forgedKey) }) {
		t.Fatalf("the copy %s is not in write-once storage", forgedKey)
	}
	if !slices.ContainsFunc(queuedDeletions(t, h), func(l ledger.Location) bool { return l.Key == forgedKey && l.Length == 0 }) {
		t.Errorf("the copy %s of the swept row's bundle has no record and no deletion queued: it would stay in write-once storage for good", forgedKey)
	}
}
