package bench

import (
	"context"
	"fmt"
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
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/verifier"
)

// runList stores cfg.ListRows rows, starts ledgerd on them and measures
// ListRows by target over gRPC.
func runList(ctx context.Context, bin, dataDir string, sc *pacttest.Scenario, s3 *s3test.Server, cfg Config) error {
	w := cfg.Out
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	targets := cfg.ListRows / 2 // two rows per order id, as a cancel and its refund would be
	fmt.Fprintf(w, "\nloading %d rows into bbolt for the ListRows phase (not measured)...\n", cfg.ListRows)
	t0 := time.Now()
	store, err := bolt.Open(filepath.Join(dataDir, "ledger.db"), bolt.Config{})
	if err != nil {
		return err
	}
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const batch = 20000
	for start := 0; start < cfg.ListRows; start += batch {
		err := store.Update(ctx, func(tx ledger.Tx) error {
			for i := start; i < min(start+batch, cfg.ListRows); i++ {
				if err := tx.CreateRow(syntheticRow(i, targets, base, sc)); err != nil {
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
	res := &result{}
	rnd := rand.New(rand.NewPCG(1, 2))
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
	return nil
}

// syntheticRow is a row shaped like the ledger's own (same fields and
// check texts), for bulk loading.
func syntheticRow(i, targets int, base time.Time, sc *pacttest.Scenario) *ledger.Row {
	id := fmt.Sprintf("%064x", uint64(i)*0x9E3779B97F4A7C15+1)
	at := base.Add(time.Duration(i) * 15 * time.Second)
	target := "L-" + strconv.Itoa(i%targets)
	user := "acct-" + strconv.Itoa(i%200000)
	return &ledger.Row{
		ID: id, ReceiptID: "sha256:" + id, Kind: ledger.KindReceipt, Status: ledger.Authorized,
		GrantID: "a2agrant_" + strconv.Itoa(i%300000), Principal: user, Brand: sc.Brand.ID,
		Agent:        ledger.Agent{Platform: sc.PA.ID, RequestJWTKid: "pa-2026-09", JWKSSnapshot: "4b7e" + id[4:]},
		BrandKey:     ledger.BrandKey{Kid: "brand-k3", JWKSSnapshot: "9e1c" + id[4:]},
		ScopeGranted: []string{"orders:read", "orders:cancel"}, ScopesUsed: []string{"orders:cancel"},
		Limits:   ledger.Limits{GrantExpires: at.Add(55 * time.Minute)},
		Actions:  []verifier.RowAction{{Tool: "cancel_order", Target: target, ArgsHash: "0BJAq5LnwfhI5UlIi529SuaCRQPrlIBpWctGJR1G5pU", HashSource: verifier.HashFromReceipt}},
		IssuedAt: at, RecordedAt: at.Add(time.Second),
		Verifier: ledger.Record{CheckedBy: "pactledger bench", CheckedAt: at.Add(time.Second), Checks: []verifier.Check{
			{Name: "receipt_signature", Result: verifier.Pass, Detail: "ES256 kid brand-k3"},
			{Name: "request_signature", Result: verifier.Pass, Detail: "ES256 kid pa-2026-09, iss " + sc.PA.ID},
			{Name: "delegation_token", Result: verifier.Pass, Detail: "ES256 kid brand-k3, expires 2026-10-07T14:07:44Z"},
			{Name: "bindings", Result: verifier.Pass, Detail: "grant, user, pa and brand agree"},
			{Name: "scopes_within_grant", Result: verifier.Pass, Detail: "used [orders:cancel] within [orders:read orders:cancel]"},
			{Name: "args_hash", Result: verifier.Pass, Detail: "1 matched the receipt, 0 computed by the ledger"},
			{Name: "within_limits", Result: verifier.Skipped, Detail: "the writer recorded no limits"},
			{Name: "duplicate", Result: verifier.Pass, Detail: "receipt hash and request JWT not seen before"},
		}},
		Class: retention.MoneyMoved, RetainUntil: at.AddDate(0, 18, 0), Dispute: ledger.DisputeNone, EvidenceSHA256: id,
	}
}
