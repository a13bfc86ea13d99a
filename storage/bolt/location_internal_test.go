package bolt

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/ledger"
)

var sampleLocations = []ledger.Location{
	{},
	{Store: "s3", Bucket: "evidence", Key: "segments/2026-12-02/000017.seg", VersionID: "3HL4kqtJvjVBH40Nrjfkd", RetainUntil: time.Date(2028, 6, 2, 13, 4, 5, 123456789, time.UTC), Uploaded: true, Offset: 81920, Length: 3071},
	{Store: "local", Key: "jwks/" + strings.Repeat("ab", 32) + ".json", RetainUntil: time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC), Uploaded: true, LegalHold: true},
	{Store: "s3", Bucket: "b", Key: "k", Offset: 1<<32 - 1, Length: 1<<32 - 1},
	{Key: "before 1970", RetainUntil: time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC)},
	{Key: "a zone", RetainUntil: time.Date(2027, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))},
}

// sameLocation compares two locations as the ledger reads them: the same
// instant, whatever its zone.
func sameLocation(a, b ledger.Location) bool {
	ta, tb := a.RetainUntil, b.RetainUntil
	a.RetainUntil, b.RetainUntil = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb) && ta.IsZero() == tb.IsZero()
}

// wantRefusals checks that parse refuses binary value v cut short, with
// a byte after it, and with an unknown flag.
func wantRefusals(t *testing.T, v []byte, parse func([]byte) error) {
	t.Helper()
	for n := range len(v) {
		if parse(v[:n]) == nil {
			t.Errorf("%x: its first %d of %d bytes read", v, n, len(v))
		}
	}
	if parse(append(bytes.Clone(v), 0)) == nil {
		t.Errorf("%x: a byte after it read", v)
	}
	bad := bytes.Clone(v)
	bad[1] |= 0x80
	if parse(bad) == nil {
		t.Errorf("%x: an unknown flag read", v)
	}
}

// TestLocationRecords: a record reads back as the location written, and
// a record cut short, lengthened or with an unknown flag is refused.
func TestLocationRecords(t *testing.T) {
	for _, loc := range sampleLocations {
		v := encodeLocation(loc)
		got, err := decodeLocation(nil, "k", v)
		if err != nil || !sameLocation(got, loc) {
			t.Errorf("%+v: read back %+v, %v", loc, got, err)
		}
		wantRefusals(t, v, func(v []byte) error { _, err := parseLocation(v); return err })
	}
	// An offset past 32 bits.
	v := encodeLocation(ledger.Location{Key: "k"})
	v = append(v[:len(v)-2], 0x80, 0x80, 0x80, 0x80, 0x10, 0)
	if _, err := parseLocation(v); err == nil {
		t.Error("an offset of 2^32 read")
	}
}

// TestLocationRecordsOfEarlierLayouts: records layouts before 8 wrote,
// JSON plain or compressed, still read.
func TestLocationRecordsOfEarlierLayouts(t *testing.T) {
	c, err := newCodec(map[uint32][]byte{dictV1ID: dictV1})
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range sampleLocations {
		js, err := json.Marshal(loc)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range [][]byte{js, c.Encode(js)} {
			got, err := decodeLocation(c, "k", v)
			if err != nil || !sameLocation(got, loc) {
				t.Errorf("%s: read %+v, %v", v, got, err)
			}
		}
	}
	if _, err := decodeLocation(c, "rows/x.json", []byte("{")); err == nil || !strings.Contains(err.Error(), "rows/x.json") {
		t.Errorf("a broken record: %v, want an error naming it", err)
	}
}

// FuzzLocationRecords: no input makes the reader panic, and a record it
// reads is written back as one that reads the same.
func FuzzLocationRecords(f *testing.F) {
	for _, loc := range sampleLocations {
		f.Add(encodeLocation(loc))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		loc, err := parseLocation(v)
		if err != nil {
			return
		}
		again, err := parseLocation(encodeLocation(loc))
		if err != nil || !sameLocation(again, loc) {
			t.Fatalf("%x read as %+v, written back and read as %+v, %v", v, loc, again, err)
		}
	})
}

