package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/oauth"
	"github.com/pactledger/pactledger/pact/pipeline"
)

// grantReceipt is a receipt of grant issued at ts, named name: its JWS
// carries the claims, unsigned.
func grantReceipt(name, grant string, ts time.Time) pipeline.Item {
	claims, _ := json.Marshal(map[string]string{"grantId": grant, "ts": ts.Format(time.RFC3339Nano), "name": name})
	return receipt("e30." + base64.RawURLEncoding.EncodeToString(claims) + ".sig")
}

// names lists the outbox by the name in each receipt's claims, "F" for
// a refusal and "V" for a revocation.
func names(t *testing.T, s *Store) []string {
	t.Helper()
	head, err := s.Head(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range head {
		switch it := e.Item; {
		case it.Receipt != nil:
			var c struct{ Name string }
			raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(it.Receipt.ReceiptJWS, ".")[1])
			_ = json.Unmarshal(raw, &c)
			out = append(out, c.Name)
		case it.Refusal != nil:
			out = append(out, "F")
		default:
			out = append(out, "V")
		}
	}
	return out
}

// An entry moved back goes to the outbox's end with its grant's later
// entries, in their order, and keeps its room: the outbox's bytes, its
// share's bytes and its mark (with its owner) move with it, and hold
// across a reopen. A revocation does not move, nor does an entry past a
// revocation of its grant that it is not dated before.
func TestMoveBackKeepsOrderAndCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	now := time.Date(2026, 10, 7, 12, 0, 0, 0, time.UTC)
	s.LimitOutbox(1 << 20)
	s.LimitIdentityRefusals(1 << 16)
	s.LimitDeniedConsents(1 << 16)

	enqueue := func(it pipeline.Item) {
		t.Helper()
		if err := s.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(grantReceipt("a1", "g1", now))
	enqueue(grantReceipt("b1", "g2", now))
	// An identity refusal (a share of its own, no grant).
	conv := Conversation{ID: "c1", Brand: "acme", PA: "https://pa.example", Sub: "u1", Created: now}
	if _, _, err := s.BeginTurn(conv, true, "m1", now); err != nil {
		t.Fatal(err)
	}
	refusal := pipeline.Item{Refusal: &pipeline.Refusal{ClaimedPrincipal: "sub u1 of https://pa.example", ClaimedAgent: "https://pa.example",
		Action: pipeline.RefusedAction{Tool: "cancel_order", Target: "A-5531"}, Reason: "asked without a delegation grant: refused in chat", ObservedAt: now}}
	if dropped, err := s.RecordTurn(TurnRecord{ContextID: conv.ID, MessageID: "m1", Reply: json.RawMessage(`{}`), State: json.RawMessage(`{}`), IdentityRefusal: &refusal}, now); err != nil || dropped {
		t.Fatal(dropped, err)
	}
	enqueue(grantReceipt("a2", "g1", now.Add(time.Second)))
	// A denied consent's refusal (a share, with its owner).
	code := newDevice(t, s, "dc_1", "u1", false, now)
	if got, err := s.DecideDevice(code, oauth.Decision{User: "acct-1"}, now); err != nil || got.Dropped {
		t.Fatal(got, err)
	}
	if got, want := names(t, s), []string{"a1", "b1", "F", "a2", "F"}; !slices.Equal(got, want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
	owners := func() [][]byte {
		var out [][]byte
		_ = s.view(func(tx *bolt.Tx) error {
			return tx.Bucket(bDeniedConsents).ForEach(func(_, v []byte) error {
				out = append(out, slices.Clone(v))
				return nil
			})
		})
		return out
	}
	type counts struct {
		depth                    int
		bytes, identity, denials int64
	}
	count := func() counts {
		return counts{s.Depth(), s.OutboxBytes(), s.IdentityRefusalBytes(), s.DeniedConsentBytes()}
	}
	before, ownersBefore := count(), owners()
	if before.identity == 0 || before.denials == 0 || len(ownersBefore) != 1 || len(ownersBefore[0]) == 0 {
		t.Fatalf("counts %+v, owners %q", before, ownersBefore)
	}
	head, _ := s.Head(10)

	// a1 goes to the end with a2, its grant's; the rest keep their order.
	drainSignal(s)
	moved, err := s.MoveBack(head[0].Seq)
	if err != nil || len(moved) != 2 || moved[0] <= head[4].Seq || moved[1] != moved[0]+1 {
		t.Fatalf("moved %v, %v", moved, err)
	}
	if got, want := names(t, s), []string{"b1", "F", "F", "a1", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
	select {
	case <-s.Queued():
	default:
		t.Fatal("no wake-up after a move")
	}
	// The refusals move alone, with their marks and owner.
	for _, e := range head[2:5:5] {
		if e.Item.Refusal == nil {
			continue
		}
		if moved, err := s.MoveBack(e.Seq); err != nil || len(moved) != 1 {
			t.Fatalf("refusal %d: moved %v, %v", e.Seq, moved, err)
		}
	}
	if got, want := names(t, s), []string{"b1", "a1", "a2", "F", "F"}; !slices.Equal(got, want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
	if got := count(); got != before {
		t.Fatalf("counts after the moves %+v, want %+v", got, before)
	}
	if got := owners(); !slices.EqualFunc(got, ownersBefore, bytes.Equal) {
		t.Fatalf("denial owners %q, want %q", got, ownersBefore)
	}
	if n := s.MovedBack(); n != 4 {
		t.Fatalf("%d moved back, want 4", n)
	}
	// An entry no longer in the outbox moves nothing.
	if moved, err := s.MoveBack(head[0].Seq); err != nil || len(moved) != 0 {
		t.Fatalf("a gone entry: moved %v, %v", moved, err)
	}

	// A revocation of g1 dated in a2's second: a2 may not pass it (the
	// ledger would find a2 issued after it), so neither moves; a1 alone
	// could, but moves with a2. A revocation never moves.
	enqueue(pipeline.Revoked("g1", now.Add(time.Second+300*time.Millisecond), "revoked"))
	enqueue(grantReceipt("b2", "g2", now.Add(2*time.Second)))
	head, _ = s.Head(10)
	for _, i := range []int{1, 5} { // a1, the revocation
		if moved, err := s.MoveBack(head[i].Seq); !errors.Is(err, pipeline.ErrMustWait) || len(moved) != 0 {
			t.Fatalf("entry %d: moved %v, %v; want ErrMustWait", i, moved, err)
		}
	}
	// b1, of another grant, passes it, with b2 after it.
	if moved, err := s.MoveBack(head[0].Seq); err != nil || len(moved) != 2 {
		t.Fatalf("b1: moved %v, %v", moved, err)
	}
	if got, want := names(t, s), []string{"a1", "a2", "F", "F", "V", "b1", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("outbox %v, want %v", got, want)
	}
	after := count()
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != after {
		t.Fatalf("reopened: %+v, want %+v", got, after)
	}
	if got := owners(); !slices.EqualFunc(got, ownersBefore, bytes.Equal) {
		t.Fatalf("reopened: denial owners %q, want %q", got, ownersBefore)
	}
}
