package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/localdir"
)

// LedgerMaker opens a ledger on a fresh store of the backend under test,
// verifying the receipts of sc, its evidence in objects, and returns it
// with its store and the setter of its clock.
type LedgerMaker func(t *testing.T, sc *pacttest.Scenario, objects ledger.ObjectStore) (l *ledger.Ledger, s ledger.Store, set func(time.Time))

// beforeExtend is an object store that runs hook once, at the first
// retention extension, before it is applied.
type beforeExtend struct {
	ledger.ObjectStore
	once sync.Once
	hook func()
}

func (b *beforeExtend) ExtendRetention(ctx context.Context, loc ledger.Location, until time.Time) error {
	b.once.Do(func() {
		if b.hook != nil {
			b.hook()
		}
	})
	return b.ObjectStore.ExtendRetention(ctx, loc, until)
}

// SnapshotDroppedUnderItsExtension: two read-only rows name the same JWKS
// snapshots, the second queuing an extension of their objects'
// retention. Once both rows are past retention a sweep removes them,
// drops the snapshots with their objects' records and queues the objects'
// deletion, refused for now (still retained): inside an upload round,
// after it read the extensions and before it records them, or before the
// round. Either way the round leaves no record of a dropped snapshot's
// object, its deletion stays queued (a record would make a later sweep
// take it for an object in use again, and the object would stay for
// good), and the extensions leave the outbox without a dead letter.
func SnapshotDroppedUnderItsExtension(t *testing.T, open LedgerMaker) {
	for _, inRound := range []bool{true, false} {
		name := "the sweep before the round"
		if inRound {
			name = "the sweep inside the round"
		}
		t.Run(name, func(t *testing.T) {
			snapshotDroppedUnderItsExtension(t, open, inRound)
		})
	}
}

func snapshotDroppedUnderItsExtension(t *testing.T, open LedgerMaker, inRound bool) {
	ctx := t.Context()
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	dir, err := localdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objects := &beforeExtend{ObjectStore: dir}
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	l, s, set := open(t, sc, objects)
	readOnly := func(target string, at time.Time) *ledger.Row {
		set(at)
		r := sc.Mint(pacttest.Spec{Target: target, Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}, At: at})
		row, _, err := l.AppendReceipt(ctx, ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions})
		if err != nil {
			t.Fatal(err)
		}
		if row.Class != retention.ReadOnly {
			t.Fatalf("row in %v, want read-only", row.Class)
		}
		return row
	}
	first := readOnly("R-1", t0)
	snaps := ledger.SnapshotsOf(first)
	if err := DrainOutbox(ctx, l); err != nil {
		t.Fatal(err)
	}
	readOnly("R-2", t0.AddDate(0, 0, 2))
	if n, err := l.OutboxDepth(ctx); err != nil || n != len(snaps) {
		t.Fatalf("outbox depth %d, %v after the second row; want its %d retention extensions", n, err, len(snaps))
	}
	set(t0.AddDate(0, 0, 93)) // both past their 90 days
	var swept *ledger.SweepResult
	sweep := func() {
		var err error
		if swept, err = l.Sweep(ctx, false); err != nil {
			t.Error(err)
		}
	}
	if inRound {
		objects.hook = sweep
	} else {
		sweep()
	}
	if _, err := l.UploadRound(ctx, 512, 4); err != nil {
		t.Fatalf("upload round: %v", err)
	}
	if swept == nil || len(swept.Swept) != 2 {
		t.Fatalf("the sweep: %+v; want both rows swept", swept)
	}
	if _, err := l.Sweep(ctx, false); err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx ledger.Tx) error {
		dels, err := tx.Deletions(100)
		if err != nil {
			return err
		}
		queued := map[string]bool{}
		for _, d := range dels {
			queued[d.Key] = true
		}
		for _, id := range snaps {
			key := ledger.SnapshotKey(id)
			if _, err := tx.Snapshot(id); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("snapshot %s: %v; want it dropped", id, err)
			}
			if _, err := tx.Object(key); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("the dropped snapshot %s still has its object's record (%v)", id, err)
			}
			if !queued[key] {
				t.Errorf("the dropped snapshot %s: its object's deletion is no longer queued", id)
			}
		}
		if n, err := tx.OutboxDepth(); err != nil || n != 0 {
			t.Errorf("outbox depth %d, %v; want the extensions gone", n, err)
		}
		if n, err := tx.DeadLetterCount(); err != nil || n != 0 {
			t.Errorf("%d dead letters, %v; want none", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
