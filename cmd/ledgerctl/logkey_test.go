package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// TestLogKeyWhoseHashDoesNotMatch: a verifier key whose hash does not
// match its name and key (its name edited, or a character mistyped) is
// refused as that, not as "neither a key nor a file"; given as a value or
// in a file.
func TestLogKeyWhoseHashDoesNotMatch(t *testing.T) {
	_, vkey, err := note.GenerateKey(rand.Reader, "localhost/pactledger")
	if err != nil {
		t.Fatal(err)
	}
	renamed := "other/log" + strings.TrimPrefix(vkey, "localhost/pactledger")
	if _, err := note.NewVerifier(renamed); err == nil {
		t.Fatal("the renamed key verifies")
	}
	file := filepath.Join(t.TempDir(), "verifier.key")
	if err := os.WriteFile(file, []byte(renamed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{renamed, file} {
		code, out, errs := offline("proof", "verify", "p1.proof", "--log-key", v)
		if code != exitUsage || !strings.Contains(errs, "does not match its name") || strings.Contains(errs, "neither a verifier key") {
			t.Errorf("--log-key %s: exit %d, want %d saying the key's hash does not match its name:\n%s%s", v, code, exitUsage, out, errs)
		}
	}
	// Not a key at all: the words about where ledgerd keeps its key stay.
	if code, _, errs := offline("proof", "verify", "p1.proof", "--log-key", "nonsense"); code != exitUsage || !strings.Contains(errs, "neither a verifier key") {
		t.Errorf("--log-key nonsense: %d %s", code, errs)
	}
}
