package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/pgtest"
	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/postgres"
	"github.com/pactledger/pactledger/verifier"
)

// benchWriters is how many writers write at once.
const benchWriters = 64

// BenchmarkConcurrentWriters: 64 writers at once, each writing one row
// per Update as the ledger's commit path does: the dedupe reads, the row,
// its evidence and outbox entry, its log leaf, and the brand's and the
// agent's JWKS snapshots, which every row names. It runs on one store
// with one or four group commits at once, and on two stores (two
// replicas) with one each. Run it with a fixed count, for example
// -bench ConcurrentWriters -benchtime 3000x -count 3.
func BenchmarkConcurrentWriters(b *testing.B) {
	for _, c := range []struct {
		name               string
		stores, committers int
	}{{"committers=1", 1, 1}, {"committers=4", 1, 4}, {"replicas=2", 2, 1}} {
		b.Run(c.name, func(b *testing.B) {
			cl := pgtest.Shared(b)
			err := cl.Template("ledger_schema", func(dsn string) error {
				_, _, err := postgres.Migrate(context.Background(), postgres.Config{DSN: dsn})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			dsn := cl.CreateDBFrom(b, "ledger_schema")
			stores := make([]*postgres.Store, c.stores)
			for i := range stores {
				s, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Committers: c.committers})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				stores[i] = s
			}
			at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			brand := verifier.NewSnapshot("https://brand.example/jwks.json", at, []byte(`{"keys":["brand"]}`))
			agent := verifier.NewSnapshot("https://agent.example/jwks.json", at, []byte(`{"keys":["agent"]}`))
			var next atomic.Int64
			errs := make([]error, benchWriters)
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range benchWriters {
				wg.Go(func() {
					s := stores[w%len(stores)]
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) || errs[w] != nil {
							return
						}
						r := row(fmt.Sprintf("%s row %d", b.Name(), i))
						r.RequestJWTSHA256 = hexID(fmt.Sprintf("%s request %d", b.Name(), i))
						r.BrandKey.JWKSSnapshot, r.Agent.JWKSSnapshot = brand.ID, agent.ID
						errs[w] = s.Update(context.Background(), func(tx ledger.Tx) error { return writeAsLedger(tx, r, brand, agent) })
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// writeAsLedger makes the store calls of the ledger's AppendReceipt for
// a new receipt row r naming brand and agent.
func writeAsLedger(tx ledger.Tx, r *ledger.Row, brand, agent verifier.Snapshot) error {
	if _, err := tx.Row(r.ID); err == nil {
		return fmt.Errorf("row %s: already stored", r.ID)
	}
	if _, err := tx.Tombstone(r.ID); err == nil {
		return fmt.Errorf("row %s: swept", r.ID)
	}
	if _, err := tx.RowByRequestJWT(r.RequestJWTSHA256); err != nil {
		return err
	}
	if _, err := tx.Revocation(r.GrantID); err != nil {
		return err
	}
	if err := ledger.AddRow(tx, r); err != nil {
		return err
	}
	if err := tx.QueueLeaf(r.ID, []byte(r.ID)); err != nil {
		return err
	}
	if err := tx.PutEvidence(r.ID, []byte(`{"receiptJws":"`+r.ID+`"}`)); err != nil {
		return err
	}
	if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: r.ID, Key: ledger.EvidenceKey(r.ID), RetainUntil: r.RetainUntil, Segment: true}, r.RecordedAt); err != nil {
		return err
	}
	retain := r.IssuedAt.Add(540 * 24 * time.Hour)
	for _, s := range []verifier.Snapshot{brand, agent} {
		isNew, err := tx.PutSnapshot(s)
		if err != nil {
			return err
		}
		if _, err := tx.SnapshotRetain(s.ID); err != nil {
			return err
		}
		if !isNew {
			continue
		}
		if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectJWKS, Ref: s.ID, Key: ledger.SnapshotKey(s.ID), RetainUntil: retain}, r.RecordedAt); err != nil {
			return err
		}
		if err := tx.SetSnapshotRetain(s.ID, retain); err != nil {
			return err
		}
	}
	return nil
}
