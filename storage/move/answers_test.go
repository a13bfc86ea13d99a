package move_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/retention"
)

// answers is what a ledger answers, question by question, as JSON (an
// error as its kind), so that two ledgers can be compared.
type answers map[string]string

// set records the answer to q.
func (a answers) set(t *testing.T, q string, v any, err error) {
	t.Helper()
	var exp *ledger.ExpiredError
	switch {
	case errors.As(err, &exp):
		v, err = map[string]any{"expired": exp.Tombstone}, nil
	case errors.Is(err, ledger.ErrNotFound):
		v, err = "error: not found", nil
	case errors.Is(err, ledger.ErrNotLogged):
		v, err = "error: not logged", nil
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		t.Fatalf("%s: %v", q, merr)
	}
	a[q] = string(b)
}

// capture asks l (over store) every question a reader, an auditor, the
// uploader, the sweeper or fsck would, about the fixture's rows.
func capture(t *testing.T, f *fixture, l *ledger.Ledger, store ledger.Store) answers {
	t.Helper()
	ctx := t.Context()
	a := answers{}
	for _, id := range append(append([]string(nil), f.rows...), f.swept...) {
		r, err := l.Get(ctx, id)
		a.set(t, "row "+id, r, err)
		ev, err := l.Evidence(ctx, id)
		a.set(t, "evidence "+id, ev, err)
		p, err := l.Proof(ctx, id)
		a.set(t, "proof "+id, p, err)
	}
	for _, id := range f.rows[:3] {
		v, err := l.VerifyRow(ctx, id)
		a.set(t, "verify "+id, v, err)
	}
	var queries = map[string]ledger.Query{"all": {}, "class": {Class: retention.MoneyMoved}, "status": {Status: ledger.Authorized},
		"window": {Since: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}}
	for _, v := range f.targets {
		queries["target "+v] = ledger.Query{Target: v}
	}
	for _, v := range f.grants {
		queries["grant "+v] = ledger.Query{GrantID: v}
		g, err := l.Grant(ctx, v)
		if g != nil {
			tiesByID(g.Rows)
			for _, s := range [][]string{g.Principals, g.Agents, g.ScopesUsed} {
				sort.Strings(s)
			}
		}
		a.set(t, "grant "+v, g, err)
	}
	for _, v := range f.users {
		queries["principal "+v] = ledger.Query{Principal: v}
	}
	for name, q := range queries {
		a.set(t, "list "+name, tiesByID(listAll(t, l, q)), nil)
	}
	var incs []*ledger.IncidentRecord
	for tok := ""; ; {
		page, next, err := l.Incidents(ctx, 1, tok)
		if err != nil {
			t.Fatal(err)
		}
		incs = append(incs, page...)
		if tok = next; tok == "" {
			break
		}
	}
	a.set(t, "incidents", incs, nil)
	for _, inc := range incs {
		v, err := l.Incident(ctx, inc.ID)
		if v != nil {
			tiesByID(v.SameDay)
		}
		a.set(t, "incident "+inc.ID, v, err)
	}
	drills, _, err := l.Drills(ctx, 10, "")
	a.set(t, "drills", drills, err)
	ob, err := l.Outbox(ctx, 100, "")
	a.set(t, "outbox", ob, err)
	cp, err := l.Checkpoint(ctx)
	a.set(t, "checkpoint", string(cp), err)
	size, err := l.TreeSize(ctx)
	a.set(t, "tree size", size, err)
	leaves, err := l.Leaves(ctx, 0, int(size))
	a.set(t, "leaves", leaves, err)
	fsck, err := l.CheckIntegrity(ctx, 1000, "")
	a.set(t, "fsck", fsck, err)
	captureStore(t, f, store, a)
	return a
}

