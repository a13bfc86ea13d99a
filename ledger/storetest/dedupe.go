package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// writers is how many goroutines race in the dedupe and group commit
// cases.
const writers = 64

// errSeen is what a racing writer's transaction returns when the row it
// would create is already there (the ledger answers ALREADY_RECORDED).
var errSeen = errors.New("row already recorded")

// testDedupeRace: many writers create the same row id at once, each in a
// transaction that checks Row first, as the ledger does: exactly one
// creates it, every other one sees it, and the stored row is the winner's.
func testDedupeRace(t *testing.T, open opener) {
	s := open.fresh(t)
	id := hexID("the same receipt")
	errs := atOnce(writers, func(i int) error {
		return s.Update(t.Context(), func(tx ledger.Tx) error {
			_, err := tx.Row(id)
			switch {
			case err == nil:
				return errSeen
			case !errors.Is(err, ledger.ErrNotFound):
				return err
			}
			r := fixtureRows(1)[0]
			r.ID, r.Principal = id, fmt.Sprintf("writer-%d", i)
			return tx.CreateRow(r)
		})
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("writers %d and %d both created row %s", winner, i, id)
		case err == nil:
			winner = i
		case !errors.Is(err, errSeen):
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer created row %s", id)
	}
	view(t, s, func(tx ledger.Tx) error {
		r, err := tx.Row(id)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("writer-%d", winner); r.Principal != want {
			t.Errorf("stored row was written by %s, want the winner %s", r.Principal, want)
		}
		rows, _, err := tx.List(ledger.Query{PageSize: 1000})
		if len(rows) != 1 {
			t.Errorf("List returns %d rows, want 1", len(rows))
		}
		return err
	})
}

// testRequestJWTIndex: the request-JWT index names the first row that
// used a request JWT, also when many rows with that request JWT race (each
// transaction asks the index first, as the ledger's dedupe does, and the
// rows that find a first one are recorded as its duplicates); sweeping a
// later row leaves the index on the first; sweeping the first clears it.
func testRequestJWTIndex(t *testing.T, open opener) {
	s := open.fresh(t)
	sha := hexID("one request JWT")
	view(t, s, func(tx ledger.Tx) error {
		first, err := tx.RowByRequestJWT(sha)
		if err != nil || first != "" {
			t.Errorf("RowByRequestJWT before any row: %q, %v; want \"\", nil", first, err)
		}
		return nil
	})
	rows := fixtureRows(writers)
	for _, r := range rows {
		r.RequestJWTSHA256 = sha
	}
	errs := atOnce(writers, func(i int) error {
		r := rows[i]
		return s.Update(t.Context(), func(tx ledger.Tx) error {
			first, err := tx.RowByRequestJWT(sha)
			if err != nil {
				return err
			}
			w := *r // fn may run again: never change the captured row
			w.Verifier.DuplicateOf = first
			if first != "" {
				w.Status = ledger.Duplicate
			}
			return tx.CreateRow(&w)
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	var first string
	view(t, s, func(tx ledger.Tx) error {
		var err error
		if first, err = tx.RowByRequestJWT(sha); err != nil {
			return err
		}
		originals := 0
		for _, r := range rows {
			got, err := tx.Row(r.ID)
			if err != nil {
				return err
			}
			switch {
			case got.Verifier.DuplicateOf == "":
				originals++
				if got.ID != first {
					t.Errorf("row %s found no earlier row but the index names %s", got.ID, first)
				}
			case got.Verifier.DuplicateOf != first:
				t.Errorf("row %s is a duplicate of %s, the index names %s", got.ID, got.Verifier.DuplicateOf, first)
			}
		}
		if originals != 1 {
			t.Errorf("%d rows found no earlier row with the request JWT, want 1", originals)
		}
		return nil
	})
	if first == "" {
		t.Fatal("RowByRequestJWT names no row")
	}

	var later, firstRow *ledger.Row
	for _, r := range rows {
		switch {
		case r.ID == first:
			firstRow = r
		case later == nil:
			later = r
		}
	}
	sweep(t, s, later)
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.RowByRequestJWT(sha)
		if err != nil || got != first {
			t.Errorf("after sweeping a later row: RowByRequestJWT = %q, %v; want the first row %s", got, err, first)
		}
		return nil
	})
	sweep(t, s, firstRow)
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.RowByRequestJWT(sha)
		if err != nil || got == first {
			t.Errorf("after sweeping the first row: RowByRequestJWT = %q, %v; want any row but the swept one", got, err)
		}
		return nil
	})
}

// testRequestJWTTakenOver: a forged copy (a row whose receipt signature
// failed) takes no request-JWT entry, but an earlier version gave it one.
// Many rows whose signatures passed then race with its request JWT, each
// transaction reading the entry and the row it names first, as the
// ledger's dedupe does: the copy is passed over, and its entry taken over
// (Row.RequestJWTTakenFrom). Exactly one row takes it and is the first
// use; every other one finds that row and is its duplicate. The entry
// stays that row's after a restart and once the copy is removed, and goes
// when that row is removed.
func testRequestJWTTakenOver(t *testing.T, open opener, earlier func(t *testing.T, dir, sha, id string)) {
	dir := t.TempDir()
	s := open.start(t, dir)
	sha := hexID("a request JWT an earlier version indexed")
	forged := fixtureRows(1)[0]
	forged.ID, forged.ReceiptID = hexID("a forged copy"), "sha256:"+hexID("a forged copy")
	forged.Status, forged.RequestJWTSHA256 = ledger.Unauthorized, sha
	forged.Verifier.Checks = []verifier.Check{{Name: verifier.CheckReceiptSignature, Result: verifier.Fail, Detail: "forged"}}
	update(t, s, func(tx ledger.Tx) error { return tx.CreateRow(forged) })
	entry := func(s ledger.Store) string {
		t.Helper()
		var id string
		view(t, s, func(tx ledger.Tx) error {
			var err error
			id, err = tx.RowByRequestJWT(sha)
			return err
		})
		return id
	}
	if got := entry(s); got != "" {
		t.Fatalf("this version indexed the forged copy: RowByRequestJWT = %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	earlier(t, dir, sha, forged.ID)
	s = open.start(t, dir)
	if got := entry(s); got != forged.ID {
		t.Fatalf("the entry an earlier version wrote: RowByRequestJWT = %q, want the forged copy %s", got, forged.ID)
	}

	rows := fixtureRows(writers)
	for _, r := range rows {
		r.RequestJWTSHA256 = sha
	}
	errs := atOnce(writers, func(i int) error {
		return s.Update(t.Context(), func(tx ledger.Tx) error {
			w := *rows[i] // fn may run again: never change the captured row
			first, err := tx.RowByRequestJWT(sha)
			if err != nil {
				return err
			}
			if first != "" {
				orig, err := tx.Row(first)
				switch {
				case err != nil:
					return err
				case orig.ReceiptVerified():
					w.Verifier.DuplicateOf, w.Status = first, ledger.Duplicate
				default:
					w.RequestJWTTakenFrom = map[string]string{sha: first}
				}
			}
			return tx.CreateRow(&w)
		})
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	first := entry(s)
	var firstRow *ledger.Row
	view(t, s, func(tx ledger.Tx) error {
		for _, r := range rows {
			got, err := tx.Row(r.ID)
			if err != nil {
				return err
			}
			switch {
			case got.Verifier.DuplicateOf == "" && firstRow != nil:
				t.Errorf("rows %s and %s both found no earlier row with the request JWT", firstRow.ID, got.ID)
			case got.Verifier.DuplicateOf == "":
				firstRow = got
			case got.Verifier.DuplicateOf != first:
				t.Errorf("row %s is a duplicate of %s, the index names %s", got.ID, got.Verifier.DuplicateOf, first)
			}
		}
		return nil
	})
	if firstRow == nil || firstRow.ID != first {
		t.Fatalf("the index names %q after the race, want the one row that found no earlier row", first)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open.start(t, dir)
	if got := entry(s); got != first {
		t.Errorf("after a restart: RowByRequestJWT = %q, want %s", got, first)
	}
	sweep(t, s, forged)
	if got := entry(s); got != first {
		t.Errorf("after removing the forged copy: RowByRequestJWT = %q, want %s", got, first)
	}
	sweep(t, s, firstRow)
	if got := entry(s); got == first {
		t.Errorf("after removing the first use: RowByRequestJWT = %q, want any row but the removed one", got)
	}
}

// sweep removes r with a tombstone and returns what became deletable.
func sweep(t *testing.T, s ledger.Store, r *ledger.Row) []ledger.Location {
	t.Helper()
	var locs []ledger.Location
	update(t, s, func(tx ledger.Tx) error {
		cur, err := tx.Row(r.ID)
		if err != nil {
			return err
		}
		locs, err = ledger.SweepRow(tx, cur, tombstoneOf(cur))
		return err
	})
	return locs
}

// tombstoneOf is the tombstone the sweeper leaves for r.
func tombstoneOf(r *ledger.Row) ledger.Tombstone {
	return ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, Class: r.Class, RetainUntil: r.RetainUntil, SweptAt: r.RetainUntil.Add(time.Hour)}
}

// testGrantHolds: writers at once under one grant, each holding the grant,
// then counting its rows and writing one of its own only when it counts
// fewer than two, as the ledger checks a countMax of two. Exactly two
// write: a writer counts only after every earlier holder's row is there
// (ledger.Rows HoldGrants). Four rounds, each under a grant of its own,
// so that a store whose transactions overlap only now and then shows a
// missing hold. A read transaction cannot hold a grant.
func testGrantHolds(t *testing.T, open opener) {
	s := open.fresh(t)
	for round := range 4 {
		grant := fmt.Sprint("grant-held-", round)
		errs := atOnce(writers, func(i int) error {
			return s.Update(t.Context(), func(tx ledger.Tx) error {
				if err := tx.HoldGrants(grant); err != nil {
					return err
				}
				under, _, err := tx.List(ledger.Query{GrantID: grant, PageSize: 10})
				if err != nil {
					return err
				}
				if len(under) >= 2 {
					return errSeen
				}
				r := fixtureRows(1)[0]
				r.ID, r.GrantID = hexID(fmt.Sprint(grant, " writer ", i)), grant
				return tx.CreateRow(r)
			})
		})
		wrote := 0
		for i, err := range errs {
			switch {
			case err == nil:
				wrote++
			case !errors.Is(err, errSeen):
				t.Errorf("%s, writer %d: %v", grant, i, err)
			}
		}
		view(t, s, func(tx ledger.Tx) error {
			under, _, err := tx.List(ledger.Query{GrantID: grant, PageSize: 10})
			if err != nil {
				return err
			}
			if wrote != 2 || len(under) != 2 {
				t.Errorf("%s: %d writers wrote and %d rows are stored under the grant, want 2 and 2", grant, wrote, len(under))
			}
			return nil
		})
	}
	view(t, s, func(tx ledger.Tx) error {
		if err := tx.HoldGrants("grant-held-0"); err == nil {
			t.Errorf("a read transaction held a grant")
		}
		return nil
	})
}
