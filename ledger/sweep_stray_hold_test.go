package ledger_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/localdir"
)

// Nothing in the row store holds an object queued for deletion, but a
// legal hold can land on it late: an uploader's call whose claim on the
// operation ran out while it was on the way, after another uploader had
// applied the hold and its release. The sweep's deletion is refused for
// it; the sweep then releases the hold no incident records and deletes the
// object, saying so, instead of keeping it past its retention for ever.
func TestTheSweepReleasesALegalHoldNoIncidentRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	local, err := localdir.Open(filepath.Join(dir, "evidence"))
	if err != nil {
		t.Fatal(err)
	}
	objects := &refusingDeletes{ObjectStore: local}
	logs := &syncbuf.Buffer{}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: dir, objects: objects, logs: logs}
	t.Cleanup(h.sc.Close)
	// Two years ago, so every retain-until involved has passed by the
	// directory store's clock (the wall clock).
	t0 := time.Now().UTC().AddDate(-2, 0, 0).Truncate(time.Second)
	h.set(t0)
	h.open(t)
	for _, target := range []string{"R-1", "R-2"} {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: target, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: t0})))
	}
	h.drain(t)

	// The first sweep removes the rows; their objects' deletions are
	// refused, and stay queued.
	objects.refuse.Store(true)
	h.set(t0.AddDate(0, 0, 91))
	res, err := h.l.Sweep(ctx, false)
	if err != nil || len(res.Swept) != 2 || res.ObjectsPending == 0 {
		t.Fatalf("first sweep: %d swept, %d deletions pending, %v; want both rows and their objects' deletions pending", len(res.Swept), res.ObjectsPending, err)
	}
	var queued []ledger.Location
	if err := h.store.View(ctx, func(tx ledger.Tx) (err error) {
		queued, err = tx.Deletions(100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The late call: a hold on each queued object.
	for _, loc := range queued {
		if err := local.SetLegalHold(ctx, loc, true); err != nil {
			t.Fatal(err)
		}
	}
	objects.refuse.Store(false)
	h.set(t0.AddDate(0, 0, 92))
	if res, err = h.l.Sweep(ctx, false); err != nil || res.ObjectsDeleted != len(queued) || res.ObjectsPending != 0 {
		t.Fatalf("second sweep: %d deleted, %d pending, %v, %v; want the %d objects under a hold no incident records deleted", res.ObjectsDeleted, res.ObjectsPending, res.DeletionErrors, err, len(queued))
	}
	for _, loc := range queued {
		if _, err := local.Get(ctx, loc.Key); !errors.Is(err, ledger.ErrNotFound) && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after the sweep: %v, want it gone", loc.Key, err)
		}
	}
	if n := strings.Count(logs.String(), "under a legal hold no incident records"); n != len(queued) {
		t.Errorf("%d warnings of a stray hold, want %d:\n%s", n, len(queued), logs.String())
	}
}
