package store

import (
	"encoding/base64"
	"maps"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/pactledger/pactledger/pact/pipeline"
)

// At most one refusal a grant is queued per minute, and the times kept
// for that are dropped once the minute has passed: the record does not
// grow with every grant that ever ended.
func TestEndedGrantAttemptsAreKeptAMinute(t *testing.T) {
	s := openStore(t)
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	refusal := pipeline.Item{Refusal: &pipeline.Refusal{Reason: "request under an ended grant"}}
	kept := func() []string {
		var grants []string
		_ = s.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bEndedAttempts).ForEach(func(k, _ []byte) error { grants = append(grants, string(k)); return nil })
		})
		return grants
	}
	for _, step := range []struct {
		grant string
		at    time.Duration
		want  bool
		kept  int
	}{
		{"g1", 0, true, 1},
		{"g1", 30 * time.Second, false, 1},
		{"g2", 50 * time.Second, true, 2},
		{"g1", time.Minute, true, 2},
		{"g3", 3 * time.Minute, true, 1}, // g1's and g2's minutes have passed
		{"g3", 2 * time.Minute, true, 1}, // a clock set back does not hold it
	} {
		queued, err := s.RecordEndedGrantAttempt(step.grant, refusal, time.Minute, t0.Add(step.at))
		if err != nil || queued != step.want {
			t.Fatalf("%s at +%s: queued %v, %v; want %v", step.grant, step.at, queued, err, step.want)
		}
		if got := kept(); len(got) != step.kept {
			t.Fatalf("%s at +%s: times kept for %v, want %d", step.grant, step.at, got, step.kept)
		}
	}
	if d := s.Depth(); d != 5 {
		t.Fatalf("%d refusals queued, want 5", d)
	}
}

// signedBy is a compact JWS whose header names kid, with no real
// signature: SignedBy reads headers, it does not verify them.
func signedBy(kid string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"`+kid+`"}`)) + ".e30.c2ln"
}

// SignedBy counts, by kid, the entries waiting and set aside that the
// Provider's keys signed; revocations, and entries that cannot be read,
// count for none.
func TestSignedByCountsWaitingAndSetAsideEntries(t *testing.T) {
	s := openStore(t)
	err := s.Enqueue(
		pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: signedBy("old"), DelegationToken: signedBy("old")}},
		pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: signedBy("new"), DelegationToken: signedBy("old")}},
		pipeline.Item{Refusal: &pipeline.Refusal{DelegationToken: signedBy("old"), RequestJWT: signedBy("agent")}},
		pipeline.Revoked("a2agrant_1", time.Time{}, "revoked"),
		pipeline.Item{Receipt: &pipeline.Receipt{ReceiptJWS: signedBy("new")}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetAside(3, "rejected by the ledger"); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bOutbox).Put(seqKey(99), []byte("not an entry")) }); err != nil {
		t.Fatal(err)
	}
	got, err := s.SignedBy()
	want := map[string]Held{"old": {Waiting: 2, SetAside: 1}, "new": {Waiting: 2}}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("SignedBy() = %v, %v; want %v", got, err, want)
	}
}
