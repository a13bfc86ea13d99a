package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestTreeRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	dir := t.TempDir()
	if r := treeRevision(ctx, dir); r.commit != "" {
		t.Fatalf("a directory outside git: %+v", r)
	}
	git(t, dir, "init", "-q")
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte("package main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "main.go")
	git(t, dir, "commit", "-q", "-m", "first")
	head := git(t, dir, "rev-parse", "HEAD")
	clean := treeRevision(ctx, dir)
	if clean != (revision{commit: head}) {
		t.Fatalf("clean tree: %+v, want commit %s", clean, head)
	}
	if got, want := clean.String(), "commit "+head[:12]; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	// A file outside version control does not change the code built.
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := treeRevision(ctx, dir); r != clean {
		t.Fatalf("an untracked file: %+v", r)
	}
	if err := os.WriteFile(file, []byte("package main\n\nfunc main() {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	edited := treeRevision(ctx, dir)
	if edited != (revision{commit: head, modified: true}) || !strings.Contains(edited.String(), "with changes not committed") {
		t.Fatalf("edited tree: %+v %q", edited, edited)
	}

	// The note is printed only when both sides are known and differ.
	for _, c := range []struct {
		a, b revision
		want bool
	}{
		{clean, clean, false},
		{clean, edited, true},
		{clean, revision{commit: "0123456789abcdef"}, true},
		{clean, revision{}, false},
		{revision{}, revision{}, false},
	} {
		if got := c.a.differs(c.b); got != c.want {
			t.Errorf("%v differs from %v: %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if got := (revision{}).String(); got != "commit not known" {
		t.Errorf("unknown revision: %q", got)
	}
}