// captureStore asks store what the ledger's parts read directly.
func captureStore(t *testing.T, f *fixture, store ledger.Store, a answers) {
	t.Helper()
	err := store.View(t.Context(), func(tx ledger.Tx) error {
		q := func(name string, v any, err error) { a.set(t, name, v, err) }
		v1, err := tx.AccessLog(0, 100)
		q("access log", v1, err)
		v2, err := tx.SegmentPlans()
		q("segment plans", v2, err)
		v3, err := tx.Deletions(100)
		q("deletions", v3, err)
		v4, err := tx.Outbox(100)
		q("outbox entries", v4, err)
		v5, err := tx.DeadLetters(0, 100)
		q("dead letters", v5, err)
		v6, err := tx.OldestQueued()
		q("oldest queued", v6, err)
		v7, err := tx.PendingLeaves(100)
		q("pending leaves", v7, err)
		v8, _, err := tx.Expired(f.clock().Add(10*365*24*time.Hour), "", 1000)
		q("expired in ten years", ids(expiryTiesByID(v8)), err)
		v9, _, err := tx.RowsByID("", 1000)
		q("rows by id", ids(v9), err)
		snaps := map[string]bool{}
		for _, r := range v9 {
			snaps[r.BrandKey.JWKSSnapshot], snaps[r.Agent.JWKSSnapshot] = true, true
			id, err := tx.RowByRequestJWT(r.RequestJWTSHA256)
			q("request JWT "+r.RequestJWTSHA256, id, err)
		}
		for _, id := range sortedKeys(snaps) {
			s, err := tx.Snapshot(id)
			q("snapshot "+id, s, err)
			u, err := tx.SnapshotRetain(id)
			q("snapshot retain "+id, u.UnixNano(), err)
			used, err := tx.SnapshotInUse(id)
			q("snapshot in use "+id, used, err)
		}
		// The drill pool: the same rows at the same positions.
		n, first, last, err := tx.DrillPool()
		q("drill pool", []uint64{uint64(n), first, last}, err)
		var positions []uint64
		err = tx.DrillPoolPositions(func(p uint64) { positions = append(positions, p) })
		q("drill pool positions", positions, err)
		pooled, err := tx.DrillPoolRows(positions)
		byPosition := map[uint64]string{}
		for p, r := range pooled {
			byPosition[p] = r.ID
		}
		q("drill pool rows", byPosition, err)
		for _, id := range f.swept {
			tomb, err := tx.Tombstone(id)
			q("tombstone "+id, tomb, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func ids(rows []*ledger.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// tiesByID puts rows issued at the same instant in id order, and fails
// nothing: newest first is what both stores promise, and bbolt lists
// rows of one instant in id order where PostgreSQL lists them in reverse
// id order, so the comparison sets ties in one order.
func tiesByID(rows []*ledger.Row) []*ledger.Row {
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].IssuedAt.Equal(rows[j].IssuedAt) {
			return rows[i].IssuedAt.After(rows[j].IssuedAt)
		}
		return rows[i].ID < rows[j].ID
	})
	return rows
}

// expiryTiesByID orders rows by retain-until, and rows that expire at
// the same time by id: the stores order such ties differently.
func expiryTiesByID(rows []*ledger.Row) []*ledger.Row {
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].RetainUntil.Equal(rows[j].RetainUntil) {
			return rows[i].RetainUntil.Before(rows[j].RetainUntil)
		}
		return rows[i].ID < rows[j].ID
	})
	return rows
}

// listAll returns every page of q (four rows a page), concatenated.
func listAll(t *testing.T, l *ledger.Ledger, q ledger.Query) []*ledger.Row {
	t.Helper()
	q.PageSize = 4
	var out []*ledger.Row
	for {
		page, next, err := l.List(t.Context(), q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		q.PageToken = next
	}
}

// compare fails t for every question whose answer differs.
func compare(t *testing.T, want, got answers) {
	t.Helper()
	bad := 0
	for _, q := range sortedKeys(keysOf(want)) {
		if got[q] != want[q] {
			bad++
			if bad <= 10 {
				t.Errorf("%s:\n  bbolt:    %.600s\n  postgres: %.600s", q, want[q], got[q])
			}
		}
	}
	for q := range got {
		if _, ok := want[q]; !ok {
			t.Errorf("%s: asked of postgres only", q)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d answers differ", bad, len(want))
	}
}

func keysOf(a answers) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	return m
}

func (a answers) String() string { return fmt.Sprintf("%d answers", len(a)) }
