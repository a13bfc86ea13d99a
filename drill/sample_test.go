package drill_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/drill"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// addIneligible adds rows the monthly drill must never sample: read-only
// turns, refusals and a duplicate (a replay of eligible, when given).
func (e *env) addIneligible(t *testing.T, n int, eligible *pacttest.Receipt) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		e.append(t, e.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("RO-%d", i), Tool: "lookup_orders", ScopesUsed: []string{"orders:read"}}))
		if _, err := e.l.AppendRefusal(ctx, ledger.RefusalInput{ClaimedPrincipal: "acct-1", Tool: "change_address", Target: fmt.Sprintf("RF-%d", i), Reason: "no receipt", ObservedAt: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if eligible != nil {
		replay := *eligible
		replay.ReceiptJWS = pacttest.MalleateES256(eligible.ReceiptJWS)
		if row := e.append(t, &replay); row.Status != ledger.Duplicate {
			t.Fatalf("replay recorded as %v", row.Status)
		}
	}
}

// addEligible appends n receipts that keep their evidence, a few writers
// at a time (group commit), and returns the first one minted.
func (e *env) addEligible(t *testing.T, n int) *pacttest.Receipt {
	t.Helper()
	receipts := make([]*pacttest.Receipt, n)
	for i := range receipts {
		receipts[i] = e.sc.Mint(pacttest.Spec{User: fmt.Sprintf("acct-%d", i), Target: fmt.Sprintf("A-%d", i)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				r := receipts[i]
				if _, _, err := e.l.AppendReceipt(context.Background(), ledger.ReceiptInput{ReceiptJWS: r.ReceiptJWS, RequestJWT: r.RequestJWT, DelegationToken: r.DelegationToken, Actions: r.Actions}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n == 0 {
		return nil
	}
	return receipts[0]
}

// The monthly drill on a young ledger tells the truth: never a false
// failure, all rows when there are fewer than the sample, and a "nothing
// to drill" report (not a failing one) when there are none.
func TestMonthlyDrillNeverScoresAFalseFailure(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1000} {
		t.Run(fmt.Sprintf("%d eligible rows", n), func(t *testing.T) {
			e := newEnv(t, time.Now)
			first := e.addEligible(t, n)
			e.addIneligible(t, 20, first)
			for run := range 50 {
				rep, err := e.r.Run(context.Background(), drill.Request{Monthly: true, Sample: 5}, "scheduler")
				if err != nil {
					t.Fatal(err)
				}
				want := min(n, 5)
				if len(rep.Rows) != want || rep.ChecksTotal != 6*want || rep.ChecksPassed != rep.ChecksTotal {
					t.Fatalf("run %d: %d rows, %d/%d checks (want %d rows, all passed): %+v", run, len(rep.Rows), rep.ChecksPassed, rep.ChecksTotal, want, rep.Pulls)
				}
				var wantNote string
				switch {
				case n == 0:
					wantNote = "nothing to drill"
				case n == 1:
					wantNote = "the ledger holds 1 eligible row, no more than the sample of 5: it was drilled"
				case n <= 5:
					wantNote = fmt.Sprintf("the ledger holds %d eligible rows, no more than the sample of 5: all drilled", n)
				default:
					wantNote = fmt.Sprintf("5 of %d eligible rows drilled", n)
				}
				if !strings.Contains(rep.Note, wantNote) {
					t.Fatalf("run %d: note %q, want %q", run, rep.Note, wantNote)
				}
				seen := map[string]bool{}
				for _, id := range rep.Rows {
					if seen[id] {
						t.Fatalf("run %d drilled row %s twice", run, id)
					}
					seen[id] = true
				}
			}
		})
	}
}

// With most rows ineligible, every eligible row is as likely to be drilled
// as any other (a seeded generator keeps the test exact).
func TestMonthlySampleIsUniform(t *testing.T) {
	e := newEnv(t, time.Now)
	first := e.addEligible(t, 4)
	e.addIneligible(t, 100, first)
	rng := rand.New(rand.NewPCG(1, 2))
	e.r = drill.New(e.l, drill.Config{Rand: rng.IntN})
	counts := map[string]int{}
	const runs = 400
	for range runs {
		rep, err := e.r.Run(context.Background(), drill.Request{Monthly: true, Sample: 1}, "scheduler")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Rows) != 1 || rep.ChecksPassed != 6 {
			t.Fatalf("%+v", rep)
		}
		counts[rep.Rows[0]]++
	}
	if len(counts) != 4 {
		t.Fatalf("drilled %d distinct rows of 4: %v", len(counts), counts)
	}
	// Each of 4 rows expects 100 of 400 picks; a uniform sampler stays
	// within 60 to 140 (far beyond 4 standard deviations of 8.7).
	for id, c := range counts {
		if c < 60 || c > 140 {
			t.Errorf("row %s picked %d times of %d, want about %d: %v", id[:12], c, runs, runs/4, counts)
		}
	}
}
