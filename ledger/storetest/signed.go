package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// signedFixture returns forged rows (their receipt signature failed) and
// signed rows (it passed) under one grant, in the proportion a writer
// posting forged rows under a customer's grant makes them, with a
// refusal and a receipt of no such check among them, and signed rows of
// another grant; times tie in threes.
func signedFixture() (rows []*ledger.Row, signed int) {
	rows = fixtureRows(60)
	for i, r := range rows {
		r.GrantID = "grant-busy"
		result := verifier.Fail
		switch {
		case i%5 == 0:
			result = verifier.Pass
		case i == 7:
			r.GrantID = "grant-other"
			result = verifier.Pass
		}
		r.IssuedAt = base.Add(time.Duration(i/3) * time.Minute)
		r.Verifier.Checks = []verifier.Check{{Name: verifier.CheckReceiptSignature, Result: result}}
		switch i {
		case 11:
			r.Verifier.Checks = nil
		case 20:
			r.Kind = ledger.KindRefusal // a refusal's checks never make it count
		}
		if r.ReceiptVerified() && r.GrantID == "grant-busy" {
			signed++
		}
	}
	return rows, signed
}

// testSignedRows: List with Signed and a grant returns only the grant's
// receipt rows whose receipt signature passed, newest first, in pages,
// with any other filter and window; it reads an index entry a row it
// returns, none for the grant's forged rows; a removed row leaves it; a
// restart keeps it; Signed without a grant is refused with
// ledger.ErrInvalid.
func testSignedRows(t *testing.T, open opener) {
	dir := t.TempDir()
	s := open.start(t, dir)
	rows, signed := signedFixture()
	createRows(t, s, rows)
	signedOf := func(rows []*ledger.Row, q ledger.Query) []*ledger.Row {
		var out []*ledger.Row
		for _, r := range filter(rows, q) {
			if r.ReceiptVerified() {
				out = append(out, r)
			}
		}
		return out
	}
	queries := []struct {
		name string
		q    ledger.Query
	}{
		{"grant", ledger.Query{GrantID: "grant-busy", Signed: true}},
		{"grant in a window", ledger.Query{GrantID: "grant-busy", Signed: true, Since: base.Add(3 * time.Minute), Until: base.Add(15 * time.Minute)}},
		{"grant and principal", ledger.Query{GrantID: "grant-busy", Signed: true, Principal: "user-0"}},
		{"grant and target", ledger.Query{GrantID: "grant-busy", Signed: true, Target: "order-0"}},
		{"another grant", ledger.Query{GrantID: "grant-other", Signed: true}},
	}
	check := func(s ledger.Store, rows []*ledger.Row) {
		t.Helper()
		for _, c := range queries {
			want := signedOf(rows, c.q)
			if len(want) == 0 {
				t.Fatalf("%s: the fixture selects no row", c.name)
			}
			for _, size := range []int{1, 2, 1000} {
				t.Run(fmt.Sprintf("%s/pageSize=%d", c.name, size), func(t *testing.T) {
					q := c.q
					q.PageSize = size
					listAll(t, s, q, want)
				})
			}
		}
	}
	check(s, rows)
	// One page of the grant's signed rows reads their entries and no
	// other: the forged rows are not in the index it reads.
	read := 0
	view(t, s, func(tx ledger.Tx) error {
		page, next, err := tx.List(ledger.Query{GrantID: "grant-busy", Signed: true, PageSize: 1000, Read: &read})
		if err == nil && (len(page) != signed || next != "") {
			err = fmt.Errorf("one page of the grant's signed rows: %d rows, token %q; want %d, none", len(page), next, signed)
		}
		return err
	})
	if read != signed {
		t.Errorf("the listing of %d signed rows among %d under the grant read %d entries, want %d", signed, len(rows)-1, read, signed)
	}
	// A removed signed row leaves the listing with its row.
	gone := rows[10]
	if !gone.ReceiptVerified() {
		t.Fatal("the fixture's row 10 is not signed")
	}
	update(t, s, func(tx ledger.Tx) error {
		return tx.RemoveRow(gone, ledger.Tombstone{ID: gone.ID, Kind: gone.Kind, Status: gone.Status, Class: gone.Class, SweptAt: gone.RetainUntil})
	})
	rest := append(rows[:10:10], rows[11:]...)
	check(s, rest)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open.start(t, dir)
	check(s, rest)
	err := s.View(t.Context(), func(tx ledger.Tx) error {
		_, _, err := tx.List(ledger.Query{Signed: true, PageSize: 10})
		return err
	})
	if !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("List of signed rows without a grant: %v, want an error wrapping ledger.ErrInvalid", err)
	}
}
