package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/pactledger/pactledger/ledger"
)

// accessLog returns up to n access records after seq.
func accessLog(t *testing.T, s ledger.Store, after uint64, n int) []ledger.AccessEntry {
	t.Helper()
	var out []ledger.AccessEntry
	view(t, s, func(tx ledger.Tx) error {
		var err error
		out, err = tx.AccessLog(after, n)
		return err
	})
	return out
}

// testAccessLog: AppendAccess hands out increasing sequence numbers and
// keeps time and body; AccessLog lists after a number, oldest first, in
// pages; PruneAccess removes at most n of the records written before a
// time, oldest first, and never a later one; numbers are not reused after
// a prune.
func testAccessLog(t *testing.T, open opener) {
	s := open.fresh(t)
	if got := accessLog(t, s, 0, 10); len(got) != 0 {
		t.Fatalf("access log of an empty store: %s", show(got))
	}
	var want []ledger.AccessEntry
	for i := range 10 {
		at := base.Add(time.Duration(i) * time.Minute)
		body := []byte(fmt.Sprintf(`{"read":%d}`, i))
		update(t, s, func(tx ledger.Tx) error {
			seq, err := tx.AppendAccess(at, body)
			if err != nil {
				return err
			}
			if len(want) > 0 && seq <= want[len(want)-1].Seq {
				t.Errorf("AppendAccess #%d: Seq %d after %d, want larger", i, seq, want[len(want)-1].Seq)
			}
			want = append(want[:i], ledger.AccessEntry{Seq: seq, At: at, Body: body})
			return nil
		})
	}
	checkAccess := func(what string, got, want []ledger.AccessEntry) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || !got[i].At.Equal(want[i].At) || string(got[i].Body) != string(want[i].Body) {
				t.Errorf("%s: record %d\n got %d %v %s\nwant %d %v %s", what, i, got[i].Seq, got[i].At, got[i].Body, want[i].Seq, want[i].At, want[i].Body)
			}
		}
	}
	checkAccess("AccessLog from the start", accessLog(t, s, 0, 100), want)
	checkAccess("AccessLog after the third", accessLog(t, s, want[2].Seq, 4), want[3:7])

	var pruned int
	update(t, s, func(tx ledger.Tx) error {
		var err error
		pruned, err = tx.PruneAccess(want[5].At, nil, 3)
		return err
	})
	if pruned != 3 {
		t.Errorf("PruneAccess before the sixth, at most 3: removed %d", pruned)
	}
	checkAccess("AccessLog after a bounded prune", accessLog(t, s, 0, 100), want[3:])
	update(t, s, func(tx ledger.Tx) error {
		var err error
		pruned, err = tx.PruneAccess(want[5].At, nil, 100)
		return err
	})
	if pruned != 2 {
		t.Errorf("PruneAccess before the sixth: removed %d, want the 2 left", pruned)
	}
	checkAccess("AccessLog after the prune", accessLog(t, s, 0, 100), want[5:])
	update(t, s, func(tx ledger.Tx) error {
		seq, err := tx.AppendAccess(base.Add(time.Hour), []byte("{}"))
		if err == nil && seq <= want[len(want)-1].Seq {
			t.Errorf("AppendAccess after a prune: Seq %d, want above %d", seq, want[len(want)-1].Seq)
		}
		return err
	})
}

// testPruneAccessKeeps: PruneAccess passes over the records of the spans
// it is told to keep, counts only those it removes, and removes those
// after them up to before.
func testPruneAccessKeeps(t *testing.T, open opener) {
	s := open.fresh(t)
	var seqs []uint64
	update(t, s, func(tx ledger.Tx) error {
		for i := range 10 {
			seq, err := tx.AppendAccess(base.Add(time.Duration(i)*time.Minute), []byte(fmt.Sprintf(`{"read":%d}`, i)))
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		return nil
	})
	left := func() []uint64 {
		var out []uint64
		for _, e := range accessLog(t, s, 0, 100) {
			out = append(out, e.Seq)
		}
		return out
	}
	// Keep the first two and the fifth to seventh; before the ninth.
	keep := []ledger.AccessSpan{{First: seqs[0], Last: seqs[1]}, {First: seqs[4], Last: seqs[6]}}
	prune := func(n int) int {
		var pruned int
		update(t, s, func(tx ledger.Tx) error {
			var err error
			pruned, err = tx.PruneAccess(base.Add(8*time.Minute), keep, n)
			return err
		})
		return pruned
	}
	if got := prune(1); got != 1 {
		t.Errorf("PruneAccess at most 1, the first two kept: removed %d", got)
	}
	if got, want := left(), append(append([]uint64{}, seqs[:2]...), seqs[3:]...); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a prune of one: records %v, want %v", got, want)
	}
	if got := prune(100); got != 2 {
		t.Errorf("PruneAccess before the ninth: removed %d, want the fourth and eighth", got)
	}
	want := []uint64{seqs[0], seqs[1], seqs[4], seqs[5], seqs[6], seqs[8], seqs[9]}
	if got := left(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the prune: records %v, want %v", got, want)
	}
	keep = nil
	if got := prune(100); got != 5 {
		t.Errorf("PruneAccess keeping none: removed %d, want the 5 kept before", got)
	}
	if got, want := left(), seqs[8:]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a prune keeping none: records %v, want %v", got, want)
	}
}

// testObjectsUnder: ObjectsUnder lists the recorded objects under a
// prefix in key order, in pages after a key, with their keys, and none of
// another prefix or of a row's evidence.
func testObjectsUnder(t *testing.T, open opener) {
	s := open.fresh(t)
	keys := []string{"access/00000000000000000001-00000000000000000002.jsonl", "access/00000000000000000003-00000000000000000003.jsonl", "access/00000000000000000004-00000000000000000009.jsonl"}
	update(t, s, func(tx ledger.Tx) error {
		others := []string{"accesS/x", "acces", "drills/d.json", "b/access/y", ledger.EvidenceKey(hexID("access"))}
		for i, k := range append(others, keys[2], keys[0], keys[1]) {
			if err := tx.SetObject(k, ledger.Location{Store: "s3", Bucket: "b", Key: k, VersionID: fmt.Sprint("v", i), RetainUntil: base, Uploaded: true}); err != nil {
				return err
			}
		}
		return nil
	})
	list := func(after string, n int) []string {
		var got []string
		view(t, s, func(tx ledger.Tx) error {
			locs, err := tx.ObjectsUnder("access/", after, n)
			for _, loc := range locs {
				if !loc.Uploaded || loc.VersionID == "" {
					t.Errorf("ObjectsUnder: %s recorded as %+v", loc.Key, loc)
				}
				got = append(got, loc.Key)
			}
			return err
		})
		return got
	}
	if got := list("", 10); fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Fatalf("ObjectsUnder from the start: %q, want %q", got, keys)
	}
	if got := list("", 2); fmt.Sprint(got) != fmt.Sprint(keys[:2]) {
		t.Fatalf("ObjectsUnder, 2: %q, want %q", got, keys[:2])
	}
	if got := list(keys[1], 10); fmt.Sprint(got) != fmt.Sprint(keys[2:]) {
		t.Fatalf("ObjectsUnder after %s: %q, want %q", keys[1], got, keys[2:])
	}
	if got := list(keys[2], 10); len(got) != 0 {
		t.Fatalf("ObjectsUnder after the last: %q", got)
	}
}
