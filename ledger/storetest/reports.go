package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// testDrills: drill reports come back as put, newest id first, in pages
// of 1 and 1000; an unknown id is ErrNotFound and a token that is not one
// is ErrInvalid.
func testDrills(t *testing.T, open opener) {
	s := open.fresh(t)
	view(t, s, func(tx ledger.Tx) error {
		out, next, err := tx.Drills(10, "")
		if err != nil || len(out) != 0 || next != "" {
			t.Errorf("Drills on an empty store: %d, %q, %v", len(out), next, err)
		}
		return nil
	})
	var ids []string
	for i := range 12 {
		// Ids sort by time, as the ledger makes them.
		ids = append(ids, base.Add(time.Duration(i)*24*time.Hour).Format("20060102T150405Z")+fmt.Sprintf("-%02d", i))
	}
	for _, i := range []int{3, 0, 11, 5, 1, 2, 4, 10, 6, 9, 8, 7} { // put out of order
		update(t, s, func(tx ledger.Tx) error { return tx.PutDrill(ids[i], []byte(`{"id":"`+ids[i]+`"}`)) })
	}
	var want []string
	for _, id := range slices.Backward(ids) {
		want = append(want, `{"id":"`+id+`"}`)
	}
	newest := want
	for _, n := range []int{1, 5, 1000} {
		got := pageAll(t, n, len(newest), func(tok string) ([]string, string) {
			var page [][]byte
			var next string
			view(t, s, func(tx ledger.Tx) error {
				var err error
				page, next, err = tx.Drills(n, tok)
				return err
			})
			var out []string
			for _, b := range page {
				out = append(out, string(b))
			}
			return out, next
		})
		if !slices.Equal(got, newest) {
			t.Errorf("Drills in pages of %d:\n got %v\nwant %v", n, got, newest)
		}
	}
	view(t, s, func(tx ledger.Tx) error {
		b, err := tx.Drill(ids[4])
		if err != nil || string(b) != `{"id":"`+ids[4]+`"}` {
			t.Errorf("Drill(%s) = %q, %v", ids[4], b, err)
		}
		_, err = tx.Drill("19990101T000000Z")
		wantNotFound(t, "Drill of an unknown id", err)
		_, _, err = tx.Drills(5, "%%%not a token%%%")
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Drills with a bad token: %v, want an error wrapping ledger.ErrInvalid", err)
		}
		return nil
	})
}

