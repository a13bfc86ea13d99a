package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/verifier"
)

// snapshot returns a JWKS snapshot of body.
func snapshot(body string) verifier.Snapshot {
	return verifier.NewSnapshot("https://brand.example/jwks.json", base, []byte(`{"keys":[`+body+`]}`))
}

// testTombstones: the ledger's SweepRow (RemoveRow with the snapshot
// links, reference counts and object records under it) removes a row from every read (Row, every
// index, Expired, its evidence bundle), leaves its tombstone, and queues
// for deletion exactly the objects no remaining row needs: a row's own
// evidence object at once, a segment once its last row is swept (the
// whole object: offset and length zero), a JWKS snapshot once no row
// names it. Deletions lists the queue; Deleted takes an object off it.
func testTombstones(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(3)
	a, b, c := rows[0], rows[1], rows[2]
	shared, onlyA := snapshot(`"shared"`), snapshot(`"only a"`)
	a.BrandKey.JWKSSnapshot, a.Agent.JWKSSnapshot = shared.ID, onlyA.ID
	b.BrandKey.JWKSSnapshot = shared.ID
	c.BrandKey.JWKSSnapshot, c.Agent.JWKSSnapshot = shared.ID, shared.ID // one row naming it twice counts once

	segment := ledger.Location{Store: "s3", Bucket: "evidence", Key: "segments/2026-03-02/0001", VersionID: "v-seg", RetainUntil: base.Add(48 * time.Hour), Uploaded: true}
	locs := map[string]ledger.Location{
		ledger.EvidenceKey(a.ID):      withPart(segment, 0, 100),
		ledger.EvidenceKey(b.ID):      withPart(segment, 100, 50),
		ledger.EvidenceKey(c.ID):      {Store: "s3", Bucket: "evidence", Key: ledger.EvidenceKey(c.ID), VersionID: "v-c", RetainUntil: base.Add(72 * time.Hour), Uploaded: true},
		ledger.SnapshotKey(shared.ID): {Store: "s3", Bucket: "evidence", Key: ledger.SnapshotKey(shared.ID), VersionID: "v-shared", RetainUntil: base.Add(96 * time.Hour), Uploaded: true},
		ledger.SnapshotKey(onlyA.ID):  {Store: "s3", Bucket: "evidence", Key: ledger.SnapshotKey(onlyA.ID), VersionID: "v-only-a", RetainUntil: base.Add(96 * time.Hour), Uploaded: true},
	}
	update(t, s, func(tx ledger.Tx) error {
		for _, snap := range []verifier.Snapshot{shared, onlyA} {
			if _, err := tx.PutSnapshot(snap); err != nil {
				return err
			}
			if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectJWKS, Ref: snap.ID, Key: ledger.SnapshotKey(snap.ID)}, base); err != nil {
				return err
			}
		}
		for _, r := range rows {
			if err := ledger.AddRow(tx, r); err != nil {
				return err
			}
			if err := tx.PutEvidence(r.ID, []byte(`{"receiptJws":"`+r.ID+`"}`)); err != nil {
				return err
			}
			if err := tx.Enqueue(ledger.OutboxEntry{Kind: ledger.ObjectEvidence, Ref: r.ID, Key: ledger.EvidenceKey(r.ID), Segment: r != c}, base); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		entries, err := tx.Outbox(100)
		if err != nil {
			return err
		}
		// All at once, as the uploader records a round: the segment's two
		// members are counted together.
		var at []ledger.Location
		for _, e := range entries {
			at = append(at, locs[e.Key])
		}
		return ledger.RecordUploads(tx, entries, at)
	})

	checkDeletable(t, "sweeping a (its segment still holds b; one snapshot only it named)", sweep(t, s, a),
		locs[ledger.SnapshotKey(onlyA.ID)])
	checkSwept(t, s, a, rows[1:])
	checkDeletable(t, "sweeping b (the last row of the segment)", sweep(t, s, b),
		withPart(segment, 0, 0))
	checkSwept(t, s, b, rows[2:])
	checkDeletable(t, "sweeping c (its own object; the last row naming the shared snapshot)", sweep(t, s, c),
		locs[ledger.EvidenceKey(c.ID)], locs[ledger.SnapshotKey(shared.ID)])
	checkSwept(t, s, c, nil)

	var queued []ledger.Location
	view(t, s, func(tx ledger.Tx) error {
		var err error
		queued, err = tx.Deletions(100)
		return err
	})
	checkDeletable(t, "Deletions", queued, locs[ledger.SnapshotKey(onlyA.ID)], withPart(segment, 0, 0), locs[ledger.EvidenceKey(c.ID)], locs[ledger.SnapshotKey(shared.ID)])
	update(t, s, func(tx ledger.Tx) error { return tx.Deleted(segment.Key) })
	view(t, s, func(tx ledger.Tx) error {
		var err error
		queued, err = tx.Deletions(100)
		return err
	})
	checkDeletable(t, "Deletions after one was deleted", queued, locs[ledger.SnapshotKey(onlyA.ID)], locs[ledger.EvidenceKey(c.ID)], locs[ledger.SnapshotKey(shared.ID)])
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Deletions(2)
		if err != nil || len(got) != 2 {
			t.Errorf("Deletions(2): %d, %v", len(got), err)
		}
		_, err = tx.Tombstone(hexID("never written"))
		wantNotFound(t, "Tombstone of an unknown id", err)
		return nil
	})
}

