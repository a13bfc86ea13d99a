package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/pipeline"
)

// receipt is an outbox entry of a receipt named jws.
func receipt(jws string) pipeline.Item {
	return pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: jws}}
}

// drainSignal empties the store's wake-up signal.
func drainSignal(s *Store) {
	select {
	case <-s.Queued():
	default:
	}
}

// An entry set aside keeps why and when; the operator lists the entries
// set aside, page by page, and puts them back at the end of the outbox,
// one or all, which wakes the pipeline.
func TestEntriesSetAsideAreListedAndPutBack(t *testing.T) {
	s := openStore(t)
	for i := range 5 {
		if err := s.Enqueue(receipt(fmt.Sprintf("R%d", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint64{2, 3, 4} {
		if err := s.SetAside(seq, fmt.Sprintf("rejected by the ledger: entry %d", seq)); err != nil {
			t.Fatal(err)
		}
	}
	if s.Depth() != 2 || s.SetAsideCount() != 3 {
		t.Fatalf("depth %d, set aside %d; want 2 and 3", s.Depth(), s.SetAsideCount())
	}

	page, more, err := s.SetAsideEntries(0, 2)
	if err != nil || !more || len(page) != 2 || page[0].Seq != 2 || page[1].Seq != 3 {
		t.Fatalf("first page: %+v, more %v, %v", page, more, err)
	}
	if e := page[0]; e.Item.Receipt == nil || e.Item.Receipt.ReceiptJWS != "R2" || e.Why != "rejected by the ledger: entry 2" || e.At.IsZero() || e.Size == 0 || e.Unreadable != "" {
		t.Fatalf("entry 2 listed as %+v", e)
	}
	page, more, err = s.SetAsideEntries(3, 2)
	if err != nil || more || len(page) != 1 || page[0].Seq != 4 {
		t.Fatalf("second page: %+v, more %v, %v", page, more, err)
	}

	drainSignal(s)
	r, err := s.RetrySetAside(3, false, nil)
	if err != nil || r != (Retried{Retried: 1}) {
		t.Fatalf("retry 3: %+v, %v", r, err)
	}
	select {
	case <-s.Queued():
	default:
		t.Fatal("putting an entry back did not wake the pipeline")
	}
	if _, err := s.RetrySetAside(3, false, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retry 3 again: %v, want ErrNotFound", err)
	}
	if r, err := s.RetrySetAside(0, true, nil); err != nil || r.Retried != 2 {
		t.Fatalf("retry all: %+v, %v; want 2", r, err)
	}
	if s.SetAsideCount() != 0 {
		t.Fatalf("%d entries still set aside", s.SetAsideCount())
	}
	head, err := s.Head(10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range head {
		got = append(got, e.Item.Receipt.ReceiptJWS)
	}
	if want := "[R1 R5 R3 R2 R4]"; fmt.Sprint(got) != want {
		t.Fatalf("outbox %v, want %s: put back at its end, in the order first queued", got, want)
	}
	if head[4].Seq <= 5 {
		t.Fatalf("an entry put back kept seq %d: it must go after every entry queued before", head[4].Seq)
	}
	// Set aside again, an entry put back says why afresh.
	if err := s.SetAside(head[2].Seq, "rejected again"); err != nil {
		t.Fatal(err)
	}
	if page, _, _ := s.SetAsideEntries(0, 10); len(page) != 1 || page[0].Why != "rejected again" {
		t.Fatalf("set aside again: %+v", page)
	}
}

// An entry that cannot be read is Head's *pipeline.UnreadableError once it
// is the oldest; set aside, it is listed as unreadable and not put back.
func TestAnEntryThatCannotBeReadIsSetAsideAndStays(t *testing.T) {
	s := openStore(t)
	if err := s.Enqueue(receipt("R1")); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bOutbox)
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		return b.Put(seqKey(n), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(receipt("R3")); err != nil {
		t.Fatal(err)
	}
	if head, err := s.Head(10); err != nil || len(head) != 1 {
		t.Fatalf("head before the entry: %v, %v; want R1 alone", head, err)
	}
	if err := s.Remove(1); err != nil {
		t.Fatal(err)
	}
	_, err := s.Head(10)
	var u *pipeline.UnreadableError
	if !errors.As(err, &u) || u.Seq != 2 {
		t.Fatalf("head at the entry: %v, want an UnreadableError for entry 2", err)
	}
	if err := s.SetAside(2, pipeline.SetAsideWhy(u)); err != nil {
		t.Fatal(err)
	}
	if head, err := s.Head(10); err != nil || len(head) != 1 || head[0].Item.Receipt.ReceiptJWS != "R3" {
		t.Fatalf("head after setting it aside: %v, %v; want R3", head, err)
	}
	page, _, err := s.SetAsideEntries(0, 10)
	if err != nil || len(page) != 1 || page[0].Unreadable == "" || page[0].Size != len("{not json") {
		t.Fatalf("listed as %+v, %v", page, err)
	}
	if _, err := s.RetrySetAside(2, false, nil); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("retry the unreadable entry: %v, want ErrUnreadable", err)
	}
	if r, err := s.RetrySetAside(0, true, nil); err != nil || r != (Retried{Unreadable: 1}) {
		t.Fatalf("retry all: %+v, %v; want 0 put back and 1 unreadable", r, err)
	}
}

// An entry put back keeps its bytes as they were set aside: a field this
// version does not know (written by a newer one) is posted again, not
// dropped.
func TestAnEntryPutBackKeepsItsBytes(t *testing.T) {
	s := openStore(t)
	raw := []byte(`{"refusal":{"claimedPrincipal":"acct-1","reason":"r","delegationToken":"t.o.k","fieldOfANewerVersion":1}}`)
	if err := s.db.Update(func(tx *bolt.Tx) error { _, err := (&txn{Tx: tx}).enqueueRaw(raw); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAside(1, "rejected"); err != nil {
		t.Fatal(err)
	}
	if r, err := s.RetrySetAside(1, false, nil); err != nil || r.Retried != 1 {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	var got []byte
	_ = s.db.View(func(tx *bolt.Tx) error {
		_, v := tx.Bucket(bOutbox).Cursor().First()
		got = slices.Clone(v)
		return nil
	})
	if string(got) != string(raw) {
		t.Fatalf("put back as %s, want the bytes set aside %s", got, raw)
	}
}