// TestLeavesStoredAsTheyAre: a sequenced leaf is kept uncompressed, and
// one an earlier version stored compressed still reads.
func TestLeavesStoredAsTheyAre(t *testing.T) {
	s := openNumbers(t)
	leaf := []byte(strings.Repeat("pactledger leaf v1\nkind receipt\n", 8))
	err := s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, ref := range []string{"a", "b"} {
			if err := tx.QueueLeaf(ref, leaf); err != nil {
				return err
			}
		}
		pend, err := tx.PendingLeaves(2)
		if err != nil {
			return err
		}
		for i, p := range pend {
			if err := tx.SequenceLeaf(p, int64(i), int64(2*i), nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(btx *bbolt.Tx) error {
		b := btx.Bucket(bLogLeaves)
		if v := b.Get(u64(0)); !bytes.Equal(v, storedLeaf("a", leaf)) {
			t.Errorf("leaf 0 stored as %q, want its ref's length, ref and bytes", v)
		}
		return b.Put(u64(1), s.codec.Load().Encode(storedLeaf("b", leaf)))
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(t.Context(), func(tx ledger.Tx) error {
		for i, want := range []string{"a", "b"} {
			ref, data, err := tx.Leaf(int64(i))
			if err != nil || ref != want || !bytes.Equal(data, leaf) {
				t.Errorf("leaf %d: %q %q %v", i, ref, data, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var sampleEntries = []queued{
	{},
	{OutboxEntry: ledger.OutboxEntry{Seq: 1, Kind: ledger.ObjectEvidence, Ref: strings.Repeat("ab", 32), Key: "rows/" + strings.Repeat("ab", 32) + ".json", RetainUntil: time.Date(2028, 6, 2, 0, 0, 0, 0, time.UTC), Segment: true}, QueuedAt: time.Date(2026, 12, 2, 14, 0, 0, 123, time.UTC)},
	{OutboxEntry: ledger.OutboxEntry{Seq: 1 << 40, Kind: ledger.ObjectJWKS, Ref: "snap", Key: "jwks/snap.json", Hold: true}},
	{OutboxEntry: ledger.OutboxEntry{Seq: 7, Kind: ledger.ObjectEvidence, Ref: "r", Key: "rows/r.json", Op: ledger.OpExtend, RetainUntil: time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("y", -7200))}, QueuedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
}

// sameEntry compares two outbox entries as the uploader reads them.
func sameEntry(a, b queued) bool {
	ta, tb, qa, qb := a.RetainUntil, b.RetainUntil, a.QueuedAt, b.QueuedAt
	a.RetainUntil, b.RetainUntil, a.QueuedAt, b.QueuedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b && ta.Equal(tb) && ta.IsZero() == tb.IsZero() && qa.Equal(qb) && qa.IsZero() == qb.IsZero()
}

// TestOutboxEntries: an entry reads back as written, in the binary form
// and in the JSON of earlier layouts, and an entry cut short, lengthened
// or with an unknown flag is refused.
func TestOutboxEntries(t *testing.T) {
	for _, q := range sampleEntries {
		v := encodeQueued(q)
		js, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range [][]byte{v, js} {
			got, err := decodeQueued(form)
			if err != nil || !sameEntry(got, q) {
				t.Errorf("%+v: %q read back as %+v, %v", q, form, got, err)
			}
		}
		wantRefusals(t, v, func(v []byte) error { _, err := parseQueued(v); return err })
	}
	if _, err := decodeQueued([]byte("{")); err == nil {
		t.Error("a broken entry read")
	}
}

// FuzzOutboxEntries: no input makes the reader panic, and an entry it
// reads is written back as one that reads the same.
func FuzzOutboxEntries(f *testing.F) {
	for _, q := range sampleEntries {
		f.Add(encodeQueued(q))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		q, err := parseQueued(v)
		if err != nil {
			return
		}
		again, err := parseQueued(encodeQueued(q))
		if err != nil || !sameEntry(again, q) {
			t.Fatalf("%x read as %+v, written back and read as %+v, %v", v, q, again, err)
		}
	})
}
