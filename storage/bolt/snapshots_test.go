package bolt_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
	"github.com/pactledger/pactledger/storage/bolt"
	"github.com/pactledger/pactledger/verifier"
)

// rawUpdate changes the file at path through bbolt itself, as an earlier
// version of the store would have left it.
func rawUpdate(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotLinksOfAnOlderFile: a file written before snapshot links
// existed (a counter per snapshot in snapshot_refs, no links, no mark)
// opens, its rows are linked once, its counters are dropped, and the
// sweeper's rule keeps a snapshot that a remaining row still names.
func TestSnapshotLinksOfAnOlderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	snaps := make([]verifier.Snapshot, 3)
	for i := range snaps {
		snaps[i] = verifier.NewSnapshot("https://brand.example/jwks.json", time.Now(), []byte(`{"keys":[`+string(rune('1'+i))+`]}`))
	}
	s1, s2, s3 := snaps[0].ID, snaps[1].ID, snaps[2].ID
	r1, r2, r3 := row("row-1"), row("row-2"), row("row-3")
	r1.BrandKey.JWKSSnapshot = s1
	r2.BrandKey.JWKSSnapshot, r2.Agent.JWKSSnapshot = s1, s2
	r3.Agent.JWKSSnapshot = s3
	rows := []*ledger.Row{r1, r2, r3}

	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, r := range rows {
			if err := ledger.AddRow(tx, r); err != nil {
				return err
			}
		}
		for _, snap := range snaps {
			if _, err := tx.PutSnapshot(snap); err != nil {
				return err
			}
			if err := tx.SetObject(ledger.SnapshotKey(snap.ID), snapshotLoc(snap.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The earlier layout: counters, no links, no mark.
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket([]byte("snapshot_rows")); err != nil {
			return err
		}
		if err := tx.Bucket([]byte("meta")).Delete([]byte("snapshot_links")); err != nil {
			return err
		}
		refs := tx.Bucket([]byte("snapshot_refs"))
		for id, n := range map[string]uint64{s1: 2, s2: 1, s3: 1} {
			if err := refs.Put([]byte(id), binary.BigEndian.AppendUint64(nil, n)); err != nil {
				return err
			}
		}
		return nil
	})

	s = openLinked(t, path)
	wantInUse(t, s, map[string]bool{s1: true, s2: true, s3: true, "never-named": false})
	sweep := func(r *ledger.Row) []ledger.Location {
		t.Helper()
		var gone []ledger.Location
		err := s.Update(t.Context(), func(tx ledger.Tx) error {
			var err error
			gone, err = ledger.SweepRow(tx, r, ledger.Tombstone{ID: r.ID, Kind: r.Kind, Status: r.Status, SweptAt: time.Now()})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return gone
	}
	if gone := sweep(r1); len(gone) != 0 {
		t.Errorf("sweeping row-1 (row-2 still names its snapshot): deletable %v, want none", locKeys(gone))
	}
	wantStored(t, s, map[string]bool{s1: true, s2: true, s3: true})
	if gone, want := sweep(r3), []string{ledger.SnapshotKey(s3)}; !slices.Equal(locKeys(gone), want) {
		t.Errorf("sweeping row-3 (the only row naming its snapshot): deletable %v, want %v", locKeys(gone), want)
	}
	wantStored(t, s, map[string]bool{s1: true, s2: true, s3: false})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The counters are gone, and the links were built once: a link removed
	// behind the store's back is not built again at the next open.
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if k, _ := tx.Bucket([]byte("snapshot_refs")).Cursor().First(); k != nil {
			t.Errorf("snapshot_refs still holds %q after the links were built", k)
		}
		return tx.Bucket([]byte("snapshot_rows")).Delete(append([]byte(s2+"\x00"), r2.ID...))
	})
	s = openLinked(t, path)
	wantInUse(t, s, map[string]bool{s1: true, s2: false})
	want := []string{ledger.SnapshotKey(s1), ledger.SnapshotKey(s2)}
	slices.Sort(want)
	if gone := sweep(r2); !slices.Equal(locKeys(gone), want) {
		t.Errorf("sweeping row-2, the last row: deletable %v, want %v", locKeys(gone), want)
	}
	wantStored(t, s, map[string]bool{s1: false, s2: false})
}

// openLinked opens the store at path, closed when t ends.
func openLinked(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// snapshotLoc is where snapshot id's object is held.
func snapshotLoc(id string) ledger.Location {
	return ledger.Location{Store: "s3", Bucket: "evidence", Key: ledger.SnapshotKey(id), VersionID: "v1", Uploaded: true}
}

// wantInUse checks SnapshotInUse for each snapshot in want.
func wantInUse(t *testing.T, s ledger.Store, want map[string]bool) {
	t.Helper()
	err := s.View(t.Context(), func(tx ledger.Tx) error {
		for id, w := range want {
			got, err := tx.SnapshotInUse(id)
			if err != nil {
				return err
			}
			if got != w {
				t.Errorf("SnapshotInUse(%.8s) = %v, want %v", id, got, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// wantStored checks which snapshots are stored.
func wantStored(t *testing.T, s ledger.Store, want map[string]bool) {
	t.Helper()
	err := s.View(t.Context(), func(tx ledger.Tx) error {
		for id, w := range want {
			_, err := tx.Snapshot(id)
			if err != nil && !errors.Is(err, ledger.ErrNotFound) {
				return err
			}
			if got := err == nil; got != w {
				t.Errorf("snapshot %.8s stored: %v, want %v", id, got, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// locKeys returns the sorted keys of locs.
func locKeys(locs []ledger.Location) []string {
	var out []string
	for _, l := range locs {
		out = append(out, l.Key)
	}
	slices.Sort(out)
	return out
}
