package server

import (
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger/proof"
)

// TestOpenCheckpointKept: the service keeps the latest checkpoint it
// verified, and only bytes equal to it skip verification: a checkpoint
// signed by another key, or one whose bytes differ, still fails after a
// good one was kept.
func TestOpenCheckpointKept(t *testing.T) {
	const origin = "example.com/log"
	signer := func() (note.Signer, string) {
		t.Helper()
		s, vkey, err := pacttest.LogKey(origin)
		if err != nil {
			t.Fatal(err)
		}
		return s, vkey
	}
	ours, vkey := signer()
	other, _ := signer()
	sign := func(s note.Signer, size int64) []byte {
		t.Helper()
		cp, err := proof.Sign(proof.Checkpoint{Origin: origin, Size: size}, s)
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	svc := &service{logKey: vkey}

	good := sign(ours, 7)
	for range 2 {
		c, err := svc.openCheckpoint(good)
		if err != nil || c.Size != 7 || c.Origin != origin {
			t.Fatalf("our checkpoint: %+v, %v", c, err)
		}
	}
	if last := svc.lastCP.Load(); last == nil || string(last.signed) != string(good) {
		t.Fatalf("kept %v, want the checkpoint just verified", last)
	}
	if _, err := svc.openCheckpoint(sign(other, 7)); !errors.Is(err, proof.ErrCheckpoint) {
		t.Errorf("a checkpoint signed by another key: %v, want ErrCheckpoint", err)
	}
	tampered := append([]byte(nil), good...)
	tampered[len(origin)+1] = '8' // the size line: 7 -> 8
	if _, err := svc.openCheckpoint(tampered); !errors.Is(err, proof.ErrCheckpoint) {
		t.Errorf("our checkpoint with its size changed: %v, want ErrCheckpoint", err)
	}
	if c, err := svc.openCheckpoint(sign(ours, 9)); err != nil || c.Size != 9 {
		t.Errorf("our next checkpoint: %+v, %v", c, err)
	}
}
