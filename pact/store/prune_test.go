package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
)

// What comes due goes at Prune, with no write that adds to the store
// after it was stored: each kind is kept until it is due, and gone once
// it is.
func TestPruneCarriesOutWhatIsDueWithoutAWrite(t *testing.T) {
	t0 := keepT0
	grantEnd := t0.Add(oauth.GrantTTL)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T, s *Store)
		due   time.Time
		kept  func(t *testing.T, s *Store) bool
		what  func(p Pruned) int
	}{{
		name:  "device authorization",
		store: func(t *testing.T, s *Store) { newDevice(t, s, "dc_1", "u1", false, t0) },
		due:   t0.Add(oauth.DeviceCodeTTL + oauth.DeviceCodeKept),
		kept:  func(t *testing.T, s *Store) bool { _, found := device(t, s, "dc_1"); return found },
		what:  func(p Pruned) int { return p.Devices },
	}, {
		name:  "stored reply",
		store: func(t *testing.T, s *Store) { turn(t, s, "c1", true, "m1", `{}`, t0) },
		due:   t0.Add(ConversationTTL + ReplyKept),
		kept:  func(t *testing.T, s *Store) bool { got, _ := s.StoredReply("c1", "m1"); return got != nil },
		what:  func(p Pruned) int { return p.Kept },
	}, {
		name:  "action log",
		store: func(t *testing.T, s *Store) { turn(t, s, "c1", true, "m1", `{}`, t0) },
		due:   t0.Add(ActionLogKept),
		kept:  func(t *testing.T, s *Store) bool { log, _ := s.ActionLog("sha-c1-m1"); return log != nil },
		what:  func(p Pruned) int { return p.Kept },
	}, {
		name:  "expired conversation",
		store: func(t *testing.T, s *Store) { turn(t, s, "c1", true, "m1", `{}`, t0) },
		due:   t0.Add(ConversationTTL + ConversationKept),
		kept:  func(t *testing.T, s *Store) bool { _, err := s.Conversation("c1"); return err == nil },
		what:  func(p Pruned) int { return p.Kept },
	}, {
		name: "refresh token of an ended grant",
		store: func(t *testing.T, s *Store) {
			if err := s.IssueRefreshToken("rt_1", grantOf(t, s, "a2agrant_1", t0), t0); err != nil {
				t.Fatal(err)
			}
		},
		due:  grantEnd,
		kept: func(t *testing.T, s *Store) bool { return keyCount(t, s, bRefresh) > 0 },
		what: func(p Pruned) int { return p.Kept },
	}, {
		name:  "ended grant",
		store: func(t *testing.T, s *Store) { grantOf(t, s, "a2agrant_1", t0) },
		due:   grantEnd.Add(GrantKept),
		kept:  func(t *testing.T, s *Store) bool { _, err := s.Grant("a2agrant_1"); return err == nil },
		what:  func(p Pruned) int { return p.Kept },
	}, {
		name:  "used login assertion",
		store: func(t *testing.T, s *Store) { startConsent(t, s, t0) },
		due:   t0.Add(5 * time.Minute),
		kept:  func(t *testing.T, s *Store) bool { return keyCount(t, s, bAssertions) > 0 },
		what:  func(p Pruned) int { return p.Consent },
	}, {
		name:  "consent ticket",
		store: func(t *testing.T, s *Store) { startConsent(t, s, t0) },
		due:   t0.Add(10 * time.Minute),
		kept:  func(t *testing.T, s *Store) bool { return keyCount(t, s, bTickets) > 0 },
		what:  func(p Pruned) int { return p.Consent },
	}, {
		name: "brand session",
		store: func(t *testing.T, s *Store) {
			if err := s.NewSession("sess_1", Session{Brand: "acme", User: "acct-1", Expires: t0.Add(time.Hour)}, t0); err != nil {
				t.Fatal(err)
			}
		},
		due:  t0.Add(time.Hour),
		kept: func(t *testing.T, s *Store) bool { _, err := s.Session("sess_1"); return err == nil },
		what: func(p Pruned) int { return p.Sessions },
	}, {
		name: "attempt under an ended grant",
		store: func(t *testing.T, s *Store) {
			refusal := pipeline.Item{Refusal: &pipeline.Refusal{Reason: "request under an ended grant"}}
			if _, err := s.RecordEndedGrantAttempt("a2agrant_1", refusal, time.Minute, t0); err != nil {
				t.Fatal(err)
			}
		},
		due:  t0.Add(time.Minute),
		kept: func(t *testing.T, s *Store) bool { return keyCount(t, s, bEndedAttempts) > 0 },
		what: func(p Pruned) int { return p.EndedAttempts },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			tc.store(t, s)
			// Pruning at a time the entry is still kept, and a moment
			// after it is due: no other write comes in between.
			if _, err := s.Prune(context.Background(), tc.due.Add(-time.Second), time.Minute); err != nil {
				t.Fatal(err)
			}
			if !tc.kept(t, s) {
				t.Fatal("pruned before it was due")
			}
			got, err := s.Prune(context.Background(), tc.due.Add(time.Second), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if tc.kept(t, s) {
				t.Fatalf("kept after it was due; Prune carried out %+v", got)
			}
			if tc.what(got) == 0 || got.Total() == 0 {
				t.Fatalf("Prune carried out %+v, want it counted", got)
			}
		})
	}
}

