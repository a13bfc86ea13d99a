package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditLogKeyFileNotFound: a --log-key file that cannot be read is
// named, with where ledgerd keeps its verifier key.
func TestAuditLogKeyFileNotFound(t *testing.T) {
	f := start(t)
	dir := t.TempDir()
	kept := filepath.Join(dir, "2026-10.checkpoint")
	if err := os.WriteFile(kept, []byte("not read\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "verifier.key")
	code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", missing)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitUsage, out, errs)
	}
	for _, want := range []string{missing, "no such file or directory", "<dataDir>/log/verifier.key"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}
