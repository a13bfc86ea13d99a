package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/storage/localdir"
	"github.com/pactledger/pactledger/verifier"
)

// template is a real row, verified by the ledger, with its evidence bundle.
type template struct {
	row    *ledger.Row
	bundle []byte
}

// templates records distinct real receipts through an in-process ledger
// and returns their rows, bundles and the JWKS snapshots they name.
func templates(ctx context.Context, sc *pacttest.Scenario, dir string, n int) ([]template, []verifier.Snapshot, error) {
	store, err := bolt.Open(filepath.Join(dir, "templates.db"), bolt.Config{})
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	objects, err := localdir.Open(filepath.Join(dir, "templates-evidence"))
	if err != nil {
		return nil, nil, err
	}
	f := verifier.NewFetcher(verifier.FetcherConfig{AllowInsecureLoopback: true})
	reg, err := verifier.NewRegistry(f, sc.Brands(), sc.Agents())
	if err != nil {
		return nil, nil, err
	}
	v, _ := verifier.New(verifier.Config{Audience: sc.Audience, CheckedBy: "pactledger bench"})
	l, err := ledger.New(store, objects, v, reg, ledger.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, err
	}
	var out []template
	var snaps []verifier.Snapshot
	for i := range n {
		r := sc.Mint(pacttest.Spec{User: "acct-" + strconv.Itoa(i), GrantID: "a2agrant_" + strconv.Itoa(i), Target: "T-" + strconv.Itoa(i)})
		in := ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions}
		row, _, err := l.AppendReceipt(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		if row.Status != ledger.Authorized {
			return nil, nil, fmt.Errorf("template receipt %d: %v", i, row.Status)
		}
		bundle, err := json.Marshal(ledger.Evidence{ReceiptJWS: in.ReceiptJWS, RequestJWT: in.RequestJWT, DelegationToken: in.DelegationToken, Actions: in.Actions})
		if err != nil {
			return nil, nil, err
		}
		out = append(out, template{row: row, bundle: bundle})
		if i == 0 {
			for _, id := range []string{row.BrandKey.JWKSSnapshot, row.Agent.JWKSSnapshot} {
				s, _, err := l.Snapshot(ctx, id)
				if err != nil {
					return nil, nil, err
				}
				snaps = append(snaps, s)
			}
		}
	}
	return out, snaps, nil
}

// runReadSide stores cfg.ListRows rows with their evidence, starts ledgerd
// on them and measures ListRows by target, the dispute drill and the
// monthly drill over gRPC.
func runReadSide(ctx context.Context, bin, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server, cfg Config) error {
	w := cfg.Out
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	tpl, snaps, err := templates(ctx, sc, dataDir, 1000)
	if err != nil {
		return err
	}
	targets := cfg.ListRows / 2 // two rows per order id, as a cancel and its refund would be
	fmt.Fprintf(w, "\nloading %d rows with their evidence bundles into bbolt for the read-side phase (not measured)...\n", cfg.ListRows)
	t0 := time.Now()
	store, err := bolt.Open(filepath.Join(dataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		return err
	}
	const batch = 20000
	for start := 0; start < cfg.ListRows; start += batch {
		err := store.Update(ctx, func(tx ledger.Tx) error {
			if start == 0 {
				for _, s := range snaps {
					if _, err := tx.PutSnapshot(s); err != nil {
						return err
					}
				}
			}
			for i := start; i < min(start+batch, cfg.ListRows); i++ {
				t := tpl[i%len(tpl)]
				row := synthetic(t.row, i, targets)
				if err := tx.CreateRow(row); err != nil {
					return err
				}
				if err := tx.PutEvidence(row.ID, t.bundle); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			store.Close()
			return err
		}
	}
	if err := store.Close(); err != nil {
		return err
	}
	st, _ := os.Stat(filepath.Join(dataDir, "ledger.db"))
	fmt.Fprintf(w, "  loaded in %s, bbolt file %s\n", time.Since(t0).Round(time.Second), mib(st.Size()))

	d, err := startLedgerdOn(ctx, bin, dataDir, sc, s3)
	if err != nil {
		return err
	}
	defer d.stop()
	client := ledgerv1.NewLedgerServiceClient(d.conns[0])
	rctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+readerKey)
	rnd := rand.New(rand.NewPCG(1, 2))

	res := &result{}
	t1 := time.Now()
	for range cfg.ListQueries {
		target := "L-" + strconv.Itoa(rnd.IntN(targets))
		q0 := time.Now()
		rep, err := client.ListRows(rctx, &ledgerv1.ListRowsRequest{Target: target})
		if err != nil || len(rep.GetRows()) != 2 {
			res.errors++
			continue
		}
		res.lat = append(res.lat, time.Since(q0))
		res.ok++
	}
	res.rate = float64(res.ok) / time.Since(t1).Seconds()
	fmt.Fprintf(w, "ListRows by target over gRPC with %d rows stored: p50 %s, p99 %s (%d queries, %.0f/s, errors %d)\n",
		cfg.ListRows, res.p(50), res.p(99), res.ok, res.rate, res.errors)

	sctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+supportKey)
	drills := func(n int, req func() *ledgerv1.RunDrillRequest) (*result, int, int) {
		r := &result{}
		passed, total := 0, 0
		for range n {
			q0 := time.Now()
			rep, err := client.RunDrill(sctx, req())
			if err != nil {
				r.errors++
				continue
			}
			r.lat = append(r.lat, time.Since(q0))
			r.ok++
			passed += int(rep.GetReport().GetChecksPassed())
			total += int(rep.GetReport().GetChecksTotal())
		}
		return r, passed, total
	}
	dr, dp, dt := drills(cfg.Drills, func() *ledgerv1.RunDrillRequest {
		return &ledgerv1.RunDrillRequest{Target: "L-" + strconv.Itoa(rnd.IntN(targets))}
	})
	fmt.Fprintf(w, "dispute drill (RunDrill by order id over gRPC: 2 rows x 6 pulls, report stored) with %d rows: p50 %s, p99 %s, max %s (%d drills, %d/%d pulls passed, errors %d)\n",
		cfg.ListRows, dr.p(50), dr.p(99), dr.p(100), dr.ok, dp, dt, dr.errors)
	mr, mp, mt := drills(max(cfg.Drills/10, 3), func() *ledgerv1.RunDrillRequest {
		return &ledgerv1.RunDrillRequest{Monthly: &ledgerv1.MonthlyDrill{Sample: 5}}
	})
	fmt.Fprintf(w, "monthly drill (5 random rows x 6 pulls, report stored) with %d rows: p50 %s, p99 %s, max %s (%d drills, %d/%d pulls passed, errors %d)\n",
		cfg.ListRows, mr.p(50), mr.p(99), mr.p(100), mr.ok, mp, mt, mr.errors)
	return nil
}

// synthetic is a copy of a real row under a new id, order id and time; its
// evidence is the template's bundle, so every drill pull has what it needs.
func synthetic(t *ledger.Row, i, targets int) *ledger.Row {
	r := *t
	r.ID = fmt.Sprintf("%064x", uint64(i)*0x9E3779B97F4A7C15+1)
	// Within the template's token lifetime, so the grant pull holds.
	r.IssuedAt = t.IssuedAt.Add(time.Duration(i%3000) * 10 * time.Millisecond)
	r.Actions = append([]verifier.RowAction(nil), t.Actions...)
	r.Actions[0].Target = "L-" + strconv.Itoa(i%targets)
	r.RequestJWTSHA256 = ""
	return &r
}