// startConsent stores the consent ticket of a login assertion for a
// pending device authorization at now: the assertion id is kept 5
// minutes, the ticket 10.
func startConsent(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	userCode := newDevice(t, s, "dc_consent", "u1", false, now)
	_, _, err := s.StartConsent(ConsentStart{Brand: "acme", User: "acct-1", UserCode: userCode, AssertionID: "https://acme.example|jti-1",
		AssertionExpires: now.Add(5 * time.Minute), Ticket: "ticket-1", Cookie: "cookie-1", TicketExpires: now.Add(10 * time.Minute)}, now)
	if err != nil {
		t.Fatal(err)
	}
}

// A backlog larger than a batch goes in one Prune, over as many write
// transactions as its batches, none carrying out more than a write does.
func TestPruneDrainsABacklogBatchByBatch(t *testing.T) {
	s := openStore(t)
	const devices = devicePruneBatch + 10 // each due twice: at expiry, and to be deleted
	for i := range devices {
		newDevice(t, s, fmt.Sprintf("dc_%d", i), fmt.Sprintf("u%d", i), false, keepT0)
	}
	const replies = keepPruneBatch + 40
	for i := range replies {
		turn(t, s, "big", i == 0, fmt.Sprint("m", i), `{}`, keepT0)
	}
	late := keepT0.Add(ConversationTTL + ConversationKept + time.Second)
	got, err := s.Prune(context.Background(), late, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n := keyCount(t, s, bDevices) + keyCount(t, s, bDeviceDue) + keyCount(t, s, bUserCodes); n != 0 {
		t.Fatalf("%d keys of device authorizations kept", n)
	}
	if n := keyCount(t, s, bContexts) + keyCount(t, s, bReplies) + keyCount(t, s, bActionLog) + keyCount(t, s, bKeepDue); n != 0 {
		t.Fatalf("%d keys of the conversation kept", n)
	}
	// 2 due entries a device authorization, in 3 batches; for the
	// conversation, its 2 entries, its replies and its turns' action logs,
	// one step each, in 3 batches too (an entry whose replies a batch did
	// not finish is a step again in the next); one transaction for each
	// other kind.
	keptSteps := 2 + replies + replies
	if got.Devices != 2*devices || got.Kept < keptSteps || got.Transactions != 3+3+3 {
		t.Fatalf("Prune carried out %+v, want %d device entries and %d steps or more of the conversation in 9 transactions", got, 2*devices, keptSteps)
	}
}

// Prune stops between two transactions once its context is done.
func TestPruneStopsWhenItsContextIsDone(t *testing.T) {
	s := openStore(t)
	newDevice(t, s, "dc_1", "u1", false, keepT0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := s.Prune(ctx, keepT0.Add(time.Hour), time.Minute)
	if !errors.Is(err, context.Canceled) || got != (Pruned{}) {
		t.Fatalf("Prune with its context done: %+v, %v; want nothing, context.Canceled", got, err)
	}
	if _, found := device(t, s, "dc_1"); !found {
		t.Fatal("the device authorization was pruned")
	}
}
