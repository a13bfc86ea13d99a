package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
	"github.com/pactledger/pactledger/verifier"
)

// base is the issue time of the first fixture row.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// hexID returns a row id of the shape the ledger uses (a hex SHA-256),
// so ids sort in no relation to issue time.
// errKeepsBundles: the store's transactions do not drop evidence bundles.
var errKeepsBundles = errors.New("the store keeps every evidence bundle")

func hexID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var (
	statuses = []ledger.Status{ledger.Authorized, ledger.Unauthorized, ledger.Incident, ledger.Duplicate}
	classes  = []retention.Class{retention.MoneyMoved, retention.AccountChanged, retention.ReadOnly, retention.Refused, retention.Incident}
)

// fixtureRows returns n rows spread over every indexed field: three
// principals, four grants, two agent platforms, every status and class,
// five targets plus one shared by every seventh row (named twice in it),
// no action at all in every sixth row, issue times a minute apart except
// rows 10 to 12, which share one.
func fixtureRows(n int) []*ledger.Row {
	rows := make([]*ledger.Row, n)
	for i := range rows {
		issued := base.Add(time.Duration(i) * time.Minute)
		if i >= 10 && i <= 12 {
			issued = base.Add(10 * time.Minute)
		}
		r := &ledger.Row{
			ID:               hexID(fmt.Sprintf("row %d", i)),
			ReceiptID:        "sha256:" + hexID(fmt.Sprintf("row %d", i)),
			Kind:             ledger.KindReceipt,
			Status:           statuses[i%len(statuses)],
			GrantID:          fmt.Sprintf("grant-%d", i%4),
			Principal:        fmt.Sprintf("user-%d", i%3),
			Brand:            "airline",
			Agent:            ledger.Agent{Platform: fmt.Sprintf("https://pa-%d.example", i%2)},
			ScopesUsed:       []string{"orders:read"},
			IssuedAt:         issued,
			RecordedAt:       issued.Add(time.Second),
			Class:            classes[i%len(classes)],
			RetainUntil:      issued.Add(time.Duration(i%5+1) * 24 * time.Hour),
			Dispute:          ledger.DisputeNone,
			EvidenceSHA256:   hexID(fmt.Sprintf("evidence %d", i)),
			RequestJWTSHA256: hexID(fmt.Sprintf("request %d", i)),
			Verifier:         ledger.Record{CheckedBy: "storetest", CheckedAt: issued, Checks: []verifier.Check{{Name: verifier.CheckReceiptSignature, Result: verifier.Pass}}},
		}
		if i%6 != 5 {
			// Each target source, none (a row written before the ledger
			// recorded it) among them, reads back as written.
			sources := []verifier.TargetSource{verifier.TargetNotRecorded, verifier.TargetFromSignedArgs, verifier.TargetFromWriter}
			r.Actions = []verifier.RowAction{{Tool: "orders.get", Target: fmt.Sprintf("order-%d", i%5), TargetSource: sources[i%3]}}
		}
		if i%7 == 0 {
			shared := verifier.RowAction{Tool: "orders.refund", Target: "order-shared", TargetSource: verifier.TargetFromWriter}
			r.Actions = append(r.Actions, shared, shared)
		}
		rows[i] = r
	}
	return rows
}

