package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/retention"
)

// A drill report is served from the row store, where whoever can write
// the database could turn a failed drill into a passed one. The integrity
// check compares every uploaded report with its write-once copy.
func TestAnEditedDrillReportIsFound(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	id := "drill-20261007T131245.000000000Z-00000001"
	orig := []byte(`{"id":"` + id + `","kind":"dispute","checksPassed":3,"checksTotal":6,"reply":"We are treating it as unauthorized"}`)
	if err := h.l.SaveDrill(ctx, id, time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC), orig); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	if page := integrity(t, h); len(page.Findings) != 0 {
		t.Fatalf("findings before the edit: %+v", page.Findings)
	}
	edited := []byte(`{"id":"` + id + `","kind":"dispute","checksPassed":6,"checksTotal":6,"reply":"You authorized it"}`)
	h.tamper(t, func(tx *bbolt.Tx) error { return tx.Bucket([]byte("drills")).Put([]byte(id), edited) })
	page := integrity(t, h)
	if len(page.Findings) != 1 || page.Findings[0].RowID != "" || !strings.Contains(page.Findings[0].Problem, "drill report "+id) ||
		!strings.Contains(page.Findings[0].Problem, "differs from its write-once copy") {
		t.Fatalf("findings after the report was edited: %+v", page.Findings)
	}
}

// A drill report is kept as long as the longest receipt class, as the
// periods are configured: here account changed, 24 months.
func TestADrillReportKeepsAsLongAsTheLongestConfiguredClass(t *testing.T) {
	ctx := context.Background()
	h := &harness{sc: pacttest.NewScenario(jose.ES256, jose.ES256), dir: t.TempDir(), now: time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)}
	t.Cleanup(h.sc.Close)
	h.policy = retention.DefaultPolicy()
	h.policy.Periods[retention.AccountChanged] = retention.Period{Months: 24}
	h.open(t)
	started := h.clock()
	id := "drill-20261007T131245.000000000Z-00000002"
	if err := h.l.SaveDrill(ctx, id, started, []byte(`{"id":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	_, loc, err := h.l.Drill(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := started.AddDate(2, 0, 0); loc.RetainUntil.Before(want) {
		t.Fatalf("the report is kept until %s, before %s", loc.RetainUntil, want)
	}
}

// A page of drill reports bounded by size ends before the report that
// would pass the budget (holding one report at least), and its token lists
// the rest: together the pages hold every report once, in Drills' order.
func TestDrillsWithinPagesBySize(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	started := time.Date(2026, 10, 7, 13, 12, 45, 0, time.UTC)
	for i := range 5 {
		id := fmt.Sprintf("drill-20261007T1312%02d.000000000Z-0000000%d", i, i)
		if err := h.l.SaveDrill(ctx, id, started, []byte(`{"id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	all, _, err := h.l.Drills(ctx, 0, "")
	if err != nil || len(all) != 5 {
		t.Fatalf("Drills: %d reports, %v", len(all), err)
	}
	ten := func([]byte) int { return 10 }
	for _, c := range []struct {
		budget, pageSize int
		sizes            []int
	}{{25, 0, []int{2, 2, 1}}, {5, 0, []int{1, 1, 1, 1, 1}}, {50, 0, []int{5}}, {35, 2, []int{2, 2, 1}}} {
		var sizes []int
		var got [][]byte
		for token := ""; ; {
			page, next, err := h.l.DrillsWithin(ctx, c.pageSize, token, c.budget, ten)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(page))
			got = append(got, page...)
			if token = next; next == "" {
				break
			}
		}
		if fmt.Sprint(sizes) != fmt.Sprint(c.sizes) || len(got) != len(all) {
			t.Fatalf("budget %d, page size %d: pages of %v reports; want %v", c.budget, c.pageSize, sizes, c.sizes)
		}
		for i := range all {
			if string(got[i]) != string(all[i]) {
				t.Fatalf("budget %d: report %d is %s, Drills' is %s", c.budget, i, got[i], all[i])
			}
		}
	}
}
