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

// Identity refusals hold at most LimitIdentityRefusals's bytes of the
// outbox: past it a turn is kept without its refusal, and the room left
// under LimitOutbox stays for receipts and a User's denied consent. What
// the ledger takes makes room again, what is set aside does not (the
// Provider still holds it), and the size is kept across a reopen.
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

	// The ledger takes the first; one is set aside and keeps its room:
	// room for one more.
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
	if ib := s.IdentityRefusalBytes(); ib != 2*size {
		t.Fatalf("after one left and one was set aside: %d bytes of identity refusals, want %d", ib, 2*size)
	}
	for i := range 3 {
		if got, want := identity(), i >= 1; got != want {
			t.Fatalf("identity refusal %d after room was made: dropped %v, want %v", i, got, want)
		}
	}

	// Put back by an operator, an identity refusal set aside is one
	// again, in the room it held: new ones wait for room.
	if _, err := s.RetrySetAside(head[1].Seq, false, nil); err != nil {
		t.Fatal(err)
	}
	if ib := s.IdentityRefusalBytes(); ib != 3*size {
		t.Fatalf("after a retry: %d bytes of identity refusals, want %d (the one put back counts against their share, once)", ib, 3*size)
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
	if ib := s.IdentityRefusalBytes(); ib != 2*size {
		t.Fatalf("after the one put back was posted: %d bytes of identity refusals, want %d", ib, 2*size)
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

// The refusals of denied consents hold at most LimitDeniedConsents's
// bytes of the outbox, apart from the identity refusals' share: past it,
// or with the outbox full, a User's denial is recorded all the same (the
// device code answers access_denied) and its refusal is reported dropped,
// so that one User's denials never take the room the others' receipts
// need. The share counts entries as the identity refusals' does: what the
// ledger takes makes room, an entry set aside keeps its room and put
// back counts once, and the size is kept across a reopen.
func TestDeniedConsentsHoldTheirShareOfTheOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	one, _ := json.Marshal(pipeline.DeniedConsent("acct-1", "https://pa.example", "p.a.j.dc_0", "acme", []string{"orders:read"}, now, now))
	size := int64(len(one))
	s.LimitOutbox(10 * size)
	s.LimitDeniedConsents(2 * size)
	n := 0
	deny := func() bool {
		t.Helper()
		dc := fmt.Sprint("dc_", n%10)
		code := newDevice(t, s, dc, fmt.Sprint("u", n), false, now)
		n++
		got, err := s.DecideDevice(code, oauth.Decision{User: "acct-1"}, now)
		if err != nil {
			t.Fatalf("denial %d: %v", n, err)
		}
		if got.Brand != "acme" {
			t.Fatalf("denial %d: brand %q", n, got.Brand)
		}
		var oe *oauth.Error
		if _, err := s.RedeemDeviceCode(dc, "acme", "https://pa.example", fmt.Sprint("u", n-1), nil, now, anyRefreshToken); !errors.As(err, &oe) || oe.Code != oauth.AccessDenied {
			t.Fatalf("denial %d: the device code answers %v, want access_denied", n, err)
		}
		return got.Dropped
	}
	for i := range 4 {
		if got, want := deny(), i >= 2; got != want {
			t.Fatalf("denial %d: dropped %v, want %v", i, got, want)
		}
	}
	if d, b, db := s.Depth(), s.OutboxBytes(), s.DeniedConsentBytes(); d != 2 || b != 2*size || db != 2*size {
		t.Fatalf("at their share: %d entries, %d bytes, %d of denied consents; want 2, %d, %d", d, b, db, 2*size, 2*size)
	}
	if err := s.Enqueue(pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: strings.Repeat("r", 400)}}); err != nil {
		t.Fatalf("a receipt past the denied consents' share: %v", err)
	}

	// One is set aside: it keeps its room. Put back by an operator, it
	// counts once; taken by the ledger, it makes room for one.
	head, err := s.Head(1)
	if err != nil || len(head) != 1 {
		t.Fatal(head, err)
	}
	if err := s.SetAside(head[0].Seq, "rejected"); err != nil {
		t.Fatal(err)
	}
	if db := s.DeniedConsentBytes(); db != 2*size {
		t.Fatalf("after one was set aside: %d bytes of denied consents, want %d", db, 2*size)
	}
	if !deny() {
		t.Fatal("a denial's refusal was queued past their share, which one set aside holds part of")
	}
	if _, err := s.RetrySetAside(head[0].Seq, false, nil); err != nil {
		t.Fatal(err)
	}
	if db, ib := s.DeniedConsentBytes(), s.IdentityRefusalBytes(); db != 2*size || ib != 0 {
		t.Fatalf("after a retry: %d bytes of denied consents, %d of identity refusals; want %d, 0", db, ib, 2*size)
	}
	if !deny() {
		t.Fatal("a denial's refusal was queued past their share, after one was put back")
	}
	head, err = s.Head(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(head[len(head)-1].Seq); err != nil {
		t.Fatal(err)
	}
	if db := s.DeniedConsentBytes(); db != size {
		t.Fatalf("after the one put back was posted: %d bytes of denied consents, want %d", db, size)
	}
	if deny() {
		t.Fatal("a denial was dropped with room in its share")
	}
	total, db := s.OutboxBytes(), s.DeniedConsentBytes()
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if s.OutboxBytes() != total || s.DeniedConsentBytes() != db {
		t.Fatalf("reopened: %d bytes, %d of denied consents; want %d, %d", s.OutboxBytes(), s.DeniedConsentBytes(), total, db)
	}

	// A full outbox drops a denial's refusal too, with room in its share:
	// the denial itself is recorded.
	s.LimitOutbox(total)
	s.LimitDeniedConsents(10 * size)
	if !deny() {
		t.Fatal("a denial's refusal was queued past the outbox's bound")
	}
}

