package ledger

import (
	"context"
	"fmt"
	"math"

	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// Drillable reports whether the monthly drill may sample row r: a
// receipt (not a refusal), whose receipt signature did not fail, not a
// duplicate, whose evidence is kept (not a read-only turn: a row of the
// read-only class; a look-up recorded INCIDENT is in the incident class,
// keeps its evidence and is sampled like any incident). A receipt no
// signature vouches for is, like a refusal, what a writer sent: sampling
// it would let any writer key choose what the drill scores. The stores
// keep these rows in the drill pool (Rows.DrillPool), so a sample is
// drawn without reading every row.
func Drillable(r *Row) bool { return undrillable(r) == "" }

// undrillable says why the monthly drill may not sample row r, "" when
// it may: the rule of Drillable, with its reasons.
func undrillable(r *Row) string {
	switch {
	case r.Kind != KindReceipt:
		return "a refusal"
	case (&verifier.Result{Checks: r.Verifier.Checks}).Failed(verifier.CheckReceiptSignature):
		return "its receipt signature failed"
	case r.Status == Duplicate:
		return "a duplicate"
	case r.Class == retention.ReadOnly:
		return "a read-only turn"
	case r.EvidenceNotKept != "":
		return "its evidence is not kept"
	}
	return ""
}

// Sparse pools are walked: when the pool's positions are spread over more
// than sparsePool times as many numbers as it holds rows, or a sample has
// drawn samplingDraws candidates per row wanted (plus samplingSlack) and
// still lacks rows, the rest of the sample comes from one walk of the
// pool's positions. Positions are dense in practice (a row store numbers
// rows in commit order, and most receipts keep their evidence), so a
// draw costs a few point reads whatever the ledger's size.
const (
	sparsePool    = 8
	samplingDraws = 32
	samplingSlack = 64
)

// SampleDrillPool picks n of the drill pool's rows uniformly at random,
// without replacement, and returns them with the number of rows in the
// pool. rnd(k) returns a uniform random int in [0, k).
//
// It draws positions between the pool's first and last at random and
// keeps those that hold a row it has not picked yet (rejection sampling:
// each draw that is kept is uniform over the rows not yet picked), a batch
// of draws per read. A pool whose positions are sparse, or a sample whose
// draws keep missing, is finished by reservoir sampling over one walk of
// the positions; either way every row of the pool is equally likely.
func SampleDrillPool(tx Rows, n int, rnd func(int) int) ([]*Row, int, error) {
	count, first, last, err := tx.DrillPool()
	if err != nil || count == 0 || n <= 0 {
		return nil, count, err
	}
	picked := make(map[uint64]bool, n)
	var order []uint64
	var rows []*Row
	span := last - first + 1
	if count > n && span/uint64(count) < sparsePool && span <= math.MaxInt {
		for budget := samplingDraws*n + samplingSlack; len(order) < n && budget > 0; {
			want := n - len(order)
			draws := make([]uint64, 0, min(budget, 2*want*int(span/uint64(count)+1)))
			for len(draws) < cap(draws) {
				draws = append(draws, first+uint64(rnd(int(span))))
			}
			budget -= len(draws)
			found, err := tx.DrillPoolRows(draws)
			if err != nil {
				return nil, count, err
			}
			for _, p := range draws {
				r := found[p]
				if r == nil || picked[p] || len(order) == n {
					continue
				}
				picked[p] = true
				order = append(order, p)
				rows = append(rows, r)
			}
		}
	}
	if len(order) < n {
		// Reservoir sampling over the positions not picked yet.
		want := min(n-len(order), count-len(order))
		var res []uint64
		seen := 0
		err := tx.DrillPoolPositions(func(p uint64) {
			if picked[p] {
				return
			}
			seen++
			switch {
			case len(res) < want:
				res = append(res, p)
			default:
				if j := rnd(seen); j < want {
					res[j] = p
				}
			}
		})
		if err != nil {
			return nil, count, err
		}
		found, err := tx.DrillPoolRows(res)
		if err != nil {
			return nil, count, err
		}
		for _, p := range res {
			r := found[p]
			if r == nil {
				return nil, count, fmt.Errorf("drill pool: position %d listed but holds no row", p)
			}
			rows = append(rows, r)
		}
	}
	return rows, count, nil
}

// SampleDrillable picks n of the rows Drillable holds for, uniformly at
// random (SampleDrillPool), and returns them with how many such rows the
// ledger holds.
func (l *Ledger) SampleDrillable(ctx context.Context, n int, rnd func(int) int) ([]*Row, int, error) {
	var rows []*Row
	var count int
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		rows, count, err = SampleDrillPool(tx, n, rnd)
		return err
	})
	return rows, count, err
}
