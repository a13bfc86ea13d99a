package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger"
)

// memHashes is a tlog.HashReader over stored hashes kept in memory: the
// tree the suite expects the store to hold.
type memHashes []tlog.Hash

func (m memHashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x >= int64(len(m)) {
			return nil, fmt.Errorf("no hash %d", x)
		}
		out[i] = m[x]
	}
	return out, nil
}

// storeHashes reads the stored hashes of tx.
func storeHashes(tx ledger.LogTx) tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) { return tx.ReadHashes(idx) })
}

// integrate sequences every queued leaf as the ledger's integrator does
// (reading back, in the same transaction, the hashes it just stored;
// taking off the queue, unlogged, a leaf whose ref has one already) and
// records the new head with checkpoint "cp<size>".
func integrate(t *testing.T, s ledger.Store) int64 {
	t.Helper()
	return integrateN(t, s, 1000)
}

// integrateN is integrate of the n oldest queued leaves.
func integrateN(t *testing.T, s ledger.Store, n int) int64 {
	t.Helper()
	var size int64
	update(t, s, func(tx ledger.Tx) error {
		var err error
		if size, _, err = tx.LogHead(); err != nil {
			return err
		}
		pend, err := tx.PendingLeaves(n)
		if err != nil {
			return err
		}
		refs := make([]string, len(pend))
		for i, p := range pend {
			refs[i] = p.Ref
		}
		logged, err := tx.LeafIndexes(refs)
		if err != nil {
			return err
		}
		for _, p := range pend {
			if _, ok := logged[p.Ref]; ok {
				if err := tx.DropQueuedLeaf(p); err != nil {
					return err
				}
				continue
			}
			logged[p.Ref] = size
			hs, err := tlog.StoredHashesForRecordHash(size, tlog.RecordHash(p.Data), storeHashes(tx))
			if err != nil {
				return fmt.Errorf("hash leaf %d: %w", size, err)
			}
			if err := tx.SequenceLeaf(p, size, tlog.StoredHashCount(size), hs); err != nil {
				return err
			}
			size++
		}
		return tx.SetLogHead(size, fmt.Appendf(nil, "cp%d", size))
	})
	return size
}