// One Brand user may have DeniedConsentsPerUser refusals of denied
// consents waiting in the outbox: past that their denials are recorded
// (the device code answers access_denied) and reported dropped, while
// another customer's denial is queued in the room the share still has,
// and the first customer's is queued again once one of theirs left the
// outbox. Reopened, the file holds the same count.
func TestOneUsersDenialsTakeTheirPartOfTheShareOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	s.LimitOutbox(1 << 20)
	s.LimitDeniedConsents(1 << 19)
	n := 0
	deny := func(user string) bool {
		t.Helper()
		dc := fmt.Sprint("dc_", n)
		code := newDevice(t, s, dc, fmt.Sprint("u", n), false, now)
		n++
		got, err := s.DecideDevice(code, oauth.Decision{User: user}, now)
		if err != nil {
			t.Fatalf("denial %d: %v", n, err)
		}
		var oe *oauth.Error
		if _, err := s.RedeemDeviceCode(dc, "acme", "https://pa.example", fmt.Sprint("u", n-1), nil, now, anyRefreshToken); !errors.As(err, &oe) || oe.Code != oauth.AccessDenied {
			t.Fatalf("denial %d: the device code answers %v, want access_denied", n, err)
		}
		return got.Dropped
	}
	for i := range DeniedConsentsPerUser + 3 {
		if got, want := deny("acct-flood"), i >= DeniedConsentsPerUser; got != want {
			t.Fatalf("acct-flood's denial %d: dropped %v, want %v", i, got, want)
		}
	}
	if deny("acct-other") {
		t.Fatal("another customer's denial was dropped, with room in the share")
	}
	if d := s.Depth(); d != DeniedConsentsPerUser+1 {
		t.Fatalf("%d entries waiting, want %d", d, DeniedConsentsPerUser+1)
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if !deny("acct-flood") {
		t.Fatal("reopened: acct-flood's denial was queued past their part of the share")
	}
	head, err := s.Head(1)
	if err != nil || len(head) != 1 {
		t.Fatal(head, err)
	}
	if err := s.SetAside(head[0].Seq, "rejected"); err != nil {
		t.Fatal(err)
	}
	if deny("acct-flood") {
		t.Fatal("acct-flood's denial was dropped once one of theirs had left the outbox")
	}
}