func withPart(loc ledger.Location, off, n uint32) ledger.Location {
	loc.Offset, loc.Length = off, n
	return loc
}

// checkDeletable fails the test unless got holds exactly want, in any
// order.
func checkDeletable(t *testing.T, what string, got []ledger.Location, want ...ledger.Location) {
	t.Helper()
	key := func(l ledger.Location) string { return show(l) }
	g, w := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		g[i] = key(got[i])
	}
	for i := range want {
		w[i] = key(want[i])
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s: deletable\n got %v\nwant %v", what, g, w)
	}
}

// checkSwept checks that r is gone from every read and left its
// tombstone, and that the rows left are what every index finds.
func checkSwept(t *testing.T, s ledger.Store, r *ledger.Row, left []*ledger.Row) {
	t.Helper()
	view(t, s, func(tx ledger.Tx) error {
		_, err := tx.Row(r.ID)
		wantNotFound(t, "Row of a swept row", err)
		_, err = tx.Evidence(r.ID)
		wantNotFound(t, "Evidence of a swept row", err)
		tomb, err := tx.Tombstone(r.ID)
		if err != nil {
			return fmt.Errorf("tombstone of %s: %w", r.ID, err)
		}
		if want := tombstoneOf(r); !same(tomb, want) {
			t.Errorf("tombstone\n got %s\nwant %s", show(tomb), show(want))
		}
		expired, _, err := tx.Expired(base.Add(365*24*time.Hour), "", 1000)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(expired, func(e *ledger.Row) bool { return e.ID == r.ID }) {
			t.Errorf("Expired still lists swept row %s", r.ID)
		}
		return nil
	})
	for _, q := range []ledger.Query{
		{}, {Principal: r.Principal}, {GrantID: r.GrantID}, {Agent: r.Agent.Platform},
		{Status: r.Status}, {Class: r.Class}, {Target: firstTarget(r)},
	} {
		q.PageSize = 1000
		listAll(t, s, q, filter(left, q))
	}
}

func firstTarget(r *ledger.Row) string {
	if ts := r.Targets(); len(ts) > 0 {
		return ts[0]
	}
	return ""
}

// testExpired: Expired finds the rows whose retain-until is at or before
// now, soonest first, in pages of 1 and 1000; a row whose retention was
// extended moves out; a row without a retain-until never shows.
func testExpired(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(20)
	rows[4].RetainUntil = time.Time{} // an open incident's row: held, not due
	createRows(t, s, rows)
	now := base.Add(3 * 24 * time.Hour)
	update(t, s, func(tx ledger.Tx) error { return tx.UpdateRetention(rows[0].ID, now.Add(time.Hour)) })

	var want []string
	for _, r := range rows {
		if r != rows[0] && !r.RetainUntil.IsZero() && !r.RetainUntil.After(now) {
			want = append(want, r.ID)
		}
	}
	if len(want) < 3 {
		t.Fatalf("the fixture has %d due rows", len(want))
	}
	for _, n := range []int{1, 1000} {
		var got []*ledger.Row
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("Expired in pages of %d: no end", n)
			}
			var page []*ledger.Row
			view(t, s, func(tx ledger.Tx) error {
				var err error
				page, after, err = tx.Expired(now, after, n)
				return err
			})
			if len(page) > n {
				t.Fatalf("Expired(%d): %d rows", n, len(page))
			}
			got = append(got, page...)
			if after == "" {
				break
			}
		}
		var ids []string
		for i, r := range got {
			ids = append(ids, r.ID)
			if i > 0 && r.RetainUntil.Before(got[i-1].RetainUntil) {
				t.Errorf("Expired in pages of %d: row %d is due before row %d: want soonest first", n, i, i-1)
			}
		}
		slices.Sort(ids)
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Errorf("Expired in pages of %d: got %v, want %v", n, ids, want)
		}
	}
}