// pageAll pages with fetch from the start and returns everything; pages
// hold at most n items, and there are no more of them than total needs
// plus one.
func pageAll[T any](t *testing.T, n, total int, fetch func(token string) ([]T, string)) []T {
	t.Helper()
	var out []T
	tok := ""
	for pages := 1; ; pages++ {
		page, next := fetch(tok)
		if len(page) > n {
			t.Fatalf("page of %d, want at most %d", len(page), n)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		if pages > (total+n-1)/n {
			t.Fatalf("%d pages and still a token, for %d items in pages of %d", pages, total, n)
		}
		tok = next
	}
}

// newIncident allocates an incident number in tx and writes a record
// for it, with the id the ledger gives it.
func newIncident(tx ledger.Tx, reason string) (uint64, error) {
	seq, err := tx.NextIncidentSeq()
	if err != nil {
		return 0, err
	}
	id := ledger.IncidentID(seq)
	return seq, tx.PutIncident(seq, ledger.IncidentRecord{ID: id, RowID: hexID(id), Reason: reason, OpenedAt: base})
}

// incidentIDs returns the ids of incs.
func incidentIDs(incs []*ledger.IncidentRecord) []string {
	var out []string
	for _, inc := range incs {
		out = append(out, inc.ID)
	}
	return out
}

// testIncidents: NextIncidentSeq hands out distinct, increasing numbers
// (also to concurrent writers), PutIncident and Incident keep a record
// under its number (a rewrite replaces it, as closing does), and Incidents
// pages newest first, by number (INC-10 after INC-9), below a number.
func testIncidents(t *testing.T, open opener) {
	s := open.fresh(t)
	var mu sync.Mutex
	var seqs []uint64
	var wg sync.WaitGroup
	errs := make([]error, 12)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(tx ledger.Tx) error {
				seq, err := newIncident(tx, "scope beyond grant")
				if err != nil {
					return err
				}
				// Record the number only once the fn is done: it may run again.
				mu.Lock()
				seqs = append(seqs, seq)
				mu.Unlock()
				return nil
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	view(t, s, func(tx ledger.Tx) error {
		all, err := tx.Incidents(1000, 0)
		if err != nil {
			return err
		}
		if len(all) != len(errs) {
			t.Fatalf("Incidents: %d, want %d", len(all), len(errs))
		}
		seen := map[string]bool{}
		for _, inc := range all {
			if seen[inc.ID] {
				t.Errorf("incident id %s handed out twice", inc.ID)
			}
			seen[inc.ID] = true
		}
		return nil
	})

	// Numbers made one at a time increase and decide the page order.
	var latest []string
	last := slices.Max(seqs)
	for range 3 {
		var seq uint64
		update(t, s, func(tx ledger.Tx) error {
			var err error
			seq, err = newIncident(tx, "args hash mismatch")
			return err
		})
		if seq <= last {
			t.Errorf("NextIncidentSeq = %d after %d: want larger", seq, last)
		}
		last = seq
		latest = append([]string{ledger.IncidentID(seq)}, latest...)
	}
	var all []*ledger.IncidentRecord
	view(t, s, func(tx ledger.Tx) error {
		var err error
		all, err = tx.Incidents(1000, 0)
		return err
	})
	order := incidentIDs(all)
	if len(order) != len(errs)+3 {
		t.Fatalf("Incidents: %v", order)
	}
	if !slices.Equal(order[:3], latest) {
		t.Errorf("Incidents starts %v, want the three allocated last, newest first: %v", order[:3], latest)
	}
	var ids []string
	for _, seq := range seqs {
		ids = append(ids, ledger.IncidentID(seq))
	}
	slices.Sort(ids)
	rest := slices.Clone(order[3:])
	slices.Sort(rest)
	if !slices.Equal(rest, ids) {
		t.Errorf("Incidents holds %v, want the concurrent writers' %v", rest, ids)
	}

	closed := *all[1]
	closedSeq, err := ledger.IncidentSeq(closed.ID)
	if err != nil {
		t.Fatal(err)
	}
	closed.ClosedAt, closed.ClosedBy, closed.RetainUntil = base.Add(time.Hour), "support", base.Add(365*24*time.Hour)
	closed.Day, closed.GrantSHA256, closed.HoldsUntil = base.Format("2006-01-02"), "sha256:"+hexID("grant"), base.Add(300*24*time.Hour)
	update(t, s, func(tx ledger.Tx) error { return tx.PutIncident(closedSeq, closed) })
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Incident(closedSeq)
		if err != nil {
			return err
		}
		if !same(got, &closed) {
			t.Errorf("Incident after a rewrite\n got %s\nwant %s", show(got), show(&closed))
		}
		_, err = tx.Incident(999999)
		wantNotFound(t, "Incident of an unknown number", err)
		return nil
	})
	for _, n := range []int{1, 4, 1000} {
		got := pageAll(t, n, len(order), func(tok string) ([]string, string) {
			var before uint64
			if tok != "" {
				var err error
				if before, err = ledger.IncidentSeq(tok); err != nil {
					t.Fatal(err)
				}
			}
			var page []*ledger.IncidentRecord
			view(t, s, func(tx ledger.Tx) error {
				var err error
				page, err = tx.Incidents(n, before)
				return err
			})
			next := ""
			if len(page) == n {
				next = page[n-1].ID
			}
			return incidentIDs(page), next
		})
		if !slices.Equal(got, order) {
			t.Errorf("Incidents in pages of %d: %v, want %v", n, got, order)
		}
	}
}
