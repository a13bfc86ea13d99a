package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ledgerd names at start-up the Provider's signing key and the Merkle
// log's checkpoint key when others than their owner may read them, as it
// names loose API key files; the files it made itself are never named.
func TestLooseSigningKeysAreNamedAtStart(t *testing.T) {
	e, logs := newLoggingEnv(t)
	const warning = "a secret file, or the folder holding it, is open to others than its owner"
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("the keys ledgerd made were named loose:\n%s", logs.String())
	}
	e.stop()
	providerKey := filepath.Join(e.cfg.DataDir, "provider-signing-key.json")
	logKey := e.cfg.LogKeyFile()
	for p, mode := range map[string]os.FileMode{providerKey: 0o644, logKey: 0o660} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	before := len(logs.String())
	e.start(t)
	var named []string
	for line := range strings.Lines(logs.String()[before:]) {
		if strings.Contains(line, warning) {
			named = append(named, line)
		}
	}
	all := strings.Join(named, "")
	for _, want := range []string{providerKey + " (mode 0644", logKey + " (mode 0660"} {
		if !strings.Contains(all, want) {
			t.Errorf("start-up warnings:\n%s\nname no %s", all, want)
		}
	}
	if len(named) != 2 {
		t.Errorf("%d warnings, want 2:\n%s", len(named), all)
	}
}
