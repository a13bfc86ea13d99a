package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/pactledger/pactledger/ledger"
)

// testRestart: after the store is closed and opened again on the same
// directory, everything committed is there (rows on every index,
// tombstones, evidence, outbox entries with their Seqs, object locations,
// dead letters, snapshots, holds, revocations, drills, incidents, the log),
// nothing of a failed Update is, and counters go on from where they were:
// a new outbox entry, incident id and queued leaf never reuse an earlier
// one.
func testRestart(t *testing.T, open opener) {
	dir := t.TempDir()
	s := open.start(t, dir)
	rows := fixtureRows(12)
	createRows(t, s, rows)
	swept := rows[5]
	sweep(t, s, swept)
	left := slices.Delete(slices.Clone(rows), 5, 6)
	snap := snapshot(`"restart"`)
	var incident uint64
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.PutEvidence(rows[0].ID, []byte("bundle 0")); err != nil {
			return err
		}
		for i := range 4 {
			if err := tx.Enqueue(entry(i), base); err != nil {
				return err
			}
		}
		if _, err := tx.PutSnapshot(snap); err != nil {
			return err
		}
		if _, err := tx.Count(ledger.RefHold, "held-key", 2); err != nil {
			return err
		}
		if err := tx.PutRevocation("grant-0", ledger.Revocation{RevokedAt: base, By: "support"}); err != nil {
			return err
		}
		if err := tx.PutDrill("20260301T120000Z", []byte("drill report")); err != nil {
			return err
		}
		var err error
		if incident, err = tx.NextIncidentSeq(); err != nil {
			return err
		}
		if err := tx.PutIncident(incident, ledger.IncidentRecord{ID: ledger.IncidentID(incident), RowID: rows[2].ID, OpenedAt: base}); err != nil {
			return err
		}
		for _, r := range rows[:3] {
			if err := tx.QueueLeaf(r.ID, []byte(r.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	integrate(t, s)
	update(t, s, func(tx ledger.Tx) error { return tx.QueueLeaf(rows[3].ID, []byte(rows[3].ID)) })
	queued := outbox(t, s, 10)
	uploadedLoc := ledger.Location{Store: "s3", Bucket: "evidence", Key: queued[0].Key, VersionID: "v1", RetainUntil: queued[0].RetainUntil, Uploaded: true}
	update(t, s, func(tx ledger.Tx) error {
		if err := ledger.RecordUpload(tx, queued[0], uploadedLoc); err != nil {
			return err
		}
		return ledger.MoveToDeadLetters(tx, queued[1], "refused for good", base)
	})
	var leafSeqs []uint64
	view(t, s, func(tx ledger.Tx) error {
		pend, err := tx.PendingLeaves(10)
		for _, p := range pend {
			leafSeqs = append(leafSeqs, p.Seq)
		}
		return err
	})

	// A failed Update writes nothing, before or after the restart.
	lost := fixtureRows(13)[12]
	err := s.Update(t.Context(), func(tx ledger.Tx) error {
		if err := tx.CreateRow(lost); err != nil {
			return err
		}
		if err := tx.PutDrill("20260302T120000Z", []byte("lost")); err != nil {
			return err
		}
		if err := tx.Enqueue(entry(50), base); err != nil {
			return err
		}
		return errMember
	})
	if !errors.Is(err, errMember) {
		t.Fatalf("failing Update: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	s = open.start(t, dir)
	for _, q := range []ledger.Query{{}, {Principal: "user-2"}, {GrantID: "grant-1"}, {Target: "order-0"}, {Agent: "https://pa-0.example"}, {Status: ledger.Incident}, {Class: swept.Class}} {
		q.PageSize = 1000
		listAll(t, s, q, filter(left, q))
	}
	checkEntries(t, outbox(t, s, 10), []ledger.OutboxEntry{entry(2), entry(3)})
	if got := outbox(t, s, 10); len(got) == 2 && (got[0].Seq != queued[2].Seq || got[1].Seq != queued[3].Seq) {
		t.Errorf("outbox Seqs after restart: %d, %d; want %d, %d", got[0].Seq, got[1].Seq, queued[2].Seq, queued[3].Seq)
	}
	view(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Row(lost.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("row of a failed Update after restart: %v, want ErrNotFound", err)
		}
		if _, err := tx.Drill("20260302T120000Z"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("drill of a failed Update after restart: %v, want ErrNotFound", err)
		}
		tomb, err := tx.Tombstone(swept.ID)
		if err != nil || !same(tomb, tombstoneOf(swept)) {
			t.Errorf("tombstone after restart: %s, %v", show(tomb), err)
		}
		if b, err := tx.Evidence(rows[0].ID); err != nil || string(b) != "bundle 0" {
			t.Errorf("evidence after restart: %q, %v", b, err)
		}
		if loc, err := tx.Object(queued[0].Key); err != nil || !same(loc, uploadedLoc) {
			t.Errorf("object after restart: %s, %v", show(loc), err)
		}
		if d, err := tx.DeadLetters(0, 10); err != nil || len(d) != 1 || d[0].Entry.Seq != queued[1].Seq {
			t.Errorf("dead letters after restart: %s, %v", show(d), err)
		}
		if depth, err := tx.OutboxDepth(); err != nil || depth != 2 {
			t.Errorf("outbox depth after restart: %d, %v; want 2", depth, err)
		}
		if got, err := tx.Snapshot(snap.ID); err != nil || !same(got, snap) {
			t.Errorf("snapshot after restart: %s, %v", show(got), err)
		}
		if r, err := tx.Revocation("grant-0"); err != nil || r == nil || !r.RevokedAt.Equal(base) {
			t.Errorf("revocation after restart: %v, %v", r, err)
		}
		if b, err := tx.Drill("20260301T120000Z"); err != nil || string(b) != "drill report" {
			t.Errorf("drill after restart: %q, %v", b, err)
		}
		if inc, err := tx.Incident(incident); err != nil || inc.RowID != rows[2].ID {
			t.Errorf("incident after restart: %v, %v", inc, err)
		}
		if size, cp, err := tx.LogHead(); err != nil || size != 3 || string(cp) != "cp3" {
			t.Errorf("log head after restart: %d, %q, %v", size, cp, err)
		}
		if idx, err := tx.LeafIndex(rows[2].ID); err != nil || idx != 2 {
			t.Errorf("leaf index after restart: %d, %v", idx, err)
		}
		pend, err := tx.PendingLeaves(10)
		if err != nil || len(pend) != 1 || pend[0].Ref != rows[3].ID {
			t.Errorf("pending leaves after restart: %v, %v", pend, err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		if n, err := tx.Count(ledger.RefHold, "held-key", 0); err != nil || n != 2 {
			t.Errorf("hold count after restart: %d, %v; want 2", n, err)
		}
		if err := tx.Enqueue(entry(60), base); err != nil {
			return err
		}
		seq, err := tx.NextIncidentSeq()
		if err != nil {
			return err
		}
		if seq <= incident {
			t.Errorf("NextIncidentSeq after restart handed out %d, not above %d", seq, incident)
		}
		return tx.QueueLeaf("after restart", []byte("x"))
	})
	got := outbox(t, s, 10)
	if last := got[len(got)-1]; last.Ref != entry(60).Ref || last.Seq <= queued[3].Seq {
		t.Errorf("entry queued after restart: %s, want Seq above %d", show(last), queued[3].Seq)
	}
	view(t, s, func(tx ledger.Tx) error {
		pend, err := tx.PendingLeaves(10)
		if err != nil {
			return err
		}
		if len(pend) != 2 || pend[1].Seq <= leafSeqs[len(leafSeqs)-1] {
			t.Errorf("leaf queued after restart: %v, want it after %v", pend, leafSeqs)
		}
		return nil
	})
}
