package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// testPrefetch: a store that reads ahead (ledger.Prefetcher) answers Row,
// Tombstone, RowByRequestJWT, Revocation and Evidence of prefetched keys as a direct
// read would, present and absent alike, in View and in Update; after the
// member writes, reads see its writes. A store that does not read ahead
// runs the same sequence with direct reads, so both answer alike.
func testPrefetch(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(3)
	kept, swept, fresh := rows[0], rows[1], rows[2]
	createRows(t, s, []*ledger.Row{kept, swept})
	tomb := ledger.Tombstone{ID: swept.ID, SweptAt: base, Class: swept.Class}
	update(t, s, func(tx ledger.Tx) error { return tx.RemoveRow(swept, tomb) })
	rev := ledger.Revocation{RevokedAt: base, By: "support", RecordedAt: base}
	update(t, s, func(tx ledger.Tx) error { return tx.PutRevocation("grant-revoked", rev) })
	bundle := []byte(`{"receiptJws":"kept"}`)
	update(t, s, func(tx ledger.Tx) error { return tx.PutEvidence(kept.ID, bundle) })
	loc := ledger.Location{Key: ledger.EvidenceKey(kept.ID), VersionID: "v1", RetainUntil: base.Add(time.Hour), Uploaded: true}
	update(t, s, func(tx ledger.Tx) error { return tx.SetObject(loc.Key, loc) })

	ahead := ledger.Prefetch{
		Rows:        []string{kept.ID, swept.ID, fresh.ID},
		Tombstones:  []string{swept.ID, kept.ID},
		RequestJWTs: []string{kept.RequestJWTSHA256, fresh.RequestJWTSHA256},
		Grant:       "grant-revoked",
		Evidence:    []string{kept.ID, fresh.ID},
		Objects:     []string{loc.Key, ledger.EvidenceKey(fresh.ID)},
	}
	reads := func(tx ledger.Tx, where string) {
		t.Helper()
		if pf, ok := tx.(ledger.Prefetcher); ok {
			if err := pf.Prefetch(ahead); err != nil {
				t.Fatalf("%s: Prefetch: %v", where, err)
			}
		}
		if got, err := tx.Row(kept.ID); err != nil || !same(got, kept) {
			t.Errorf("%s: Row(kept) = %s, %v", where, show(got), err)
		}
		for _, id := range []string{swept.ID, fresh.ID} {
			if _, err := tx.Row(id); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("%s: Row of a removed or absent row: %v, want ErrNotFound", where, err)
			}
		}
		if got, err := tx.Tombstone(swept.ID); err != nil || got == nil || got.ID != swept.ID {
			t.Errorf("%s: Tombstone(swept) = %v, %v", where, got, err)
		}
		if _, err := tx.Tombstone(kept.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: Tombstone of a live row: %v, want ErrNotFound", where, err)
		}
		if id, err := tx.RowByRequestJWT(kept.RequestJWTSHA256); err != nil || id != kept.ID {
			t.Errorf("%s: RowByRequestJWT(kept) = %q, %v", where, id, err)
		}
		if id, err := tx.RowByRequestJWT(fresh.RequestJWTSHA256); err != nil || id != "" {
			t.Errorf("%s: RowByRequestJWT of an absent entry = %q, %v", where, id, err)
		}
		if got, err := tx.Revocation("grant-revoked"); err != nil || !same(got, &rev) {
			t.Errorf("%s: Revocation = %s, %v", where, show(got), err)
		}
		if got, err := tx.Revocation("grant-other"); err != nil || got != nil {
			t.Errorf("%s: Revocation of a grant not prefetched = %v, %v", where, got, err)
		}
		if got, err := tx.Evidence(kept.ID); err != nil || string(got) != string(bundle) {
			t.Errorf("%s: Evidence(kept) = %q, %v", where, got, err)
		}
		if _, err := tx.Evidence(fresh.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: Evidence of a row without one: %v, want ErrNotFound", where, err)
		}
		if got, err := tx.Object(loc.Key); err != nil || got.Key != loc.Key || got.VersionID != loc.VersionID || !got.RetainUntil.Equal(loc.RetainUntil) {
			t.Errorf("%s: Object(kept's evidence) = %+v, %v", where, got, err)
		}
		if _, err := tx.Object(ledger.EvidenceKey(fresh.ID)); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: Object of a key not recorded: %v, want ErrNotFound", where, err)
		}
	}
	view(t, s, func(tx ledger.Tx) error { reads(tx, "View"); return nil })
	update(t, s, func(tx ledger.Tx) error {
		reads(tx, "Update")
		// Writes after the prefetch are what later reads see.
		if err := tx.CreateRow(fresh); err != nil {
			return err
		}
		if err := tx.PutRevocation("grant-revoked", ledger.Revocation{RevokedAt: base.Add(-1), By: "admin", RecordedAt: base}); err != nil {
			return err
		}
		if got, err := tx.Row(fresh.ID); err != nil || !same(got, fresh) {
			t.Errorf("Row of the row created after the prefetch = %s, %v", show(got), err)
		}
		if id, err := tx.RowByRequestJWT(fresh.RequestJWTSHA256); err != nil || id != fresh.ID {
			t.Errorf("RowByRequestJWT after the create = %q, %v", id, err)
		}
		if got, err := tx.Revocation("grant-revoked"); err != nil || got == nil || got.By != "admin" {
			t.Errorf("Revocation after PutRevocation = %s, %v", show(got), err)
		}
		if err := tx.PutEvidence(fresh.ID, bundle); err != nil {
			return err
		}
		if got, err := tx.Evidence(fresh.ID); err != nil || string(got) != string(bundle) {
			t.Errorf("Evidence after PutEvidence = %q, %v", got, err)
		}
		freshLoc := ledger.Location{Key: ledger.EvidenceKey(fresh.ID), VersionID: "v2", RetainUntil: base.Add(time.Hour), Uploaded: true}
		if err := tx.SetObject(freshLoc.Key, freshLoc); err != nil {
			return err
		}
		if got, err := tx.Object(freshLoc.Key); err != nil || got.VersionID != "v2" {
			t.Errorf("Object after SetObject = %+v, %v", got, err)
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		if got, err := tx.Row(fresh.ID); err != nil || !same(got, fresh) {
			t.Errorf("after the commit: Row(fresh) = %s, %v", show(got), err)
		}
		return nil
	})
}
