package cluster

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/pgtest"
	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// TestSameReceiptOnTwoReplicas: three replicas on one database and one
// bucket, writers spread across them, and meanwhile receipts each posted
// to two replicas at the same moment, many times and several at once.
// A byte-identical pair stores one row: one answer is CREATED, the other
// ALREADY_RECORDED with the same row. A pair that shares the receipt but
// carries another delegation token stores two rows: one CREATED, the
// other DUPLICATE naming it (API.md). Every other write is stored once.
func TestSameReceiptOnTwoReplicas(t *testing.T) {
	pgtest.Available(t)
	dsn := pgtest.CreateDB(t)
	e := newEnv(t, dsn, 0, 0)
	rs := []*replica{e.startInProcess("r1"), e.startInProcess("r2"), e.startInProcess("r3")}
	bg := startLoad(t, rs, e.corpus(150, "bg"), 6, 0)

	const pairs = 48
	type answer struct {
		outcome     ledgerv1.AppendOutcome
		id, dupOf   string
		err         error
		replicaName string
	}
	results := make([][2]answer, pairs)
	jobs := make(chan int)
	var wg sync.WaitGroup
	ctx := as(context.Background(), writerKey)
	for range 4 {
		wg.Go(func() {
			for i := range jobs {
				r := e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("same-%d", i)})
				reqs := [2]*ledgerv1.AppendReceiptRequest{request(r), request(r)}
				if i%2 == 1 {
					reqs[1] = request(e.otherToken(r))
				}
				to := [2]*replica{rs[i%3], rs[(i+1)%3]}
				start := make(chan struct{})
				var both sync.WaitGroup
				for k := range 2 {
					both.Go(func() {
						<-start
						rep, err := to[k].client.AppendReceipt(ctx, reqs[k])
						results[i][k] = answer{rep.GetOutcome(), rep.GetRow().GetId(), rep.GetRow().GetVerifier().GetDuplicateOf(), err, to[k].name}
					})
				}
				close(start)
				both.Wait()
			}
		})
	}
	for i := range pairs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	bg.wait()

	for i, pair := range results {
		a, b := pair[0], pair[1]
		if a.err != nil || b.err != nil {
			t.Errorf("pair %d: errors %v (%s), %v (%s)", i, a.err, a.replicaName, b.err, b.replicaName)
			continue
		}
		first, second := a, b
		if b.outcome == ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
			first, second = b, a
		}
		switch {
		case first.outcome != ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED:
			t.Errorf("pair %d: outcomes %s and %s, want one CREATED", i, a.outcome, b.outcome)
		case i%2 == 0 && (second.outcome != ledgerv1.AppendOutcome_APPEND_OUTCOME_ALREADY_RECORDED || second.id != first.id):
			t.Errorf("identical pair %d: %s %s and %s %s, want CREATED and ALREADY_RECORDED of the same row", i, first.outcome, first.id, second.outcome, second.id)
		case i%2 == 1 && (second.outcome != ledgerv1.AppendOutcome_APPEND_OUTCOME_DUPLICATE || second.id == first.id || second.dupOf != first.id):
			t.Errorf("pair %d with another token: %s %s and %s %s (duplicate of %q), want CREATED and a DUPLICATE row naming it", i, first.outcome, first.id, second.outcome, second.id, second.dupOf)
		}
	}
	for i := range pairs {
		var n int
		queryRow(t, dsn, "SELECT count(*) FROM row_targets WHERE target = $1", []any{fmt.Sprintf("same-%d", i)}, &n)
		if want := 1 + i%2; n != want {
			t.Errorf("pair %d: %d rows stored, want %d", i, n, want)
		}
	}
	acked, failed := bg.counts()
	if failed > 0 || acked != 150 {
		t.Errorf("writers across the replicas: %d acknowledged, %d failed (%v); want all 150", acked, failed, bg.failed)
	}
	if n := missingRows(t, dsn, bg.ids()); n > 0 {
		t.Errorf("%d acknowledged rows missing", n)
	}
	var total int
	queryRow(t, dsn, "SELECT count(*) FROM ledger_rows", nil, &total)
	if want := 150 + pairs + pairs/2; total != want {
		t.Errorf("%d rows in the database, want %d", total, want)
	}
	byReplica := map[string]int{}
	for _, p := range results {
		for _, a := range p {
			if a.outcome == ledgerv1.AppendOutcome_APPEND_OUTCOME_CREATED {
				byReplica[a.replicaName]++
			}
		}
	}
	t.Logf("%d pairs raced; the CREATED answers came from %v", pairs, byReplica)
}

// otherToken returns r with another delegation token for the same grant
// (issued a second earlier): the same receipt with other evidence.
func (e *env) otherToken(r *pacttest.Receipt) *pacttest.Receipt {
	o := *r
	claims := maps.Clone(r.TokenClaims)
	claims["iat"] = claims["iat"].(int64) - 1
	o.DelegationToken = e.sc.Brand.Key.Sign(claims)
	return &o
}
