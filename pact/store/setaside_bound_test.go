package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
)

// What the Provider holds for the ledger is bounded as a whole: an entry
// the ledger refused and that is set aside keeps its room under
// LimitOutbox until the ledger takes it, so that refusals the ledger
// refuses, however many, cannot grow the file past the bound. Past it a
// receipt is refused as ever (ErrOutboxFull); a revocation is queued;
// putting an entry back makes no room, and the sizes hold across a
// reopen.
func TestEntriesSetAsideCountAgainstTheOutboxBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	r := receipt(strings.Repeat("r", 400))
	one, _ := json.Marshal(r)
	size := int64(len(one))
	s.LimitOutbox(4 * size)
	for i := range 3 {
		if err := s.Enqueue(r); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		if err := s.SetAside(uint64(i+1), "rejected by the ledger"); err != nil {
			t.Fatal(err)
		}
	}
	if b, a, n := s.OutboxBytes(), s.SetAsideBytes(), s.SetAsideCount(); b != 0 || a != 3*size || n != 3 {
		t.Fatalf("%d bytes waiting, %d set aside in %d entries; want 0, %d, 3", b, a, n, 3*size)
	}
	if err := s.Enqueue(r); err != nil {
		t.Fatalf("a receipt within the bound: %v", err)
	}
	if err := s.Enqueue(r); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("a receipt past the bound, with most of it set aside: %v, want ErrOutboxFull", err)
	}
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	if err := s.Enqueue(pipeline.Item{Revocation: &pipeline.Revocation{GrantID: "g1", RevokedAt: now}}); err != nil {
		t.Fatalf("a revocation past the bound: %v", err)
	}
	head, err := s.Head(10)
	if err != nil || len(head) != 2 {
		t.Fatal(head, err)
	}
	if err := s.Remove(head[1].Seq); err != nil { // the revocation
		t.Fatal(err)
	}

	// Put back, an entry still holds its room; taken by the ledger, it
	// makes room.
	if _, err := s.RetrySetAside(1, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(r); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("a receipt past the bound after an entry was put back: %v, want ErrOutboxFull", err)
	}
	if head, err = s.Head(10); err != nil || len(head) != 2 {
		t.Fatal(head, err)
	}
	if err := s.Remove(head[1].Seq); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(r); err != nil {
		t.Fatalf("a receipt once the ledger took one: %v", err)
	}

	waiting, aside, n := s.OutboxBytes(), s.SetAsideBytes(), s.SetAsideCount()
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if s.OutboxBytes() != waiting || s.SetAsideBytes() != aside || s.SetAsideCount() != n || n != 2 {
		t.Fatalf("reopened: %d bytes waiting, %d set aside in %d entries; want %d, %d, %d (2)", s.OutboxBytes(), s.SetAsideBytes(), s.SetAsideCount(), waiting, aside, n)
	}
	s.LimitOutbox(4 * size)
	if err := s.Enqueue(r); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("reopened, a receipt past the bound: %v, want ErrOutboxFull", err)
	}
}

