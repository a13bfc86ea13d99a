package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// A signed ts ahead of the ledger's clock moves the start of retention
// only up to an hour past the recording: a receipt signed with ts 2525
// (a brand's or a Provider's clock gone wrong) is kept, with its evidence
// and key sets under write-once retention, for its class's period from
// then, not for five centuries. Within the hour the ts still counts.
func TestASignedTsFarAheadDoesNotLengthenRetention(t *testing.T) {
	ctx := context.Background()
	policy := retention.DefaultPolicy()
	now := newHarness(t).clock()
	for _, c := range []struct {
		name  string
		ts    time.Time
		start time.Time
	}{
		{"ts in 2525", time.Date(2525, 1, 1, 0, 0, 0, 0, time.UTC), now.Add(time.Hour)},
		{"ts half an hour ahead", now.Add(30 * time.Minute), now.Add(30 * time.Minute)},
	} {
		h := newHarness(t)
		row, o := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: c.name, At: c.ts})))
		if o != ledger.Created || row.Status != ledger.Authorized {
			t.Fatalf("%s: outcome %v, status %v", c.name, o, row.Status)
		}
		want := policy.RetainUntil(row.Class, c.start)
		if !row.RetainUntil.Equal(want) {
			t.Errorf("%s: retain-until %s, want %s (the class's period from %s)", c.name, row.RetainUntil.Format(time.RFC3339), want.Format(time.RFC3339), c.start.Format(time.RFC3339))
		}
		// The evidence for its class's period; each key set for the
		// longest and a day, as for a row of that time.
		objects := map[string]time.Time{ledger.EvidenceKey(row.ID): policy.ObjectRetainUntil(row.Class, c.start)}
		keySets := policy.ObjectRetainUntil(policy.Longest(c.start), c.start).Add(24 * time.Hour)
		for _, id := range []string{row.BrandKey.JWKSSnapshot, row.Agent.JWKSSnapshot} {
			objects[ledger.SnapshotKey(id)] = keySets
		}
		err := h.store.View(ctx, func(tx ledger.Tx) error {
			entries, err := tx.Outbox(1000)
			for _, e := range entries {
				if want, ok := objects[e.Key]; !ok || !e.RetainUntil.Equal(want) {
					t.Errorf("%s: object %s is locked until %s, want %s", c.name, e.Key, e.RetainUntil.Format(time.RFC3339), want.Format(time.RFC3339))
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