// testLog: the Merkle log's part of a transaction. QueueLeaf keeps commit
// order, PendingLeaves returns the oldest first; SequenceLeaf stores the
// leaf, its hashes (readable in the same transaction) and its index, and
// takes it off the queue; it refuses an index already taken, changing
// nothing; LogHead and CheckpointAt return what SetLogHead recorded; the
// stored hashes give the tree hash computed apart from the store.
func testLog(t *testing.T, open opener) {
	s := open.fresh(t)
	view(t, s, func(tx ledger.Tx) error {
		size, cp, err := tx.LogHead()
		if err != nil || size != 0 || len(cp) != 0 {
			t.Errorf("LogHead of an empty log: %d, %q, %v", size, cp, err)
		}
		n, err := tx.TilesPublished()
		if err != nil || n != 0 {
			t.Errorf("TilesPublished of an empty log: %d, %v", n, err)
		}
		_, err = tx.CheckpointAt(0)
		wantNotFound(t, "CheckpointAt(0) of an empty log", err)
		if _, _, err := tx.Leaf(0); err == nil {
			t.Errorf("Leaf(0) of an empty log: no error")
		}
		return nil
	})

	type leaf struct {
		ref  string
		data []byte
	}
	var leaves []leaf
	for i := range 7 {
		leaves = append(leaves, leaf{fmt.Sprintf("ref-%d", i), fmt.Appendf(nil, "leaf data %d", i)})
	}
	queue := func(ls ...leaf) {
		update(t, s, func(tx ledger.Tx) error {
			for _, l := range ls {
				if err := tx.QueueLeaf(l.ref, l.data); err != nil {
					return err
				}
			}
			return nil
		})
	}
	queue(leaves[0])
	queue(leaves[1], leaves[2])
	view(t, s, func(tx ledger.Tx) error {
		pend, err := tx.PendingLeaves(100)
		if err != nil {
			return err
		}
		if len(pend) != 3 {
			t.Fatalf("PendingLeaves: %d, want 3", len(pend))
		}
		for i, p := range pend {
			if p.Ref != leaves[i].ref || string(p.Data) != string(leaves[i].data) {
				t.Errorf("pending leaf %d: %s %q, want %s %q", i, p.Ref, p.Data, leaves[i].ref, leaves[i].data)
			}
			if i > 0 && p.Seq <= pend[i-1].Seq {
				t.Errorf("pending leaf %d: Seq %d after %d", i, p.Seq, pend[i-1].Seq)
			}
		}
		two, err := tx.PendingLeaves(2)
		if err != nil || len(two) != 2 || two[0].Ref != leaves[0].ref {
			t.Errorf("PendingLeaves(2): %v, %v", two, err)
		}
		_, err = tx.LeafIndex(leaves[0].ref)
		wantNotFound(t, "LeafIndex of a queued leaf", err)
		return nil
	})
	if size := integrate(t, s); size != 3 {
		t.Fatalf("integrated %d leaves, want 3", size)
	}
	queue(leaves[3])
	queue(leaves[4], leaves[5], leaves[6])
	if size := integrate(t, s); size != 7 {
		t.Fatalf("log size %d after integrating, want 7", size)
	}
	update(t, s, func(tx ledger.Tx) error { return tx.SetTilesPublished(3) })

	// The tree the store should hold, computed apart from it.
	var want memHashes
	for i, l := range leaves {
		hs, err := tlog.StoredHashes(int64(i), l.data, want)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, hs...)
	}
	wantRoot, err := tlog.TreeHash(int64(len(leaves)), want)
	if err != nil {
		t.Fatal(err)
	}
	checkTree := func() {
		t.Helper()
		view(t, s, func(tx ledger.Tx) error {
			root, err := tlog.TreeHash(int64(len(leaves)), storeHashes(tx))
			if err != nil {
				return err
			}
			if root != wantRoot {
				t.Errorf("tree hash from the stored hashes: %v, want %v", root, wantRoot)
			}
			for i, l := range leaves {
				ref, data, err := tx.Leaf(int64(i))
				if err != nil {
					return err
				}
				if ref != l.ref || string(data) != string(l.data) {
					t.Errorf("Leaf(%d) = %s %q, want %s %q", i, ref, data, l.ref, l.data)
				}
				idx, err := tx.LeafIndex(l.ref)
				if err != nil || idx != int64(i) {
					t.Errorf("LeafIndex(%s) = %d, %v; want %d", l.ref, idx, err, i)
				}
			}
			size, cp, err := tx.LogHead()
			if err != nil || size != 7 || string(cp) != "cp7" {
				t.Errorf("LogHead = %d, %q, %v; want 7, cp7", size, cp, err)
			}
			for _, n := range []int64{3, 7} {
				cp, err := tx.CheckpointAt(n)
				if err != nil || string(cp) != fmt.Sprint("cp", n) {
					t.Errorf("CheckpointAt(%d) = %q, %v", n, cp, err)
				}
			}
			_, err = tx.CheckpointAt(5)
			wantNotFound(t, "CheckpointAt a size never signed", err)
			published, err := tx.TilesPublished()
			if err != nil || published != 3 {
				t.Errorf("TilesPublished = %d, %v; want 3", published, err)
			}
			if _, err := tx.ReadHashes([]int64{int64(len(want)) + 5}); err == nil {
				t.Errorf("ReadHashes of a hash never stored: no error")
			}
			return nil
		})
	}
	checkTree()

	// A leaf sequenced at an index already taken is refused; nothing of
	// that transaction stays.
	extra := leaf{"ref-extra", []byte("extra")}
	queue(extra)
	err = s.Update(t.Context(), func(tx ledger.Tx) error {
		pend, err := tx.PendingLeaves(1)
		if err != nil {
			return err
		}
		if len(pend) != 1 {
			return fmt.Errorf("pending leaves: %d", len(pend))
		}
		return tx.SequenceLeaf(pend[0], 2, tlog.StoredHashCount(2), []tlog.Hash{tlog.RecordHash(extra.data)})
	})
	if err == nil {
		t.Errorf("SequenceLeaf at a taken index succeeded")
	}
	checkTree()
	view(t, s, func(tx ledger.Tx) error {
		pend, err := tx.PendingLeaves(10)
		if err != nil {
			return err
		}
		if !slices.EqualFunc(pend, []leaf{extra}, func(p ledger.PendingLeaf, l leaf) bool { return p.Ref == l.ref }) {
			t.Errorf("after a refused SequenceLeaf the queue is %v, want the leaf still queued", pend)
		}
		_, err = tx.LeafIndex(extra.ref)
		if !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("LeafIndex of the refused leaf: %v, want ErrNotFound", err)
		}
		return nil
	})
}

