package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// testBoundedScan: a page of List reads a bounded number of index
// entries, not only returns a bounded number of rows. A customer's row
// under order A-5531 sits behind rows that any writer may post under the
// same order for other principals, dated later: a query by the order and
// the customer reads at most q.ReadBound() entries a call, comes back
// short (empty) with a token while entries are left, and reaches the
// customer's row on a later page. Every combination of filters pages to
// exactly the rows it selects under a small bound, and the default bound
// is ledger.MaxListRead.
func testBoundedScan(t *testing.T, open opener) {
	s := open.fresh(t)
	const target, customer = "A-5531", "acct-48213"
	row := func(i int, principal, target string, at time.Time) *ledger.Row {
		r := fixtureRows(1)[0]
		r.ID = hexID(fmt.Sprintf("scan row %d", i))
		r.ReceiptID = "sha256:" + r.ID
		r.EvidenceSHA256 = hexID(fmt.Sprintf("scan evidence %d", i))
		r.RequestJWTSHA256 = hexID(fmt.Sprintf("scan request %d", i))
		r.Principal, r.IssuedAt, r.RecordedAt, r.RetainUntil = principal, at, at, at.Add(24*time.Hour)
		r.GrantID = fmt.Sprintf("grant-%d", i%3)
		r.Status = statuses[i%len(statuses)]
		r.Actions = []verifier.RowAction{{Tool: "orders.refund", Target: target}}
		return r
	}
	// The customer's row, then 60 later rows under the order for others,
	// and 10 of the customer's under other orders.
	rows := []*ledger.Row{row(0, customer, target, base)}
	for i := 1; i <= 60; i++ {
		rows = append(rows, row(i, fmt.Sprintf("acct-%d", i), target, base.Add(time.Duration(i)*time.Minute)))
	}
	for i := 61; i <= 70; i++ {
		rows = append(rows, row(i, customer, fmt.Sprintf("B-%d", i), base.Add(time.Duration(i)*time.Minute)))
	}
	createRows(t, s, rows)

	// The dispute lookup, 25 entries a call at most.
	const bound = 25
	read := 0
	q := ledger.Query{Target: target, Principal: customer, PageSize: 1, MaxRead: bound, Read: &read}
	var pages [][]*ledger.Row
	for {
		var page []*ledger.Row
		var next string
		before := read
		view(t, s, func(tx ledger.Tx) error {
			var err error
			page, next, err = tx.List(q)
			return err
		})
		if n := read - before; n > bound {
			t.Fatalf("page %d read %d entries, want at most %d", len(pages)+1, n, bound)
		}
		pages = append(pages, page)
		if next == "" {
			break
		}
		if len(pages) > 5 {
			t.Fatalf("%d pages and still a token, for 61 entries read %d at a time", len(pages), bound)
		}
		q.PageToken = next
	}
	if len(pages[0]) != 0 || len(pages) < 3 {
		t.Errorf("pages %v: want the first empty, with a token (the bound reached before the customer's row), and the row on the third", ids(pages))
	}
	if got := slices.Concat(pages...); len(got) != 1 || got[0].ID != rows[0].ID {
		t.Errorf("the lookup found %v, want only the customer's row %s", ids(pages), rows[0].ID)
	}
	if read < 61 || read > 61+len(pages) {
		t.Errorf("the lookup read %d entries in all, want the 61 under the order", read)
	}

	// Every combination pages to the rows it selects, whatever the bound.
	for _, c := range []ledger.Query{
		{Target: target, Principal: customer},
		{Target: target, GrantID: "grant-1"},
		{Target: target, Status: statuses[1]},
		{Principal: customer, Status: statuses[0]},
		{GrantID: "grant-2", Principal: "acct-5"},
		{Principal: customer, Since: base.Add(30 * time.Minute), Until: base.Add(65 * time.Minute)},
		{Target: target, Principal: "acct-7", Since: base.Add(time.Minute)},
		{Status: statuses[2], Until: base.Add(40 * time.Minute)},
		{Principal: customer},
		{},
	} {
		for _, bound := range []int{1, 7, 0} {
			c.MaxRead = bound
			c.PageSize = 3
			pageBounded(t, s, c, filter(rows, c))
		}
	}

	// With no bound asked, a call reads at most ledger.MaxListRead.
	if q := (ledger.Query{MaxRead: ledger.MaxListRead + 1}); q.ReadBound() != ledger.MaxListRead {
		t.Errorf("ReadBound of MaxRead %d = %d, want %d", q.MaxRead, q.ReadBound(), ledger.MaxListRead)
	}
}

// pageBounded pages through q, each call reading at most q.ReadBound()
// entries (q.Read counts them), and checks that the pages together are
// want, newest first, each row once.
func pageBounded(t *testing.T, s ledger.Store, q ledger.Query, want []*ledger.Row) {
	t.Helper()
	var got []*ledger.Row
	read, calls := 0, 0
	q.Read = &read
	for {
		var page []*ledger.Row
		var next string
		before := read
		view(t, s, func(tx ledger.Tx) error {
			var err error
			page, next, err = tx.List(q)
			return err
		})
		calls++
		if n := read - before; n > q.ReadBound() || n < len(page) {
			t.Fatalf("query %s: a call read %d entries for %d rows, want at most %d", show(q), n, len(page), q.ReadBound())
		}
		if len(page) > q.PageSize {
			t.Fatalf("query %s: page of %d rows, want at most %d", show(q), len(page), q.PageSize)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		if calls > 200 {
			t.Fatalf("query %s: %d calls and still a token", show(q), calls)
		}
		q.PageToken = next
	}
	slices.SortStableFunc(want, func(a, b *ledger.Row) int { return b.IssuedAt.Compare(a.IssuedAt) })
	var g, w []string
	for _, r := range got {
		g = append(g, r.ID)
	}
	for _, r := range want {
		w = append(w, r.ID)
	}
	if !slices.Equal(g, w) {
		t.Errorf("query %s: got %v, want %v", show(q), g, w)
	}
}

func ids(pages [][]*ledger.Row) [][]string {
	var out [][]string
	for _, p := range pages {
		var ids []string
		for _, r := range p {
			ids = append(ids, r.ID[:8])
		}
		out = append(out, ids)
	}
	return out
}
