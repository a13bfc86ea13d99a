package ledger_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// A page bounded by size ends before the row that would pass the budget
// (holding one row at least), and its token lists the rest: together the
// pages hold every row once, in List's order.
func TestListWithinPagesBySize(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.append(t, in(h.sc.Mint(pacttest.Spec{Target: fmt.Sprintf("L-%d", i)})))
	}
	ctx := context.Background()
	q := ledger.Query{GrantID: "a2agrant_7Q2F"}
	all, _, err := h.l.List(ctx, q)
	if err != nil || len(all) != 5 {
		t.Fatalf("List: %d rows, %v", len(all), err)
	}
	ten := func(*ledger.Row) int { return 10 }
	for _, c := range []struct {
		budget int
		sizes  []int
	}{{25, []int{2, 2, 1}}, {5, []int{1, 1, 1, 1, 1}}, {50, []int{5}}} {
		var sizes []int
		var got []*ledger.Row
		for q.PageToken = ""; ; {
			read, before := 0, h.l.ListRead()
			q.Read = &read
			rows, next, err := h.l.ListWithin(ctx, q, c.budget, ten)
			if err != nil {
				t.Fatal(err)
			}
			// One call reads each row of its page once, never a row it
			// leaves to the next page.
			if read != len(rows) || h.l.ListRead()-before != int64(read) {
				t.Fatalf("budget %d: a page of %d rows read %d entries (ListRead %d), want %d", c.budget, len(rows), read, h.l.ListRead()-before, len(rows))
			}
			sizes = append(sizes, len(rows))
			got = append(got, rows...)
			if q.PageToken = next; next == "" {
				break
			}
		}
		if fmt.Sprint(sizes) != fmt.Sprint(c.sizes) || len(got) != len(all) {
			t.Fatalf("budget %d: pages of %v rows; want %v", c.budget, sizes, c.sizes)
		}
		for i := range all {
			if got[i].ID != all[i].ID {
				t.Fatalf("budget %d: row %d is %s, List's is %s", c.budget, i, got[i].ID, all[i].ID)
			}
		}
	}
}
