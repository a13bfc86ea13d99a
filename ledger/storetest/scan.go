package storetest

import (
	"cmp"
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

// testScanCounts: both stores count and continue a bounded scan the same
// way. A call counts the index entries it passed over for its page: up to
// and including its last row when the page filled, else up to the bound
// or the last entry; the next call continues after that entry, so no
// entry is counted twice. A token comes back only when an entry follows:
// a call that reads exactly the entries left, matched or not, ends the
// listing.
func testScanCounts(t *testing.T, open opener) {
	s := open.fresh(t)
	const customer = "acct-48213"
	var rows []*ledger.Row
	n := 0
	// under adds k rows under target, newest last; mine says which are
	// the customer's.
	under := func(target string, k int, mine func(i int) bool) []bool {
		var matched []bool
		for i := range k {
			n++
			r := fixtureRows(1)[0]
			r.ID = hexID(fmt.Sprintf("count row %d", n))
			r.ReceiptID = "sha256:" + r.ID
			r.EvidenceSHA256 = hexID(fmt.Sprintf("count evidence %d", n))
			r.RequestJWTSHA256 = hexID(fmt.Sprintf("count request %d", n))
			at := base.Add(time.Duration(i) * time.Minute)
			r.Principal, r.IssuedAt, r.RecordedAt, r.RetainUntil = fmt.Sprintf("acct-%d", n), at, at, at.Add(24*time.Hour)
			if mine(i) {
				r.Principal = customer
			}
			r.Actions = []verifier.RowAction{{Tool: "orders.refund", Target: target}}
			rows = append(rows, r)
			matched = append(matched, mine(i))
		}
		slices.Reverse(matched) // newest first, as List reads them
		return matched
	}
	all := func(int) bool { return true }
	none := func(int) bool { return false }
	type call struct {
		rows, read int
		token      bool
	}
	// model is the listing as ledger.Rows documents it, over entries
	// newest first (true: the row matches).
	model := func(entries []bool, pageSize, bound int) []call {
		var calls []call
		pos := 0
		for {
			c := call{}
			for pos < len(entries) {
				if c.rows == pageSize || c.read == bound {
					c.token = true
					break
				}
				c.read++
				if entries[pos] {
					c.rows++
				}
				pos++
			}
			calls = append(calls, c)
			if !c.token {
				return calls
			}
		}
	}
	cases := []struct {
		name     string
		target   string
		entries  []bool
		pageSize int
		bound    int
		budget   int // in rows of size 10, ending a page as pageSize would
		want     []call
	}{
		// 30 rows of the customer's, 10 a page: 30 entries read in all.
		{name: "a page filled early", target: "C-30", entries: under("C-30", 30, all), pageSize: 10,
			want: []call{{10, 10, true}, {10, 10, true}, {10, 10, false}}},
		// Exactly the bound of entries, none the customer's: no token.
		{name: "the bound exactly, no match", target: "D-7", entries: under("D-7", 7, none), pageSize: 3, bound: 7,
			want: []call{{0, 7, false}}},
		{name: "one past the bound, no match", target: "D-8", entries: under("D-8", 8, none), pageSize: 3, bound: 7,
			want: []call{{0, 7, true}, {0, 1, false}}},
		{name: "a page full at the bound", target: "F-7", entries: under("F-7", 7, all), pageSize: 7, bound: 7,
			want: []call{{7, 7, false}}},
		{name: "every third the customer's", target: "M-12", entries: under("M-12", 12, func(i int) bool { return i%3 == 0 }),
			pageSize: 2, bound: 5},
		{name: "every third, pages of one", target: "M-13", entries: under("M-13", 13, func(i int) bool { return i%3 == 1 }),
			pageSize: 1, bound: 4},
		// A size budget ends a page at its last row kept, as a full page
		// does, in the same call.
		{name: "a budget of two rows", target: "C-30", pageSize: 10, budget: 25},
		{name: "a budget, every third the customer's", target: "M-12", pageSize: 5, budget: 15},
	}
	// The budget cases list targets of other cases.
	for i := range cases {
		for _, o := range cases[:i] {
			if cases[i].entries == nil && o.target == cases[i].target {
				cases[i].entries = o.entries
			}
		}
	}
	createRows(t, s, rows)
	for _, c := range cases {
		pageSize := c.pageSize
		if c.budget > 0 {
			pageSize = min(pageSize, max(1, c.budget/10))
		}
		m := model(c.entries, pageSize, cmp.Or(c.bound, ledger.MaxListRead))
		if c.want == nil {
			c.want = m
		} else if !slices.Equal(m, c.want) {
			t.Fatalf("%s: the model gives %v, the case wants %v", c.name, m, c.want)
		}
		read := 0
		q := ledger.Query{Target: c.target, Principal: customer, PageSize: c.pageSize, MaxRead: c.bound, Read: &read,
			Budget: c.budget, Size: func(*ledger.Row) int { return 10 }}
		var got []call
		for len(got) < len(c.want)+2 {
			var page []*ledger.Row
			var next string
			before := read
			view(t, s, func(tx ledger.Tx) error {
				var err error
				page, next, err = tx.List(q)
				return err
			})
			got = append(got, call{len(page), read - before, next != ""})
			if next == "" {
				break
			}
			q.PageToken = next
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: calls (rows, entries read, token) %v, want %v", c.name, got, c.want)
		}
	}
}
