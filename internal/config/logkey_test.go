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
	if _, _, _, err := EnsureLogKey(&c); err == nil || !strings.Contains(err.Error(), "one log keeps one name") {
		t.Fatalf("changed origin: %v", err)
	}
}
