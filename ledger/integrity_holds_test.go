package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A hold or release can land late, after another replica applied the
// operation and the next: fsck compares the holds the ledger recorded
// with the object store's. An object an open incident holds, held in the
// store, is no finding; the same object released in the store is one,
// naming the incident and the key; an object queued for deletion, held in
// the store, is one too.
func TestFsckComparesLegalHoldsWithTheStore(t *testing.T) {
	for _, name := range []string{"s3", "localdir"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			objects, _ := evidenceStores(t)[name](t)
			h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects}
			t.Cleanup(h.sc.Close)
			h.set(time.Now().UTC().Truncate(time.Second))
			h.open(t)
			if _, err := h.l.RevokeGrant(ctx, "a2agrant_G", time.Unix(0, 0), "", "writer-key", false); err != nil {
				t.Fatal(err)
			}
			if row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_G", Target: "G-1", At: h.now.Add(-time.Minute)}))); row.Status != ledger.Incident {
				t.Fatalf("the row: %v, want an incident", row.Status)
			}
			h.drain(t)
			holds := func() []string {
				t.Helper()
				page, err := h.l.CheckIntegrity(ctx, 100, "")
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, f := range page.Findings {
					if strings.Contains(f.Problem, "legal hold") {
						out = append(out, f.Problem)
					}
				}
				return out
			}
			if got := holds(); len(got) != 0 {
				t.Fatalf("an honest ledger's holds: %q", got)
			}
			incs, _, err := h.l.Incidents(ctx, 10, "")
			if err != nil || len(incs) != 1 || len(incs[0].Held) == 0 {
				t.Fatalf("incidents: %+v, %v", incs, err)
			}
			key := incs[0].Held[0]
			if err := objects.SetLegalHold(ctx, location(t, h, key), false); err != nil {
				t.Fatal(err)
			}
			got := holds()
			if len(got) != 1 || !strings.Contains(got[0], "open incident "+incs[0].ID+" holds "+key) || !strings.Contains(got[0], "holds it without one") {
				t.Fatalf("after the store released %s: %q, want one finding naming the incident and the key", key, got)
			}

			// The sweep queues the hold again; the uploader places it.
			res, err := h.l.Sweep(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.HoldsQueued) != 1 || res.HoldsQueued[0] != key {
				t.Fatalf("the sweep queued the holds of %q again, want [%s]", res.HoldsQueued, key)
			}
			h.drain(t)
			on, err := objects.(ledger.LegalHoldReader).LegalHold(ctx, location(t, h, key))
			if err != nil || !on {
				t.Fatalf("after the sweep and an upload round the store holds %s: %v, %v", key, on, err)
			}
			if got := holds(); len(got) != 0 {
				t.Fatalf("after the hold was placed again: %q", got)
			}
			if res, err := h.l.Sweep(ctx, false); err != nil || len(res.HoldsQueued) != 0 {
				t.Fatalf("a second sweep queued %q again (%v), want none", res.HoldsQueued, err)
			}
		})
	}
}

// An object the ledger released and queued for deletion that the store
// holds under a legal hold (one applied late, or placed outside the
// ledger) is a finding: the sweep cannot delete it.
func TestFsckFindsAHoldOnAnObjectQueuedForDeletion(t *testing.T) {
	ctx := context.Background()
	local, _ := evidenceStores(t)["localdir"](t)
	objects := &refusingDeletes{ObjectStore: local}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), objects: objects}
	t.Cleanup(h.sc.Close)
	t0 := time.Now().UTC().AddDate(-2, 0, 0).Truncate(time.Second)
	h.set(t0)
	h.open(t)
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "R-1", Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: t0})))
	h.drain(t)
	objects.refuse.Store(true)
	h.set(t0.AddDate(0, 0, 91))
	if res, err := h.l.Sweep(ctx, false); err != nil || res.ObjectsPending == 0 {
		t.Fatalf("the sweep: %+v, %v; want deletions pending", res, err)
	}
	queued := queuedDeletions(t, h)
	if err := local.SetLegalHold(ctx, queued[0], true); err != nil {
		t.Fatal(err)
	}

	page, err := h.l.CheckIntegrity(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range page.Findings {
		if strings.Contains(f.Problem, "queued for deletion") {
			found = append(found, f.Problem)
		}
	}
	if len(found) != 1 || !strings.Contains(found[0], queued[0].Key) || !strings.Contains(found[0], "the sweep cannot delete it") {
		t.Fatalf("findings on the queued objects: %q, want one naming %s", found, queued[0].Key)
	}
}
