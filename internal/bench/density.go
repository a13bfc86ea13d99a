package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// The row store's bytes per row: real rows recorded through the ledger
// (verify, durable commit, Merkle log), their evidence uploaded to
// write-once storage and the log integrated, then the bbolt file measured
// bucket by bucket.

// bucketStat is one top-level bucket's size.
type bucketStat struct {
	name         string
	keys         int
	alloc, inuse int64 // bytes of pages allocated to it, and of them in use
}

// fileStats is a bbolt file's size, the part of it pages are allocated
// in (the rest is grown ahead) and its buckets.
type fileStats struct {
	size, used int64
	buckets    []bucketStat
}

// readFileStats opens the bbolt file at path read-only (the store must be
// closed) and walks every bucket.
func readFileStats(path string) (fileStats, error) {
	var fs fileStats
	st, err := os.Stat(path)
	if err != nil {
		return fs, err
	}
	fs.size = st.Size()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fs, fmt.Errorf("bucket stats of %s: %w", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		fs.used = tx.Size()
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			s := b.Stats()
			fs.buckets = append(fs.buckets, bucketStat{name: string(name), keys: s.KeyN,
				alloc: int64(s.BranchAlloc + s.LeafAlloc), inuse: int64(s.BranchInuse + s.LeafInuse)})
			return nil
		})
	})
	slices.SortFunc(fs.buckets, func(a, b bucketStat) int { return int(b.alloc - a.alloc) })
	return fs, err
}

// print writes the file's size and its buckets per row.
func (fs fileStats) print(w io.Writer, rows int) {
	perRow := func(b int64) string { return fmt.Sprintf("%.0f B", float64(b)/float64(max(rows, 1))) }
	var alloc int64
	for _, b := range fs.buckets {
		alloc += b.alloc
	}
	fmt.Fprintf(w, "  bbolt file %s, pages up to the high-water mark %s = %s per row (in no bucket: free pages, free list, meta %s); by bucket, pages allocated per row (fill = bytes in use / allocated):\n",
		mib(fs.size), mib(fs.used), perRow(fs.used), mib(fs.used-alloc))
	for _, b := range fs.buckets {
		if float64(b.alloc)/float64(max(rows, 1)) < 1 {
			continue
		}
		fmt.Fprintf(w, "    %-18s %9d keys  %9s  %s per row  fill %3.0f %%\n", b.name, b.keys, mib(b.alloc), perRow(b.alloc), 100*float64(b.inuse)/float64(max(b.alloc, 1)))
	}
	fmt.Fprintf(w, "    %-18s %9s       %9s  %s per row\n", "all buckets", "", mib(alloc), perRow(alloc))
}

// makeCorpusOf signs n receipts of tool with scopes used, one delegation
// token per row.
func makeCorpusOf(sc *pacttest.Scenario, n int, tool string, scopes []string) []*ledgerv1.AppendReceiptRequest {
	out := make([]*ledgerv1.AppendReceiptRequest, n)
	base := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	var wg sync.WaitGroup
	workers := runtime.NumCPU()
	for wi := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := wi; i < n; i += workers {
				r := sc.Mint(pacttest.Spec{Tool: tool, ScopesUsed: scopes, Target: "D-" + strconv.Itoa(i), User: "acct-" + strconv.Itoa(i%5000), GrantID: "a2agrant_" + strconv.Itoa(i%5000), At: base.Add(time.Duration(i) * time.Millisecond)})
				out[i] = &ledgerv1.AppendReceiptRequest{ReceiptJws: r.ReceiptJWS, RequestJwt: r.RequestJWT, DelegationToken: r.DelegationToken,
					Actions: []*ledgerv1.Action{{Tool: r.Actions[0].Tool, Target: r.Actions[0].Target, ArgsJson: r.Actions[0].ArgsJSON}}}
			}
		}()
	}
	wg.Wait()
	return out
}

// runDensity records cfg.DensityRows real rows of each class through an
// in-process ledger, uploads their evidence, integrates the log and prints
// the bbolt file per row.
func runDensity(ctx context.Context, sc *pacttest.Scenario, work string, cfg Config) error {
	w := cfg.Out
	for _, c := range []struct {
		name, tool string
		scopes     []string
	}{{"money_moved (cancel_order)", "cancel_order", nil}, {"read_only (lookup_orders)", "lookup_orders", []string{"orders:read"}}} {
		corpus := makeCorpusOf(sc, cfg.DensityRows, c.tool, c.scopes)
		dir := filepath.Join(work, "density-"+c.tool)
		t0 := time.Now()
		if err := recordAndSettle(ctx, sc, dir, corpus, cfg.Concurrency); err != nil {
			return fmt.Errorf("density %s: %w", c.name, err)
		}
		fs, err := readFileStats(filepath.Join(dir, "ledger.db"))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nrow store density, %d real %s rows recorded, evidence uploaded, log integrated and its full tiles published (%s):\n", len(corpus), c.name, time.Since(t0).Round(time.Second))
		fs.print(w, len(corpus))
	}
	return nil
}

// recordAndSettle appends corpus through a fresh in-process ledger with
// the Merkle log on while the uploader runs, then settles it (uploads,
// integrates, publishes the tiles and drops the published ones from the
// file, as ledgerd's integrator does) and closes the store.
func recordAndSettle(ctx context.Context, sc *pacttest.Scenario, dir string, corpus []*ledgerv1.AppendReceiptRequest, conc int) error {
	p, err := newInProcess(sc, dir)
	if err != nil {
		return err
	}
	defer p.store.Close()
	if err := p.enableLog(dir, 0); err != nil {
		return err
	}
	// The uploader runs beside the appends, as in ledgerd.
	upCtx, stopUploads := context.WithCancel(ctx)
	uploaded := make(chan error, 1)
	go func() {
		for upCtx.Err() == nil {
			n, err := p.l.UploadRound(upCtx, 512, 8)
			if err != nil && upCtx.Err() == nil {
				uploaded <- err
				return
			}
			if n == 0 { // nothing queued: look again shortly, as ledgerd's uploader does
				select {
				case <-upCtx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		uploaded <- nil
	}()
	res, err := drive(ctx, corpus, conc, 24*time.Hour, 0, p.append)
	stopUploads()
	if uerr := <-uploaded; err == nil {
		err = uerr
	}
	if err != nil {
		return err
	}
	if res.errors > 0 {
		return fmt.Errorf("%d of %d appends failed", res.errors, len(corpus))
	}
	if err := settle(ctx, p.l); err != nil {
		return err
	}
	return p.store.Close()
}
