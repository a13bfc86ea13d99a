package store

import (
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
