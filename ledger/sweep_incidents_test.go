package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/syncbuf"
	"github.com/pactledger/pactledger/ledger"
)

// incidentReads counts the incident records the ledger reads, in write
// transactions and in read ones. hide, when set, is an incident number
// read transactions do not find, as a read taken before the incident's
// transaction committed would not, where numbers are not given in commit
// order (PostgreSQL's sequence).
type incidentReads struct {
	ledger.Store
	inUpdate, inView *atomic.Int64
	hide             *atomic.Uint64
}

func (s incidentReads) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.Update(ctx, func(tx ledger.Tx) error { return fn(incidentsCounted{tx, s.inUpdate, 0}) })
}

func (s incidentReads) View(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.View(ctx, func(tx ledger.Tx) error { return fn(incidentsCounted{tx, s.inView, s.hide.Load()}) })
}

type incidentsCounted struct {
	ledger.Tx
	n    *atomic.Int64
	hide uint64
}

func (t incidentsCounted) Incidents(n int, before uint64) ([]*ledger.IncidentRecord, error) {
	out, err := t.Tx.Incidents(n, before)
	var kept []*ledger.IncidentRecord
	for _, inc := range out {
		if seq, _ := ledger.IncidentSeq(inc.ID); seq != t.hide || seq == 0 {
			kept = append(kept, inc)
		}
	}
	t.n.Add(int64(len(kept)))
	return kept, err
}

func (t incidentsCounted) Incident(seq uint64) (*ledger.IncidentRecord, error) {
	if seq == t.hide {
		return nil, ledger.ErrNotFound
	}
	inc, err := t.Tx.Incident(seq)
	if err == nil {
		t.n.Add(1)
	}
	return inc, err
}

// countedHarness is a harness whose store counts incident reads.
func countedHarness(t *testing.T) (*harness, incidentReads) {
	t.Helper()
	c := incidentReads{inUpdate: &atomic.Int64{}, inView: &atomic.Int64{}, hide: &atomic.Uint64{}}
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), logs: &syncbuf.Buffer{},
		wrap: func(s ledger.Store) ledger.Store { c.Store = s; return c }}
	t.Cleanup(h.sc.Close)
	h.set(time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC))
	h.open(t)
	return h, c
}

// openIncidents records n incidents on day (receipts under a revoked
// grant) and returns their rows.
func openIncidents(t *testing.T, h *harness, n int, day time.Time, prefix string) []*ledger.Row {
	t.Helper()
	if _, err := h.l.RevokeGrant(context.Background(), "a2agrant_REVOKED", time.Unix(0, 0), "", "writer-key", false); err != nil {
		t.Fatal(err)
	}
	var rows []*ledger.Row
	for i := range n {
		r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_REVOKED", Target: fmt.Sprintf("%s-%d", prefix, i), At: day})))
		if r.Status != ledger.Incident {
			t.Fatalf("row %d: %v, want INCIDENT", i, r.Status)
		}
		rows = append(rows, r)
	}
	return rows
}

// The incidents a sweep reads do not grow with every incident ever
// opened in its write transactions: it reads them once, and in each page's
// deleting transaction only those numbered after that read (here none:
// one record read to see it).
func TestASweepReadsOldIncidentsOnce(t *testing.T) {
	ctx := context.Background()
	h, c := countedHarness(t)
	const incidents, due, page = 60, 6, 2
	old := openIncidents(t, h, incidents, time.Date(2026, 10, 1, 10, 0, 0, 0, time.UTC), "R")
	for _, r := range old {
		if _, err := h.l.CloseIncident(ctx, r.IncidentID, "resolved", "admin"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range due {
		h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_D", Target: fmt.Sprintf("D-%d", i), At: time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)})))
	}
	h.drain(t)
	defer ledger.SetSweepPaging(1000, page)()
	// Past every row's date and every incident's close plus its period.
	h.set(h.clock().AddDate(2, 0, 0))
	c.inUpdate.Store(0)
	c.inView.Store(0)
	res, err := h.l.Sweep(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Swept) != due+incidents || len(res.Kept) != 0 {
		t.Fatalf("swept %d, kept %v; want the %d rows and the %d incidents' rows swept", len(res.Swept), ids(res.Kept), due, incidents)
	}
	pages := int64((due + incidents + page - 1) / page)
	inUpdate, inView := c.inUpdate.Load(), c.inView.Load()
	t.Logf("%d pages: %d incident records read in write transactions, %d in read transactions", pages, inUpdate, inView)
	if inUpdate > pages || inView > incidents+pages {
		t.Fatalf("a sweep of %d pages over %d incidents read %d incident records in its write transactions and %d in its read ones; want at most %d (one a page) and %d (each once, then one a page)",
			pages, incidents, inUpdate, inView, pages, incidents+pages)
	}
}

// Incidents opened while a sweep runs still hold the rows of their
// agent platform's day: one opened between a page's decision and its
// deleting transaction, and one whose number is below the highest the
// sweep read but which that read did not find (a transaction that took
// its number first and committed later).
func TestASweepSeesIncidentsOpenedWhileItRuns(t *testing.T) {
	for _, name := range []string{"between a page's decision and its deletion", "numbered before an incident the sweep read"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h, c := countedHarness(t)
			day := time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)
			var rows []*ledger.Row
			for i := range 4 {
				r, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{GrantID: "a2agrant_D", Target: fmt.Sprintf("D-%d", i), At: day})))
				rows = append(rows, r)
			}
			h.drain(t)
			defer ledger.SetSweepPaging(1000, 2)()
			h.set(rows[0].RetainUntil.Add(time.Hour))
			if name == "between a page's decision and its deletion" {
				var once atomic.Bool
				defer ledger.SetSweepHook(func() {
					if once.CompareAndSwap(false, true) {
						openIncidents(t, h, 1, day.Add(time.Hour), "HOOK")
					}
				})()
			} else {
				// INC-1 holds the rows' day, INC-2 another day; the sweep's
				// reads find INC-2 and not INC-1, its deleting transactions
				// both.
				openIncidents(t, h, 1, day.Add(time.Hour), "EARLY")
				openIncidents(t, h, 1, day.AddDate(0, 0, -3), "LATER")
				c.hide.Store(1)
			}
			res, err := h.l.Sweep(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if _, swept := ids(res.Swept)[r.ID]; swept {
					t.Fatalf("row %s of the incident's agent platform and day was swept (kept: %v)", r.Targets()[0], ids(res.Kept))
				}
				if _, err := h.l.Get(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