// testHolds: Count(RefHold) counts the open incidents holding an object, one
// counter per key, back to zero; concurrent increments are all counted.
func testHolds(t *testing.T, open opener) {
	s := open.fresh(t)
	add := func(key string, delta int) int {
		t.Helper()
		var n int
		update(t, s, func(tx ledger.Tx) error {
			var err error
			n, err = tx.Count(ledger.RefHold, key, delta)
			return err
		})
		return n
	}
	k1, k2 := ledger.EvidenceKey(hexID("held")), ledger.SnapshotKey(hexID("held"))
	for i, c := range []struct {
		key   string
		delta int
		want  int
	}{
		{k1, 1, 1}, {k1, 1, 2}, {k2, 1, 1}, {k1, -1, 1}, {k1, -1, 0}, {k2, 0, 1}, {k1, 1, 1}, {k2, -1, 0},
	} {
		if got := add(c.key, c.delta); got != c.want {
			t.Errorf("step %d: Count(hold, %s, %d) = %d, want %d", i, c.key, c.delta, got, c.want)
		}
	}
	k3 := ledger.EvidenceKey(hexID("held by many"))
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(tx ledger.Tx) error {
				_, err := tx.Count(ledger.RefHold, k3, 1)
				return err
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := add(k3, 0); got != writers {
		t.Errorf("after %d concurrent holds: count %d", writers, got)
	}
}

// testSnapshots: PutSnapshot reports a snapshot new exactly once (also
// when many writers put it at once), Snapshot returns it as put, and its
// recorded retain-until is zero until set.
func testSnapshots(t *testing.T, open opener) {
	s := open.fresh(t)
	snap := snapshot(`{"kty":"EC","crv":"P-256","x":"x","y":"y","kid":"k1"}`)
	view(t, s, func(tx ledger.Tx) error {
		_, err := tx.Snapshot(snap.ID)
		wantNotFound(t, "Snapshot before it was put", err)
		at, err := tx.SnapshotRetain(snap.ID)
		if err != nil || !at.IsZero() {
			t.Errorf("SnapshotRetain before it was set: %v, %v; want zero", at, err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		for i, want := range []bool{true, false} {
			isNew, err := tx.PutSnapshot(snap)
			if err != nil {
				return err
			}
			if isNew != want {
				t.Errorf("PutSnapshot #%d in one transaction: new = %v, want %v", i+1, isNew, want)
			}
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		isNew, err := tx.PutSnapshot(snap)
		if err == nil && isNew {
			t.Errorf("PutSnapshot in a later transaction: new = true")
		}
		return err
	})
	retain := base.Add(540 * 24 * time.Hour)
	update(t, s, func(tx ledger.Tx) error { return tx.SetSnapshotRetain(snap.ID, retain) })
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Snapshot(snap.ID)
		if err != nil {
			return err
		}
		if !same(got, snap) {
			t.Errorf("Snapshot\n got %s\nwant %s", show(got), show(snap))
		}
		at, err := tx.SnapshotRetain(snap.ID)
		if err != nil || !at.Equal(retain) {
			t.Errorf("SnapshotRetain = %v, %v; want %v", at, err, retain)
		}
		return nil
	})

	racy := snapshot(`"raced"`)
	var wg sync.WaitGroup
	news := make([]bool, writers)
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(tx ledger.Tx) error {
				var err error
				news[i], err = tx.PutSnapshot(racy)
				return err
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(news, func(b bool) bool { return !b })); n != 1 {
		t.Errorf("%d of %d concurrent writers found the snapshot new, want 1", n, writers)
	}
}

// testRevocations: a grant has no revocation until one is put; the latest
// put is returned.
func testRevocations(t *testing.T, open opener) {
	s := open.fresh(t)
	want := ledger.Revocation{RevokedAt: base, By: "support", Note: "customer asked", RecordedAt: base.Add(time.Minute)}
	view(t, s, func(tx ledger.Tx) error {
		r, err := tx.Revocation("grant-1")
		if err != nil || r != nil {
			t.Errorf("Revocation before any: %v, %v; want nil, nil", r, err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error { return tx.PutRevocation("grant-1", want) })
	earlier := want
	earlier.RevokedAt = base.Add(-time.Hour)
	update(t, s, func(tx ledger.Tx) error { return tx.PutRevocation("grant-1", earlier) })
	view(t, s, func(tx ledger.Tx) error {
		r, err := tx.Revocation("grant-1")
		if err != nil {
			return err
		}
		if !same(r, &earlier) {
			t.Errorf("Revocation\n got %s\nwant %s", show(r), show(&earlier))
		}
		other, err := tx.Revocation("grant-2")
		if err != nil || other != nil {
			t.Errorf("Revocation of another grant: %v, %v", other, err)
		}
		return nil
	})
}

// testRevocationsAfter: a row store lists its revocations in grant id
// order, bytewise, after a grant id, a number at a time.
func testRevocationsAfter(t *testing.T, open opener) {
	s := open.fresh(t)
	grants := []string{"a2agrant_B", "a2agrant_a", "a2agrant_Z", "a2agrant_é", "a2agrant_1"}
	update(t, s, func(tx ledger.Tx) error {
		for i, g := range grants {
			if err := tx.PutRevocation(g, ledger.Revocation{RevokedAt: base.Add(time.Duration(i) * time.Minute), By: g}); err != nil {
				return err
			}
		}
		return nil
	})
	sorted := slices.Sorted(slices.Values(grants)) // bytewise
	list := func(after string, limit int) []string {
		var got []string
		view(t, s, func(tx ledger.Tx) error {
			rl, ok := tx.(ledger.RevocationLister)
			if !ok {
				t.Fatal("the row store cannot list its revocations")
			}
			return rl.RevocationsAfter(after, limit, func(grant string, r *ledger.Revocation) error {
				if r.By != grant {
					t.Errorf("grant %s listed with the revocation of %s", grant, r.By)
				}
				got = append(got, grant)
				return nil
			})
		})
		return got
	}
	for _, c := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 10, sorted},
		{"", 2, sorted[:2]},
		{sorted[1], 2, sorted[2:4]},
		{"a2agrant_C", 10, sorted[slices.Index(sorted, "a2agrant_Z"):]},
		{sorted[len(sorted)-1], 10, nil},
	} {
		if got := list(c.after, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("RevocationsAfter(%q, %d) = %q, want %q", c.after, c.limit, got, c.want)
		}
	}
}

// testReferences: the storage under the ledger's rules of what becomes
// deletable. SetObject records a location and DeleteObject forgets it;
// Count keeps one counter per kind and key, never below zero;
// DeleteSnapshot removes a snapshot and its retain-until; QueueDeletion
// queues a location once per key.
func testReferences(t *testing.T, open opener) {
	s := open.fresh(t)
	key := ledger.EvidenceKey(hexID("referenced"))
	loc := ledger.Location{Store: "s3", Bucket: "evidence", Key: "segments/x.seg", VersionID: "v1", Offset: 10, Length: 20, Uploaded: true}
	snap := snapshot(`"referenced"`)
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.SetObject(key, loc); err != nil {
			return err
		}
		if _, err := tx.PutSnapshot(snap); err != nil {
			return err
		}
		if err := tx.SetSnapshotRetain(snap.ID, base.Add(time.Hour)); err != nil {
			return err
		}
		for _, kind := range []ledger.RefKind{ledger.RefHold, ledger.RefSegment} {
			if n, err := tx.Count(kind, key, 2); err != nil || n != 2 {
				return fmt.Errorf("Count(%s, +2) = %d, %v", kind, n, err)
			}
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		got, err := tx.Object(key)
		if err != nil || !same(got, loc) {
			t.Errorf("Object after SetObject: %s, %v", show(got), err)
		}
		if n, err := tx.Count(ledger.RefSegment, key, -5); err != nil || n != 0 {
			t.Errorf("Count(segment, -5) from 2 = %d, %v; want 0", n, err)
		}
		if n, err := tx.Count(ledger.RefSegment, key, 1); err != nil || n != 1 {
			t.Errorf("Count(segment, +1) from 0 = %d, %v; want 1", n, err)
		}
		if n, err := tx.Count(ledger.RefHold, key, -1); err != nil || n != 1 {
			t.Errorf("Count(hold, -1) from 2 = %d, %v; want 1 (kinds are separate)", n, err)
		}
		if err := tx.DeleteObject(key); err != nil {
			return err
		}
		if err := tx.DeleteSnapshot(snap.ID); err != nil {
			return err
		}
		for range 2 {
			if err := tx.QueueDeletion(withPart(loc, 0, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		_, err := tx.Object(key)
		wantNotFound(t, "Object after DeleteObject", err)
		_, err = tx.Snapshot(snap.ID)
		wantNotFound(t, "Snapshot after DeleteSnapshot", err)
		if at, err := tx.SnapshotRetain(snap.ID); err != nil || !at.IsZero() {
			t.Errorf("SnapshotRetain after DeleteSnapshot: %v, %v; want zero", at, err)
		}
		queued, err := tx.Deletions(10)
		if err != nil {
			return err
		}
		checkDeletable(t, "Deletions after queueing one location twice", queued, withPart(loc, 0, 0))
		return nil
	})
}
