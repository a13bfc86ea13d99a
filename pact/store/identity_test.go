package store

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/pipeline"
)

// Identity refusals hold at most LimitIdentityRefusals's bytes of the
// outbox: past it a turn is kept without its refusal, and the room left
// under LimitOutbox stays for receipts and a User's denied consent. What
// the ledger takes, or what is set aside, makes room again, and the size
// is kept across a reopen.
func TestIdentityRefusalsHoldTheirShareOfTheOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	refusal := pipeline.Item{Refusal: &pipeline.Refusal{ClaimedPrincipal: "sub u1 of https://pa.example", ClaimedAgent: "https://pa.example",
		Action: pipeline.RefusedAction{Tool: "cancel_order", Target: "A-5531"}, Reason: "asked without a delegation grant: refused in chat", ObservedAt: now}}
	receipt := pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: strings.Repeat("r", 400)}}
	one, _ := json.Marshal(refusal)
	size := int64(len(one))
	s.LimitOutbox(10 * size)
	s.LimitIdentityRefusals(3 * size)
	n := 0
	turn := func(r TurnRecord) (bool, error) {
		t.Helper()
		n++
		conv := Conversation{ID: fmt.Sprint("c", n), Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: now}
		if _, _, err := s.BeginTurn(conv, true, "m1", now); err != nil {
			t.Fatal(err)
		}
		r.ContextID, r.MessageID, r.Reply, r.State = conv.ID, "m1", json.RawMessage(`{}`), json.RawMessage(`{}`)
		dropped, err := s.RecordTurn(r, now)
		if err == nil {
			if body, err := s.StoredReply(conv.ID, "m1"); err != nil || body == nil {
				t.Fatalf("turn %d kept no reply: %v", n, err)
			}
		}
		return dropped, err
	}
	identity := func() bool {
		t.Helper()
		dropped, err := turn(TurnRecord{IdentityRefusal: &refusal})
		if err != nil {
			t.Fatalf("a turn with an identity refusal: %v", err)
		}
		return dropped
	}
	for i := range 5 {
		if got, want := identity(), i >= 3; got != want {
			t.Fatalf("identity refusal %d: dropped %v, want %v", i, got, want)
		}
	}
	if d, b, ib := s.Depth(), s.OutboxBytes(), s.IdentityRefusalBytes(); d != 3 || b != 3*size || ib != 3*size {
		t.Fatalf("at their share: %d entries, %d bytes, %d of identity refusals; want 3, %d, %d", d, b, ib, 3*size, 3*size)
	}
	// The rest of the outbox stays for the others.
	if _, err := turn(TurnRecord{Outbox: []pipeline.Item{receipt}}); err != nil {
		t.Fatalf("a receipt past the identity refusals' share: %v", err)
	}
	if err := s.Enqueue(pipeline.DeniedConsent("acct-1", "https://pa.example", "", "acme", []string{"orders:read"}, now, now)); err != nil {
		t.Fatalf("a denied consent past the identity refusals' share: %v", err)
	}

	// The ledger takes the first; one is set aside: room for two more.
	head, err := s.Head(2)
	if err != nil || len(head) != 2 {
		t.Fatal(head, err)
	}
	if err := s.Remove(head[0].Seq); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAside(head[1].Seq, "rejected"); err != nil {
		t.Fatal(err)
	}
	if ib := s.IdentityRefusalBytes(); ib != size {
		t.Fatalf("after one left and one was set aside: %d bytes of identity refusals, want %d", ib, size)
	}
	for i := range 3 {
		if got, want := identity(), i == 2; got != want {
			t.Fatalf("identity refusal %d after room was made: dropped %v, want %v", i, got, want)
		}
	}

	// Put back by an operator, an identity refusal set aside is one
	// again, past their share: new ones wait for room.
	if _, err := s.RetrySetAside(head[1].Seq, false, nil); err != nil {
		t.Fatal(err)
	}
	if ib := s.IdentityRefusalBytes(); ib != 4*size {
		t.Fatalf("after a retry: %d bytes of identity refusals, want %d (the one put back counts against their share)", ib, 4*size)
	}
	if !identity() {
		t.Fatal("an identity refusal was queued past their share, after one was put back")
	}
	head, err = s.Head(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(head[len(head)-1].Seq); err != nil {
		t.Fatal(err)
	}
	if ib := s.IdentityRefusalBytes(); ib != 3*size {
		t.Fatalf("after the one put back was posted: %d bytes of identity refusals, want %d", ib, 3*size)
	}
	total, ib := s.OutboxBytes(), s.IdentityRefusalBytes()
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if s.OutboxBytes() != total || s.IdentityRefusalBytes() != ib {
		t.Fatalf("reopened: %d bytes, %d of identity refusals; want %d, %d", s.OutboxBytes(), s.IdentityRefusalBytes(), total, ib)
	}

	// A full outbox drops an identity refusal too, with room in its
	// share: the turn is kept.
	s.LimitOutbox(total)
	s.LimitIdentityRefusals(10 * size)
	if !identity() {
		t.Fatal("an identity refusal past the outbox's bound was queued")
	}
}