// The identity refusals' and the denied consents' shares keep counting
// their entries once they are set aside: refusals the ledger refuses
// cannot make room for more of them. Put back, such an entry counts once.
func TestSharesCountTheirEntriesSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	refusal := pipeline.Item{Refusal: &pipeline.Refusal{ClaimedPrincipal: "sub u1 of https://pa.example", ClaimedAgent: "https://pa.example",
		Action: pipeline.RefusedAction{Tool: "cancel_order", Target: "A-5531"}, Reason: "asked without a delegation grant: refused in chat", ObservedAt: now}}
	one, _ := json.Marshal(refusal)
	isize := int64(len(one))
	one, _ = json.Marshal(pipeline.DeniedConsent("acct-1", "https://pa.example", "p.a.j.dc_0", "acme", []string{"orders:read"}, now, now))
	dsize := int64(len(one))
	s.LimitOutbox(100 * isize)
	s.LimitIdentityRefusals(2 * isize)
	s.LimitDeniedConsents(2 * dsize)
	n := 0
	identity := func() bool {
		t.Helper()
		n++
		conv := Conversation{ID: fmt.Sprint("c", n), Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: now}
		if _, _, err := s.BeginTurn(conv, true, "m1", now); err != nil {
			t.Fatal(err)
		}
		dropped, err := s.RecordTurn(TurnRecord{ContextID: conv.ID, MessageID: "m1", Reply: json.RawMessage(`{}`), State: json.RawMessage(`{}`), IdentityRefusal: &refusal}, now)
		if err != nil {
			t.Fatalf("identity refusal %d: %v", n, err)
		}
		return dropped
	}
	deny := func() bool {
		t.Helper()
		n++
		code := newDevice(t, s, fmt.Sprint("dc_", n%10), fmt.Sprint("u", n), false, now)
		got, err := s.DecideDevice(code, oauth.Decision{User: fmt.Sprint("acct-", n)}, now)
		if err != nil {
			t.Fatalf("denial %d: %v", n, err)
		}
		return got.Dropped
	}
	setAsideAll := func() {
		t.Helper()
		head, err := s.Head(100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range head {
			if err := s.SetAside(e.Seq, "rejected by the ledger"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 2 {
		if identity() || deny() {
			t.Fatalf("refusal %d dropped within its share", i)
		}
	}
	setAsideAll()
	if ib, db := s.IdentityRefusalBytes(), s.DeniedConsentBytes(); ib != 2*isize || db != 2*dsize {
		t.Fatalf("set aside: %d bytes of identity refusals, %d of denied consents; want %d, %d", ib, db, 2*isize, 2*dsize)
	}
	if !identity() {
		t.Fatal("an identity refusal was queued past its share, which its entries set aside fill")
	}
	if !deny() {
		t.Fatal("a denial's refusal was queued past its share, which its entries set aside fill")
	}

	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	s.LimitOutbox(100 * isize)
	s.LimitIdentityRefusals(2 * isize)
	s.LimitDeniedConsents(2 * dsize)
	if ib, db := s.IdentityRefusalBytes(), s.DeniedConsentBytes(); ib != 2*isize || db != 2*dsize {
		t.Fatalf("reopened: %d bytes of identity refusals, %d of denied consents; want %d, %d", ib, db, 2*isize, 2*dsize)
	}
	if !identity() || !deny() {
		t.Fatal("reopened, a refusal was queued past its share, which its entries set aside fill")
	}

	// Put back, an entry counts once; taken by the ledger, it makes room.
	if r, err := s.RetrySetAside(0, true, nil); err != nil || r.Retried != 4 {
		t.Fatalf("retry all: %+v, %v", r, err)
	}
	if ib, db := s.IdentityRefusalBytes(), s.DeniedConsentBytes(); ib != 2*isize || db != 2*dsize {
		t.Fatalf("put back: %d bytes of identity refusals, %d of denied consents; want %d, %d", ib, db, 2*isize, 2*dsize)
	}
	head, err := s.Head(100)
	if err != nil || len(head) != 4 {
		t.Fatal(head, err)
	}
	for _, e := range head {
		if err := s.Remove(e.Seq); err != nil {
			t.Fatal(err)
		}
	}
	if ib, db, a := s.IdentityRefusalBytes(), s.DeniedConsentBytes(), s.SetAsideBytes(); ib != 0 || db != 0 || a != 0 {
		t.Fatalf("taken by the ledger: %d, %d, %d bytes left", ib, db, a)
	}
	if identity() || deny() {
		t.Fatal("a refusal was dropped once the ledger took its share's entries")
	}
}

// SetAsideCount is kept, not counted: the metrics read it at every
// scrape, and pipeline_rejected may hold many entries.
func TestSetAsideCountReadsNoBucket(t *testing.T) {
	s := openStore(t)
	for i := range 50 {
		if err := s.Enqueue(receipt(fmt.Sprint("R", i))); err != nil {
			t.Fatal(err)
		}
		if err := s.SetAside(uint64(i+1), "rejected"); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.SetAsideCount(); n != 50 {
		t.Fatalf("set aside %d, want 50", n)
	}
	if a := testing.AllocsPerRun(100, func() { s.SetAsideCount() }); a != 0 {
		t.Fatalf("SetAsideCount allocates %v times a call: it reads the store rather than a count kept", a)
	}
}

// A reader that sees an entry gone from the outbox (Depth) then reads a
// count of the entries set aside that holds it, as an operator's tools
// and the metrics read them one after the other.
func TestSetAsideCountHoldsWhatDepthNoLongerDoes(t *testing.T) {
	s := openStore(t)
	const n = 300
	for i := range n {
		if err := s.Enqueue(receipt(fmt.Sprint("R", i))); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		for seq := range uint64(n) {
			if err := s.SetAside(seq+1, "rejected"); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for {
		d := s.Depth()
		if a := s.SetAsideCount(); d+a < n {
			t.Fatalf("%d entries waiting and %d set aside, of %d", d, a, n)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if d, a := s.Depth(), s.SetAsideCount(); d != 0 || a != n {
				t.Fatalf("at the end %d waiting, %d set aside; want 0, %d", d, a, n)
			}
			return
		default:
		}
	}
}
