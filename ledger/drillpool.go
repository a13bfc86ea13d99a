package ledger

import (
	"context"
	"encoding/hex"
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

// DrillPoolCheck is what CheckDrillPool found: the drill pool's count
// against the rows it read.
type DrillPoolCheck struct {
	// Pool is how many rows the drill pool holds.
	Pool int
	// Read is how many rows were read; All says they are every row the
	// row store holds.
	Read int
	All  bool
	// Eligible counts the rows read that Drillable holds for.
	Eligible int
	// Missing are the rows read that Drillable holds for and the pool
	// does not hold, in id order from the point the reading began.
	Missing []string
	// Ineligible are the rows read that the pool holds and Drillable does
	// not hold for, each with why (undrillable).
	Ineligible []IneligibleRow
	// Unheld is, when All, how many of the pool's positions hold none of
	// the rows read: a position that holds no row.
	Unheld int
}

// IneligibleRow is a row the drill pool holds that the monthly drill may
// not sample, and why it may not.
type IneligibleRow struct {
	ID  string
	Why string
	// SignatureFailed says the row is a receipt whose signature failed,
	// which versions before 2026-12-06 put in the pool.
	SignatureFailed bool
}

// CheckDrillPool holds the drill pool to its rule over up to n rows read
// in one read: in id order from a random point (rnd(k) returns a uniform
// random int in [0, k)), wrapping around, so that a row store of up to n
// rows is read whole. Row ids are hashes, so the rows read are a random
// run of the row store whatever they hold. Each row read that Drillable
// holds for must be in the pool (else it is Missing: no sample can pick
// it), and each in the pool must be one Drillable holds for; when every
// row was read, the pool's count must be that of the rows read it holds.
// Its cost is n rows' reads, whatever the ledger's size.
func (l *Ledger) CheckDrillPool(ctx context.Context, n int, rnd func(int) int) (*DrillPoolCheck, error) {
	if n <= 0 {
		return nil, invalid("a check of the drill pool reads one row at least")
	}
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(rnd(256))
	}
	start := hex.EncodeToString(b)
	c := &DrillPoolCheck{}
	err := l.store.View(ctx, func(tx Tx) error {
		var err error
		if c.Pool, _, _, err = tx.DrillPool(); err != nil {
			return err
		}
		rows, next, err := tx.RowsByID(start, n)
		if err != nil {
			return err
		}
		if next == "" && len(rows) < n {
			// The end of the row store, every row after the point the
			// reading began read: on from its first row, until a row
			// read already.
			seen := make(map[string]bool, len(rows))
			for _, r := range rows {
				seen[r.ID] = true
			}
			more, next, err := tx.RowsByID("", n-len(rows))
			if err != nil {
				return err
			}
			c.All = next == ""
			for _, r := range more {
				if seen[r.ID] {
					c.All = true
					break
				}
				rows = append(rows, r)
			}
		}
		c.Read = len(rows)
		pooled, err := poolMembers(tx, rows)
		if err != nil {
			return err
		}
		for _, r := range rows {
			_, in := pooled[r.ID]
			switch why := undrillable(r); {
			case why == "":
				c.Eligible++
				if !in {
					c.Missing = append(c.Missing, r.ID)
				}
			case in:
				failed := r.Kind == KindReceipt && (&verifier.Result{Checks: r.Verifier.Checks}).Failed(verifier.CheckReceiptSignature)
				c.Ineligible = append(c.Ineligible, IneligibleRow{ID: r.ID, Why: why, SignatureFailed: failed})
			}
		}
		if c.All {
			c.Unheld = c.Pool - len(pooled)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// poolMembers returns the position in the drill pool of each of rows the
// pool holds, by row id.
func poolMembers(tx Tx, rows []*Row) (map[string]uint64, error) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return tx.DrillPoolMembers(ids)
}
