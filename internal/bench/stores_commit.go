package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// commitFor is how long each in-process commit measurement runs.
const commitFor = 5 * time.Second

// commitFigures is one in-process commit measurement of a store.
type commitFigures struct {
	kind    string
	ok      int
	batches int64
	elapsed time.Duration
	lat     []time.Duration
}

// commitLatencies measures, storeRuns times for each store, what one
// row's commit costs: Concurrency writers each storing a row as the
// ledger does (the row with its snapshot links, its evidence
// bundle, its outbox entry and its log leaf) in Update, on a fresh store,
// with no verification and no network in front.
func (b *storeBench) commitLatencies(ctx context.Context) (map[string][]*commitFigures, error) {
	dir := filepath.Join(b.work, "commit-templates")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tpl, snaps, err := templates(ctx, b.sc, dir, 200)
	if err != nil {
		return nil, err
	}
	out := map[string][]*commitFigures{}
	for range storeRuns {
		for _, kind := range []string{config.StoreBbolt, config.StorePostgres} {
			f, err := b.commitRun(ctx, kind, tpl, snaps)
			if err != nil {
				return nil, fmt.Errorf("commit latency on %s: %w", kind, err)
			}
			out[kind] = append(out[kind], f)
		}
	}
	return out, nil
}

// commitRun is one measurement on a fresh store of kind.
func (b *storeBench) commitRun(ctx context.Context, kind string, tpl []template, snaps []verifier.Snapshot) (*commitFigures, error) {
	f := &commitFigures{kind: kind}
	onCommit := func(int, time.Duration) { atomic.AddInt64(&f.batches, 1) }
	dir := filepath.Join(b.work, "commit")
	sc, drop, err := b.freshStore(ctx, kind, dir)
	if err != nil {
		return nil, err
	}
	defer drop()
	var store interface {
		ledger.Store
		Close() error
	}
	if kind == config.StoreBbolt {
		store, err = bolt.Open(sc.Path, bolt.Config{OnCommit: onCommit})
	} else {
		store, err = postgres.Open(ctx, postgres.Config{DSN: sc.DSN, OnCommit: onCommit})
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if err := store.Update(ctx, func(tx ledger.Tx) error {
		for _, s := range snaps {
			if _, err := tx.PutSnapshot(s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs atomic.Int64
	)
	start := time.Now()
	stopAt := start.Add(commitFor)
	for range b.cfg.Concurrency {
		wg.Go(func() {
			for time.Now().Before(stopAt) && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				t := tpl[i%len(tpl)]
				row := synthetic(t.row, i, 1<<30)
				t0 := time.Now()
				err := store.Update(ctx, func(tx ledger.Tx) error { return commitOneRow(tx, row, t.bundle, start) })
				d := time.Since(t0)
				if err != nil {
					errs.Add(1)
					continue
				}
				mu.Lock()
				f.lat = append(f.lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	f.elapsed = time.Since(start)
	f.ok = len(f.lat)
	if n := errs.Load(); n > 0 {
		return nil, fmt.Errorf("%d of the writes failed", n)
	}
	return f, nil
}

// commitOneRow stores row as the ledger's commit does.
func commitOneRow(tx ledger.Tx, row *ledger.Row, bundle []byte, at time.Time) error {
	if err := ledger.AddRow(tx, row); err != nil {
		return err
	}
	if err := tx.PutEvidence(row.ID, bundle); err != nil {
		return err
	}
	e := ledger.OutboxEntry{Kind: "row", Ref: row.ID, Key: ledger.EvidenceKey(row.ID), RetainUntil: row.RetainUntil, Segment: true}
	if err := tx.Enqueue(e, at); err != nil {
		return err
	}
	return tx.QueueLeaf(row.ID, []byte("bench leaf "+row.ID))
}

// printCommits prints the in-process commit figures, medians of the runs.
func (b *storeBench) printCommits(runs map[string][]*commitFigures) {
	fmt.Fprintf(b.w, "\ncommit in process (%d writers, each Update one row with its snapshot links, evidence, outbox entry and leaf; %s each), medians of %d runs:\n",
		b.cfg.Concurrency, commitFor, storeRuns)
	for _, kind := range []string{config.StoreBbolt, config.StorePostgres} {
		fs := runs[kind]
		m := func(f func(*commitFigures) float64) float64 {
			v := make([]float64, len(fs))
			for i, x := range fs {
				v[i] = f(x)
			}
			return medianOf(v)
		}
		d := func(q float64) time.Duration {
			return time.Duration(m(func(f *commitFigures) float64 { return float64(percentile(f.lat, q)) })).Round(10 * time.Microsecond)
		}
		fmt.Fprintf(b.w, "  %-9s %7.0f rows/s, %6.0f transactions/s (%.1f rows each); latency p50 %s, p99 %s\n", kind,
			m(func(f *commitFigures) float64 { return float64(f.ok) / f.elapsed.Seconds() }),
			m(func(f *commitFigures) float64 { return float64(f.batches) / f.elapsed.Seconds() }),
			m(func(f *commitFigures) float64 { return float64(f.ok) / max(float64(f.batches), 1) }),
			d(50), d(99))
	}
}
