package proof_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/pactledger/pactledger/ledger/proof"
)

// oneLeafBundle signs a tree of the one leaf given and returns the bundle
// naming rowID, and the verifier key.
func oneLeafBundle(t *testing.T, rowID, leaf string) (*proof.Bundle, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := proof.Sign(proof.Checkpoint{Origin: "example.com/log", Size: 1, Hash: tlog.RecordHash([]byte(leaf))}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return proof.NewBundle(rowID, 0, []byte(leaf), nil, cp), vkey
}

const rowID = "0123456789abcdef0123456789abcdef"

func TestARowsOwnLeafIsItsProof(t *testing.T) {
	for _, kind := range []string{"receipt", "refusal"} {
		b, key := oneLeafBundle(t, rowID, "pactledger leaf v1\nkind "+kind+"\nrow "+rowID+"\nstatus verified\n")
		if _, err := b.Verify(key); err != nil {
			t.Errorf("%s leaf: %v", kind, err)
		}
	}
}

func TestADisputeLeafIsNoRowProof(t *testing.T) {
	for name, leaf := range map[string]string{
		"dispute":        "pactledger leaf v1\nkind dispute\nrow " + rowID + "\nevent 0\nstatus open\n",
		"incident-close": "pactledger leaf v1\nkind incident-close\nincident inc-1\nrow " + rowID + "\nnote -\n",
		"two row lines":  "pactledger leaf v1\nkind receipt\nrow " + rowID + "\nrow ffff\nstatus verified\n",
		"row line twice": "pactledger leaf v1\nkind receipt\nrow ffff\nrow " + rowID + "\nstatus verified\n",
		"no kind line":   "pactledger leaf v1\nrow " + rowID + "\nstatus verified\n",
		"another row":    "pactledger leaf v1\nkind receipt\nrow ffff\nstatus verified\n",
	} {
		b, key := oneLeafBundle(t, rowID, leaf)
		if _, err := b.Verify(key); !errors.Is(err, proof.ErrProof) {
			t.Errorf("%s: a leaf not the row's own verified as the proof of row %s (err %v)", name, rowID, err)
		}
	}
	// Without a row named, the bundle proves the leaf, whatever it is.
	b, key := oneLeafBundle(t, "", "pactledger leaf v1\nkind dispute\nrow "+rowID+"\nevent 0\nstatus open\n")
	if _, err := b.Verify(key); err != nil {
		t.Errorf("a dispute leaf's own bundle: %v", err)
	}
}

func TestAnEmptyCheckpointWithAnotherRootIsRefused(t *testing.T) {
	newer := proof.Checkpoint{Origin: "o", Size: 5, Hash: tlog.Hash{2}}
	old := proof.Checkpoint{Origin: "o", Size: 0, Hash: tlog.Hash{1}}
	if err := proof.VerifyConsistency(old, newer, nil); !errors.Is(err, proof.ErrProof) {
		t.Errorf("a checkpoint of size 0 with root %x was taken as a prefix (err %v); the empty tree's root is SHA-256 of nothing", old.Hash[:4], err)
	}
	old.Hash = sha256.Sum256(nil)
	if err := proof.VerifyConsistency(old, newer, nil); err != nil {
		t.Errorf("the empty tree: %v", err)
	}
	// ledgerd signed the empty log with a root of 32 zero bytes before
	// 2026-12-05: a checkpoint an auditor kept then is no fork.
	old.Hash = tlog.Hash{}
	if err := proof.VerifyConsistency(old, newer, nil); err != nil {
		t.Errorf("the empty tree as ledgerd signed it before: %v", err)
	}
}

// A checkpoint is of a size some log can reach, or it is refused with its
// size named: tlog's proof checks loop forever on a tree of more than
// 2^62 leaves, so a checkpoint the log's key signed for one would hang
// `ledgerctl proof verify` and `ledgerctl log audit`. Each check returns
// at once.
func TestACheckpointOfASizeNoLogReachesIsRefused(t *testing.T) {
	skey, vkey, err := note.GenerateKey(rand.Reader, "example.com/log")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{proof.MaxSize + 1, 1<<62 + 1, 1<<63 - 1} {
		t.Run(strconv.FormatInt(size, 10), func(t *testing.T) {
			huge := proof.Checkpoint{Origin: "example.com/log", Size: size}
			signed, err := proof.Sign(huge, signer)
			if err != nil {
				t.Fatal(err)
			}
			want := "size " + strconv.FormatInt(size, 10)
			if _, err := proof.ParseCheckpoint(string(huge.Marshal())); !errors.Is(err, proof.ErrCheckpoint) || !strings.Contains(err.Error(), want) {
				t.Errorf("ParseCheckpoint: %v, want %v naming %q", err, proof.ErrCheckpoint, want)
			}
			if _, err := proof.Open(signed, vkey); !errors.Is(err, proof.ErrCheckpoint) || !strings.Contains(err.Error(), want) {
				t.Errorf("Open: %v, want %v naming %q", err, proof.ErrCheckpoint, want)
			}
			old := proof.Checkpoint{Origin: "example.com/log", Size: 5, Hash: tlog.Hash{1}}
			if err := returns(t, func() error { return proof.VerifyConsistency(old, huge, make([]tlog.Hash, 64)) }); !errors.Is(err, proof.ErrProof) || !strings.Contains(err.Error(), want) {
				t.Errorf("VerifyConsistency to a tree of size %d: %v, want %v naming %q", size, err, proof.ErrProof, want)
			}
			b := &proof.Bundle{Format: proof.Format, LeafIndex: 3, Leaf: "x", Checkpoint: string(signed)}
			for range 63 {
				b.Inclusion = append(b.Inclusion, base64.StdEncoding.EncodeToString(make([]byte, 32)))
			}
			if err := returns(t, func() error { _, err := b.Verify(vkey); return err }); !errors.Is(err, proof.ErrCheckpoint) || !strings.Contains(err.Error(), want) {
				t.Errorf("Verify under a tree of size %d: %v, want %v naming %q", size, err, proof.ErrCheckpoint, want)
			}
		})
	}
	// The largest size allowed still parses.
	if _, err := proof.ParseCheckpoint(string(proof.Checkpoint{Origin: "example.com/log", Size: proof.MaxSize}.Marshal())); err != nil {
		t.Errorf("ParseCheckpoint of size MaxSize: %v", err)
	}
}

// returns runs fn and returns its error; a check that loops (as tlog's do
// past 2^62 leaves) fails the test after a minute instead of hanging it.
func returns(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the check did not return: it loops")
		return nil
	}
}

// A row's proof is of a leaf the ledger wrote: a leaf of another version
// line (or none) naming the row is no proof of it, as the audits read no
// such leaf.
func TestALeafOfAnotherVersionIsNoRowProof(t *testing.T) {
	for _, first := range []string{"pactledger leaf v2", "pactledger leaf v1 ", ""} {
		leaf := first + "\nkind receipt\nrow " + rowID + "\nstatus verified\n"
		b, key := oneLeafBundle(t, rowID, leaf)
		if _, err := b.Verify(key); !errors.Is(err, proof.ErrProof) || !strings.Contains(err.Error(), "version") {
			t.Errorf("leaf starting %q: %v, want %v naming the version line", first, err, proof.ErrProof)
		}
	}
}