// createRows writes rows, a few per transaction.
func createRows(t *testing.T, s ledger.Store, rows []*ledger.Row) {
	t.Helper()
	for chunk := range slices.Chunk(rows, 7) {
		update(t, s, func(tx ledger.Tx) error {
			for _, r := range chunk {
				if err := tx.CreateRow(r); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// filter returns the rows q selects, as the ledger documents ListRows:
// every non-empty field filters, since inclusive, until exclusive.
func filter(rows []*ledger.Row, q ledger.Query) []*ledger.Row {
	var out []*ledger.Row
	for _, r := range rows {
		switch {
		case q.Principal != "" && r.Principal != q.Principal,
			q.GrantID != "" && r.GrantID != q.GrantID,
			q.Agent != "" && r.Agent.Platform != q.Agent,
			q.Status != 0 && r.Status != q.Status,
			q.Class != 0 && r.Class != q.Class,
			q.Target != "" && !slices.Contains(r.Targets(), q.Target),
			!q.Since.IsZero() && r.IssuedAt.Before(q.Since),
			!q.Until.IsZero() && !r.IssuedAt.Before(q.Until):
			continue
		}
		out = append(out, r)
	}
	return out
}

// listAll pages through q and checks the pages: at most PageSize rows
// each, newest first across pages, every row once, exactly the rows want,
// each as written, and no more pages than the rows need plus one (a
// backend may hand out a token whose page turns out empty).
func listAll(t *testing.T, s ledger.Store, q ledger.Query, want []*ledger.Row) {
	t.Helper()
	var got []*ledger.Row
	pages := 0
	maxPages := (len(want)+q.PageSize-1)/q.PageSize + 1
	for {
		var page []*ledger.Row
		var next string
		view(t, s, func(tx ledger.Tx) error {
			var err error
			page, next, err = tx.List(q)
			return err
		})
		pages++
		if len(page) > q.PageSize {
			t.Fatalf("query %s: page of %d rows, want at most %d", show(q), len(page), q.PageSize)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		if pages >= maxPages {
			t.Fatalf("query %s: %d pages and still a token, for %d rows", show(q), pages, len(want))
		}
		q.PageToken = next
	}
	byID := map[string]*ledger.Row{}
	for _, r := range want {
		byID[r.ID] = r
	}
	seen := map[string]bool{}
	for i, r := range got {
		w, ok := byID[r.ID]
		switch {
		case seen[r.ID]:
			t.Errorf("query %s: row %s returned twice", show(q), r.ID)
		case !ok:
			t.Errorf("query %s: row %s returned, does not match", show(q), r.ID)
		case !same(r, w):
			t.Errorf("query %s: row %s\n got %s\nwant %s", show(q), r.ID, show(r), show(w))
		}
		seen[r.ID] = true
		if i > 0 && r.IssuedAt.After(got[i-1].IssuedAt) {
			t.Errorf("query %s: row %d (%s) is newer than row %d (%s): want newest first", show(q), i, r.IssuedAt, i-1, got[i-1].IssuedAt)
		}
	}
	for _, r := range want {
		if !seen[r.ID] {
			t.Errorf("query %s: row %s missing", show(q), r.ID)
		}
	}
}

// testRowsAndIndexes: every index (time, principal, grant, target, agent,
// status, class), alone, combined and with a since/until window, pages of
// 1 and 1000 rows, finds exactly the rows it should, newest first.
func testRowsAndIndexes(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(40)
	createRows(t, s, rows)

	view(t, s, func(tx ledger.Tx) error {
		for _, w := range rows {
			got, err := tx.Row(w.ID)
			if err != nil {
				return fmt.Errorf("row %s: %w", w.ID, err)
			}
			if !same(got, w) {
				t.Errorf("row %s\n got %s\nwant %s", w.ID, show(got), show(w))
			}
		}
		_, err := tx.Row(hexID("never written"))
		wantNotFound(t, "Row of an unknown id", err)
		return nil
	})

	window := ledger.Query{Since: base.Add(10 * time.Minute), Until: base.Add(20 * time.Minute)}
	queries := []struct {
		name string
		q    ledger.Query
	}{
		{"time", ledger.Query{}},
		{"principal", ledger.Query{Principal: "user-1"}},
		{"grant", ledger.Query{GrantID: "grant-2"}},
		{"target", ledger.Query{Target: "order-3"}},
		{"target named twice in a row", ledger.Query{Target: "order-shared"}},
		{"agent", ledger.Query{Agent: "https://pa-1.example"}},
		{"status", ledger.Query{Status: ledger.Incident}},
		{"class", ledger.Query{Class: retention.MoneyMoved}},
		{"since and until", window},
		{"since only", ledger.Query{Since: base.Add(30 * time.Minute)}},
		{"until only", ledger.Query{Until: base.Add(5 * time.Minute)}},
		{"principal and status", ledger.Query{Principal: "user-0", Status: ledger.Authorized}},
		{"target and grant", ledger.Query{Target: "order-1", GrantID: "grant-2"}},
		{"grant and agent", ledger.Query{GrantID: "grant-1", Agent: "https://pa-1.example"}},
		{"class and principal in a window", ledger.Query{Class: retention.AccountChanged, Principal: "user-1", Since: base.Add(5 * time.Minute), Until: base.Add(35 * time.Minute)}},
		{"unknown principal", ledger.Query{Principal: "nobody"}},
	}
	for _, c := range queries {
		want := filter(rows, c.q)
		if c.name != "unknown principal" && len(want) == 0 {
			t.Fatalf("%s: the fixture selects no row", c.name)
		}
		for _, size := range []int{1, 1000} {
			t.Run(fmt.Sprintf("%s/pageSize=%d", c.name, size), func(t *testing.T) {
				q := c.q
				q.PageSize = size
				listAll(t, s, q, want)
			})
		}
	}
}

// testPageTokens: a token continues its own query after rows written since
// (newer rows do not shift a page), and a token that is not base64 or
// belongs to another query is refused with ledger.ErrInvalid.
func testPageTokens(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(20)
	createRows(t, s, rows[:10])

	q := ledger.Query{Principal: "user-0", PageSize: 2}
	var first []*ledger.Row
	var next string
	view(t, s, func(tx ledger.Tx) error {
		var err error
		first, next, err = tx.List(q)
		return err
	})
	if next == "" || len(first) != 2 {
		t.Fatalf("first page: %d rows, token %q; want 2 rows and a token", len(first), next)
	}
	// Newer rows arrive between pages: the next page still continues after
	// the last row returned.
	createRows(t, s, rows[10:])
	q.PageToken = next
	var rest []*ledger.Row
	for {
		var page []*ledger.Row
		view(t, s, func(tx ledger.Tx) error {
			var err error
			page, next, err = tx.List(q)
			return err
		})
		rest = append(rest, page...)
		if next == "" {
			break
		}
		q.PageToken = next
	}
	var want []string
	for _, r := range filter(rows[:10], ledger.Query{Principal: "user-0"}) {
		if r.IssuedAt.Before(first[len(first)-1].IssuedAt) {
			want = append(want, r.ID)
		}
	}
	slices.Reverse(want)
	var got []string
	for _, r := range rest {
		got = append(got, r.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages after the first: got %v, want %v (older rows only, newest first)", got, want)
	}

	for _, c := range []struct {
		name string
		q    ledger.Query
	}{
		{"not base64", ledger.Query{PageSize: 5, PageToken: "%%%not a token%%%"}},
		{"token of another principal", ledger.Query{Principal: "user-1", PageSize: 5, PageToken: tokenOf(t, s, ledger.Query{Principal: "user-0", PageSize: 1})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.View(t.Context(), func(tx ledger.Tx) error {
				_, _, err := tx.List(c.q)
				return err
			})
			if !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("List with a bad token: got %v, want an error wrapping ledger.ErrInvalid", err)
			}
		})
	}
}

// tokenOf returns the token after the first page of q.
func tokenOf(t *testing.T, s ledger.Store, q ledger.Query) string {
	t.Helper()
	var next string
	view(t, s, func(tx ledger.Tx) error {
		var err error
		_, next, err = tx.List(q)
		return err
	})
	if next == "" {
		t.Fatalf("query %s: no token", show(q))
	}
	return next
}

// testRowsByID: RowsByID walks every row once in id order, in pages of 1
// and 1000; RowAfter finds the row at or after a key and wraps around.
func testRowsByID(t *testing.T, open opener) {
	s := open.fresh(t)
	view(t, s, func(tx ledger.Tx) error {
		r, err := tx.RowAfter("")
		if err != nil || r != nil {
			t.Errorf("RowAfter on an empty store: %v, %v; want nil, nil", r, err)
		}
		rows, next, err := tx.RowsByID("", 10)
		if err != nil || len(rows) != 0 || next != "" {
			t.Errorf("RowsByID on an empty store: %d rows, %q, %v", len(rows), next, err)
		}
		return nil
	})
	rows := fixtureRows(25)
	createRows(t, s, rows)
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	for _, n := range []int{1, 1000} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(ids)+1 {
				t.Fatalf("RowsByID pages of %d: no end after %d pages", n, pages)
			}
			var page []*ledger.Row
			view(t, s, func(tx ledger.Tx) error {
				var err error
				page, after, err = tx.RowsByID(after, n)
				return err
			})
			if len(page) > n {
				t.Fatalf("RowsByID(%d): %d rows", n, len(page))
			}
			for _, r := range page {
				got = append(got, r.ID)
			}
			if after == "" {
				break
			}
		}
		if !slices.Equal(got, ids) {
			t.Errorf("RowsByID in pages of %d: got %v, want %v", n, got, ids)
		}
	}
	view(t, s, func(tx ledger.Tx) error {
		for _, n := range []int{0, -1} {
			page, next, err := tx.RowsByID(ids[3], n)
			if err != nil || len(page) != 0 || next != "" {
				t.Errorf("RowsByID(%d): %d rows, %q, %v; want none", n, len(page), next, err)
			}
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		for _, c := range []struct{ key, want string }{
			{"", ids[0]},
			{ids[3], ids[3]},
			{ids[3] + "0", ids[4]},
			{ids[len(ids)-1] + "0", ids[0]}, // wraps around
		} {
			r, err := tx.RowAfter(c.key)
			if err != nil {
				return err
			}
			if r == nil || r.ID != c.want {
				t.Errorf("RowAfter(%q) = %v, want %s", c.key, r, c.want)
			}
		}
		return nil
	})
}

// testRowUpdates: UpdateDispute changes only the dispute fields,
// UpdateRetention sets retain-until (earlier too: the ledger decides it
// only grows) and moves the row's expiry entry, and neither moves the row
// in a list index; CreateRow refuses an id already taken and leaves the row as it
// was; evidence bundles and incident ids are kept.
func testRowUpdates(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(3)
	createRows(t, s, rows)
	r := rows[1]

	events := []ledger.DisputeEvent{{At: base.Add(time.Hour), Status: ledger.DisputeOpen, Note: "I never approved that", By: "support"}}
	update(t, s, func(tx ledger.Tx) error { return tx.UpdateDispute(r.ID, ledger.DisputeOpen, events) })
	want := *r
	want.Dispute, want.DisputeEvents = ledger.DisputeOpen, events

	later := r.RetainUntil.Add(365 * 24 * time.Hour)
	update(t, s, func(tx ledger.Tx) error { return tx.UpdateRetention(r.ID, later) })
	expiredAt := func(now time.Time) bool {
		t.Helper()
		var due []*ledger.Row
		view(t, s, func(tx ledger.Tx) error {
			var err error
			due, _, err = tx.Expired(now, "", 1000)
			return err
		})
		return slices.ContainsFunc(due, func(d *ledger.Row) bool { return d.ID == r.ID })
	}
	if expiredAt(r.RetainUntil) || !expiredAt(later) {
		t.Errorf("after UpdateRetention to %v: Expired does not follow the new retain-until", later)
	}
	earlier := r.RetainUntil.Add(-time.Hour)
	update(t, s, func(tx ledger.Tx) error { return tx.UpdateRetention(r.ID, earlier) })
	want.RetainUntil = earlier
	if !expiredAt(earlier) {
		t.Errorf("after UpdateRetention to the earlier %v: Expired does not list the row", earlier)
	}

	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Row(r.ID)
		if err != nil {
			return err
		}
		if !same(got, &want) {
			t.Errorf("after UpdateDispute and UpdateRetention\n got %s\nwant %s", show(got), show(&want))
		}
		return nil
	})
	listAll(t, s, ledger.Query{Principal: r.Principal, PageSize: 1000}, []*ledger.Row{&want})
	listAll(t, s, ledger.Query{Principal: "someone-else", PageSize: 1000}, nil)

	err := s.Update(t.Context(), func(tx ledger.Tx) error {
		again := *rows[0]
		again.Principal = "overwritten"
		return tx.CreateRow(&again)
	})
	if err == nil {
		t.Errorf("CreateRow of an id already taken succeeded")
	}
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Row(rows[0].ID)
		if err != nil {
			return err
		}
		if !same(got, rows[0]) {
			t.Errorf("row after a refused CreateRow\n got %s\nwant %s", show(got), show(rows[0]))
		}
		return nil
	})

	noIndexFindings(t, s)

	update(t, s, func(tx ledger.Tx) error { return tx.PutEvidence(r.ID, []byte(`{"receiptJws":"a.b.c"}`)) })
	view(t, s, func(tx ledger.Tx) error {
		b, err := tx.Evidence(r.ID)
		if err != nil {
			return err
		}
		if string(b) != `{"receiptJws":"a.b.c"}` {
			t.Errorf("Evidence = %q", b)
		}
		_, err = tx.Evidence(rows[2].ID)
		wantNotFound(t, "Evidence of a row without a bundle", err)
		return nil
	})

	// A store that drops bundles once their write-once copy is recorded
	// drops this one; dropping one that is not there is no error.
	drop := func(tx ledger.Tx) error {
		d, ok := tx.(ledger.EvidenceDropper)
		if !ok {
			return errKeepsBundles
		}
		return d.DropEvidence(r.ID)
	}
	var kept bool
	update(t, s, func(tx ledger.Tx) error {
		err := drop(tx)
		kept = errors.Is(err, errKeepsBundles)
		if kept {
			return nil
		}
		return err
	})
	if kept {
		return
	}
	update(t, s, drop)
	view(t, s, func(tx ledger.Tx) error {
		_, err := tx.Evidence(r.ID)
		wantNotFound(t, "Evidence after DropEvidence", err)
		if got, err := tx.Row(r.ID); err != nil || got.ID != r.ID {
			t.Errorf("the row after DropEvidence: %v %v", got, err)
		}
		return nil
	})
}

// testFarFutureTimes: the ledger takes times to the year 9000
// (verifier.MaxTime), past what int64 nanoseconds hold (April 2262). A
// row issued in 2300 lists newest and is found since 2200; a row kept
// until 2300 is not due in 2027.
func testFarFutureTimes(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(3)
	far := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	if !verifier.InRange(far) {
		t.Fatalf("%v is outside the ledger's time range", far)
	}
	rows[2].IssuedAt = far
	rows[1].RetainUntil = far
	createRows(t, s, rows)
	view(t, s, func(tx ledger.Tx) error {
		got, _, err := tx.List(ledger.Query{PageSize: 10})
		if err != nil {
			return err
		}
		if len(got) != 3 || got[0].ID != rows[2].ID {
			t.Errorf("List newest first: %d rows, in order %v; want the row issued in 2300 first", len(got), idsOf(got))
		}
		since, _, err := tx.List(ledger.Query{PageSize: 10, Since: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return err
		}
		if len(since) != 1 || since[0].ID != rows[2].ID {
			t.Errorf("List since 2200: %v; want the row issued in 2300", idsOf(since))
		}
		due, _, err := tx.Expired(base.AddDate(1, 0, 0), "", 10)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(due, func(r *ledger.Row) bool { return r.ID == rows[1].ID }) {
			t.Errorf("Expired in 2027 lists the row kept until 2300")
		}
		if got, err := tx.Row(rows[2].ID); err != nil || got.ID != rows[2].ID {
			t.Errorf("Row of the row issued in 2300: %v", err)
		}
		return nil
	})
	noIndexFindings(t, s)
}

// noIndexFindings checks that CheckIndexes finds nothing in s, whose
// rows only the store wrote.
func noIndexFindings(t *testing.T, s ledger.Store) {
	t.Helper()
	view(t, s, func(tx ledger.Tx) error {
		return tx.CheckIndexes(func(f ledger.IndexFinding) error {
			t.Errorf("CheckIndexes of rows only the store wrote: %+v", f)
			return nil
		})
	})
}

// idsOf is the ids of rows, in order.
func idsOf(rows []*ledger.Row) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}