// testLeafQueued: LeafQueued answers for one ref whether its leaf is
// queued: true from the QueueLeaf in the same transaction on, false once
// the leaf is sequenced (or dropped) and for a ref never queued, and the
// same after the store is opened again; a ref queued twice stays queued
// until both of its leaves are off the queue.
func testLeafQueued(t *testing.T, open opener) {
	dir := t.TempDir()
	s := open.start(t, dir)
	rowID := strings.Repeat("ab", 32) // a row id, which a store may key apart
	queued := func(tx ledger.Tx, want map[string]bool, when string) {
		t.Helper()
		for ref, w := range want {
			got, err := tx.LeafQueued(ref)
			if err != nil || got != w {
				t.Errorf("%s: LeafQueued(%q) = %v, %v; want %v", when, ref, got, err, w)
			}
		}
	}
	update(t, s, func(tx ledger.Tx) error {
		queued(tx, map[string]bool{"ref-a": false}, "before any leaf is queued")
		for _, ref := range []string{"ref-a", rowID, "dispute/" + rowID + "/0"} {
			if err := tx.QueueLeaf(ref, []byte("leaf of "+ref)); err != nil {
				return err
			}
		}
		queued(tx, map[string]bool{"ref-a": true, rowID: true, "dispute/" + rowID + "/0": true, "ref-absent": false},
			"in the transaction that queued them")
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		queued(tx, map[string]bool{"ref-a": true, rowID: true, "dispute/" + rowID + "/0": true, "ref-absent": false, "ref": false, "ref-a2": false},
			"after the commit")
		return nil
	})
	if size := integrateN(t, s, 1); size != 1 {
		t.Fatalf("integrated %d leaves, want 1", size)
	}
	view(t, s, func(tx ledger.Tx) error {
		queued(tx, map[string]bool{"ref-a": false, rowID: true, "dispute/" + rowID + "/0": true}, "after the first leaf was sequenced")
		return nil
	})
	// The same ref queued again: queued until both are off the queue (the
	// first sequenced, the second dropped).
	update(t, s, func(tx ledger.Tx) error { return tx.QueueLeaf(rowID, []byte("again")) })
	if size := integrateN(t, s, 1); size != 2 {
		t.Fatalf("log size %d, want 2", size)
	}
	view(t, s, func(tx ledger.Tx) error {
		queued(tx, map[string]bool{rowID: true}, "with the ref's first leaf sequenced and its second queued")
		return nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open.start(t, dir)
	view(t, s, func(tx ledger.Tx) error {
		queued(tx, map[string]bool{"ref-a": false, rowID: true, "dispute/" + rowID + "/0": true, "ref-absent": false}, "after opening the store again")
		return nil
	})
	if size := integrate(t, s); size != 3 {
		t.Fatalf("log size %d, want 3", size)
	}
	view(t, s, func(tx ledger.Tx) error {
		queued(tx, map[string]bool{"ref-a": false, rowID: false, "dispute/" + rowID + "/0": false, "ref-absent": false}, "with every leaf sequenced or dropped")
		return nil
	})
}

// testLogPrune, for a store that drops published tiles (ledger.LogPruner):
// PruneLog refuses a size that is not whole tiles or not published; it
// drops the leaves and the stored hashes below the tile height of the
// tiles asked for, and keeps every leaf's index, the hashes at the tile
// height and above and the later leaves, so that the tree hash of the
// whole log still reads from the store; the count of dropped leaves only
// grows and survives a restart.
func testLogPrune(t *testing.T, open opener) {
	dir := t.TempDir()
	s := open.start(t, dir)
	if err := s.View(t.Context(), func(tx ledger.Tx) error {
		if _, ok := tx.(ledger.LogPruner); !ok {
			t.Skip("the store keeps every leaf")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const n = 600
	var want memHashes
	for i := range n {
		data := fmt.Appendf(nil, "leaf %d", i)
		update(t, s, func(tx ledger.Tx) error { return tx.QueueLeaf(fmt.Sprint("ref-", i), data) })
		hs, err := tlog.StoredHashes(int64(i), data, want)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, hs...)
		if i%250 == 249 {
			integrate(t, s)
		}
	}
	if size := integrate(t, s); size != n {
		t.Fatalf("integrated %d leaves, want %d", size, n)
	}
	update(t, s, func(tx ledger.Tx) error { return tx.SetTilesPublished(n) })
	prune := func(below int64) error {
		return s.Update(t.Context(), func(tx ledger.Tx) error { return tx.(ledger.LogPruner).PruneLog(below) })
	}
	for _, bad := range []int64{300, 768} {
		if err := prune(bad); err == nil {
			t.Errorf("PruneLog(%d) with %d leaves published: no error", bad, n)
		}
	}
	view(t, s, func(tx ledger.Tx) error {
		room, err := tx.(ledger.LogPruner).PruneRoom()
		if err != nil || room < 1<<ledger.TileHeight || room%(1<<ledger.TileHeight) != 0 {
			t.Errorf("PruneRoom of a new store: %d, %v; want whole tiles", room, err)
		}
		return nil
	})
	check := func(pruned int64) {
		t.Helper()
		view(t, s, func(tx ledger.Tx) error {
			got, err := tx.(ledger.PrunedLog).LogPruned()
			if err != nil || got != pruned {
				t.Errorf("LogPruned = %d, %v; want %d", got, err, pruned)
			}
			for _, i := range []int64{0, pruned - 1, pruned, n - 1} {
				if i < 0 {
					continue
				}
				_, data, err := tx.Leaf(i)
				switch {
				case i < pruned && err == nil:
					t.Errorf("Leaf(%d) after dropping %d leaves: still there", i, pruned)
				case i >= pruned && (err != nil || string(data) != fmt.Sprint("leaf ", i)):
					t.Errorf("Leaf(%d) = %q, %v", i, data, err)
				}
				if idx, err := tx.LeafIndex(fmt.Sprint("ref-", i)); err != nil || idx != i {
					t.Errorf("LeafIndex(ref-%d) = %d, %v", i, idx, err)
				}
			}
			var kept []int64
			for idx := range int64(len(want)) {
				if level, _ := tlog.SplitStoredHashIndex(idx); idx >= tlog.StoredHashCount(pruned) || level >= ledger.TileHeight {
					kept = append(kept, idx)
				}
			}
			hs, err := tx.ReadHashes(kept)
			if err != nil {
				t.Fatalf("the stored hashes kept after dropping %d leaves: %v", pruned, err)
			}
			for i, idx := range kept {
				if hs[i] != want[idx] {
					t.Errorf("stored hash %d after dropping %d leaves differs", idx, pruned)
				}
			}
			root, err := tlog.TreeHash(n, storeHashes(tx))
			if wantRoot, _ := tlog.TreeHash(n, want); err != nil || root != wantRoot {
				t.Errorf("tree hash after dropping %d leaves: %v, %v", pruned, root, err)
			}
			return nil
		})
		// A failed read may end a transaction: one each.
		for _, idx := range []int64{0, tlog.StoredHashIndex(0, pruned-1), tlog.StoredHashIndex(ledger.TileHeight-1, pruned>>(ledger.TileHeight-1)-1)} {
			if pruned == 0 {
				break
			}
			view(t, s, func(tx ledger.Tx) error {
				if _, err := tx.ReadHashes([]int64{idx}); err == nil {
					t.Errorf("stored hash %d after dropping %d leaves: still there", idx, pruned)
				}
				return nil
			})
		}
	}
	check(0)
	if err := prune(256); err != nil {
		t.Fatal(err)
	}
	check(256)
	if err := prune(256); err != nil {
		t.Fatalf("PruneLog again to 256: %v", err)
	}
	if err := prune(512); err != nil {
		t.Fatal(err)
	}
	check(512)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open.start(t, dir)
	check(512)
}

// testLogDivergence: LogDivergence returns nil until SetLogDivergence
// records bytes, then those bytes, in the same transaction and after it
// and across a restart; a later record replaces it and nil removes it
// (also when there is none). The log's other state is left alone.
func testLogDivergence(t *testing.T, open opener) {
	dir := t.TempDir()
	s := open.start(t, dir)
	read := func(want string) {
		t.Helper()
		view(t, s, func(tx ledger.Tx) error {
			got, err := tx.LogDivergence()
			if err != nil || string(got) != want || (want == "" && got != nil) {
				t.Errorf("LogDivergence = %q, %v; want %q", got, err, want)
			}
			return nil
		})
	}
	read("")
	update(t, s, func(tx ledger.Tx) error { return tx.SetLogDivergence(nil) })
	read("")
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.SetTilesPublished(5); err != nil {
			return err
		}
		if err := tx.SetLogDivergence([]byte(`{"first":1}`)); err != nil {
			return err
		}
		if got, err := tx.LogDivergence(); err != nil || string(got) != `{"first":1}` {
			t.Errorf("LogDivergence in the transaction that set it = %q, %v", got, err)
		}
		return nil
	})
	read(`{"first":1}`)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open.start(t, dir)
	read(`{"first":1}`)
	update(t, s, func(tx ledger.Tx) error { return tx.SetLogDivergence([]byte(`{"second":2}`)) })
	read(`{"second":2}`)
	update(t, s, func(tx ledger.Tx) error { return tx.SetLogDivergence(nil) })
	read("")
	view(t, s, func(tx ledger.Tx) error {
		if n, err := tx.TilesPublished(); err != nil || n != 5 {
			t.Errorf("TilesPublished after the divergence record came and went = %d, %v; want 5", n, err)
		}
		return nil
	})
}

// testLeafIndexNotMoved: a ref's leaf index, once given, is never moved.
// SequenceLeaf of a leaf whose ref already has one (a row's, a swept
// row's, an event's), or of two leaves of one ref in one transaction, is
// refused and nothing of the transaction stays: the ref keeps its index,
// the tree its size, and the leaf stays queued.
func testLeafIndexNotMoved(t *testing.T, open opener) {
	s := open.fresh(t)
	rows := fixtureRows(2)
	createRows(t, s, rows)
	refs := []string{rows[0].ID, "dispute/" + rows[0].ID + "/0", rows[1].ID}
	update(t, s, func(tx ledger.Tx) error {
		for _, ref := range refs {
			if err := tx.QueueLeaf(ref, []byte("leaf of "+ref)); err != nil {
				return err
			}
		}
		return nil
	})
	if size := integrate(t, s); size != 3 {
		t.Fatalf("integrated %d leaves, want 3", size)
	}
	// A swept row keeps its leaf, and its index.
	update(t, s, func(tx ledger.Tx) error { return tx.RemoveRow(rows[1], ledger.Tombstone{ID: rows[1].ID}) })

	// sequence sequences the queued leaves in one transaction, as a round
	// of the integrator would.
	sequence := func() error {
		return s.Update(t.Context(), func(tx ledger.Tx) error {
			size, _, err := tx.LogHead()
			if err != nil {
				return err
			}
			pend, err := tx.PendingLeaves(10)
			if err != nil {
				return err
			}
			for _, p := range pend {
				hs, err := tlog.StoredHashesForRecordHash(size, tlog.RecordHash(p.Data), storeHashes(tx))
				if err != nil {
					return err
				}
				if err := tx.SequenceLeaf(p, size, tlog.StoredHashCount(size), hs); err != nil {
					return err
				}
				size++
			}
			return tx.SetLogHead(size, fmt.Appendf(nil, "cp%d", size))
		})
	}
	unchanged := func(when string, queued ...string) {
		t.Helper()
		view(t, s, func(tx ledger.Tx) error {
			for i, ref := range refs {
				if idx, err := tx.LeafIndex(ref); err != nil || idx != int64(i) {
					t.Errorf("%s: LeafIndex(%s) = %d, %v; want %d", when, ref, idx, err, i)
				}
			}
			_, err := tx.LeafIndex("ref-new")
			wantNotFound(t, when+": LeafIndex of a ref twice in one transaction", err)
			if size, cp, err := tx.LogHead(); err != nil || size != 3 || string(cp) != "cp3" {
				t.Errorf("%s: LogHead = %d, %q, %v; want 3, cp3", when, size, cp, err)
			}
			_, _, err = tx.Leaf(3)
			wantNotFound(t, when+": Leaf(3)", err)
			pend, err := tx.PendingLeaves(10)
			if err != nil {
				return err
			}
			var got []string
			for _, p := range pend {
				got = append(got, p.Ref)
			}
			if !slices.Equal(got, queued) {
				t.Errorf("%s: queued %v, want %v", when, got, queued)
			}
			return nil
		})
	}
	for _, ref := range refs {
		update(t, s, func(tx ledger.Tx) error { return tx.QueueLeaf(ref, []byte("another leaf of "+ref)) })
		if err := sequence(); !errors.Is(err, ledger.ErrRefLogged) {
			t.Errorf("SequenceLeaf of a second leaf of %s: %v, want an error wrapping ErrRefLogged", ref, err)
		}
		unchanged("after a second leaf of "+ref+" was refused", ref)
		drop(t, s)
		unchanged("after the refused leaf of " + ref + " was dropped")
	}
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.QueueLeaf("ref-new", []byte("one")); err != nil {
			return err
		}
		return tx.QueueLeaf("ref-new", []byte("two"))
	})
	if err := sequence(); !errors.Is(err, ledger.ErrRefLogged) {
		t.Errorf("SequenceLeaf of two leaves of one ref in one transaction: %v, want an error wrapping ErrRefLogged", err)
	}
	unchanged("after two leaves of one ref in one transaction were refused", "ref-new", "ref-new")

	// LeafIndexes answers for the refs that have a leaf, and leaves the
	// others out.
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.LeafIndexes(append([]string{"ref-new", "ref-absent"}, refs...))
		if err != nil {
			return err
		}
		want := map[string]int64{refs[0]: 0, refs[1]: 1, refs[2]: 2}
		if !maps.Equal(got, want) {
			t.Errorf("LeafIndexes = %v, want %v", got, want)
		}
		if got, err := tx.LeafIndexes(nil); err != nil || len(got) != 0 {
			t.Errorf("LeafIndexes(nil) = %v, %v", got, err)
		}
		return nil
	})
	drop(t, s)
	unchanged("after the queue was dropped")
	// Dropping a leaf no longer queued changes nothing.
	update(t, s, func(tx ledger.Tx) error { return tx.DropQueuedLeaf(ledger.PendingLeaf{Seq: 1, Ref: refs[0]}) })
	unchanged("after a leaf no longer queued was dropped")
}

// drop takes every queued leaf of s off the queue, logging none.
func drop(t *testing.T, s ledger.Store) {
	t.Helper()
	update(t, s, func(tx ledger.Tx) error {
		pend, err := tx.PendingLeaves(100)
		if err != nil {
			return err
		}
		for _, p := range pend {
			if err := tx.DropQueuedLeaf(p); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx ledger.Tx) error {
		if pend, err := tx.PendingLeaves(100); err != nil || len(pend) != 0 {
			t.Errorf("queue after dropping every leaf: %v, %v", pend, err)
		}
		return nil
	})
}
