package config

import (
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

func TestEnsureLogKey(t *testing.T) {
	c := Default()
	c.DataDir = t.TempDir()
	s, vkey, created, err := EnsureLogKey(&c)
	if err != nil || !created {
		t.Fatalf("first start: %v %v", created, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil || v.Name() != c.MerkleLog.Origin {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	msg, err := note.Sign(&note.Note{Text: "hello\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(msg, note.VerifierList(v)); err != nil {
		t.Fatalf("the verifier key does not check the signer: %v", err)
	}
	_, again, created, err := EnsureLogKey(&c)
	if err != nil || created || again != vkey {
		t.Fatalf("second start: %v %v %q", created, err, again)
	}
	c.MerkleLog.Origin = "other.example/log"
	_, _, _, err = EnsureLogKey(&c)
	if err == nil {
		t.Fatal("changed origin: no error")
	}
	// The error says what the operator can do: set the origin back, or
	// start a new log, and what a new log takes.
	for _, want := range []string{
		`signs for origin "localhost/pactledger", but merkleLog.origin is "other.example/log"`,
		`set merkleLog.origin back to "localhost/pactledger" to go on with this log`,
		`to log under "other.example/log", start a new log: a new row store (data directory) and a new bucket or evidence directory`,
		`docs/operations.md, "The Merkle log"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("changed origin: %v\nwant it to say %s", err, want)
		}
	}
}
