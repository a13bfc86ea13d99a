package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditLogKeyFileNotFound: a --log-key file that cannot be read is
// named, with where ledgerd keeps its verifier key, by every command that
// takes one.
func TestAuditLogKeyFileNotFound(t *testing.T) {
	f := start(t)
	dir := t.TempDir()
	kept := filepath.Join(dir, "2026-10.checkpoint")
	if err := os.WriteFile(kept, []byte("not read\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "verifier.key")
	for _, args := range [][]string{
		{"log", "audit", "--from", kept, "--log-key", missing},
		{"log", "checkpoint", "--log-key", missing},
		{"proof", "verify", kept, "--log-key", missing},
	} {
		code, out, errs := f.ctl(t, "auditor", args...)
		if code != exitUsage {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args[:2], code, exitUsage, out, errs)
		}
		for _, want := range []string{missing, "no such file or directory", "<dataDir>/log/verifier.key"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args[:2], want, errs)
			}
		}
	}
}
