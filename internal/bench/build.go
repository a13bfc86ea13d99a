package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/pactledger/pactledger/internal/buildinfo"
)

// revision is the commit code was built from, and whether it had changes
// not committed; commit is empty when it is not known.
type revision struct {
	commit   string
	modified bool
}

func (r revision) String() string {
	switch {
	case r.commit == "":
		return "commit not known"
	case r.modified:
		return "commit " + short(r.commit) + " with changes not committed"
	}
	return "commit " + short(r.commit)
}

func short(commit string) string { return commit[:min(len(commit), 12)] }

// differs reports whether r and o are both known and not the same code.
func (r revision) differs(o revision) bool {
	return r.commit != "" && o.commit != "" && r != o
}

// treeRevision is the revision of the git work tree at dir, or an empty
// one when dir is not in one or git is not installed.
func treeRevision(ctx context.Context, dir string) revision {
	head, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return revision{}
	}
	status, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return revision{}
	}
	return revision{commit: strings.TrimSpace(string(head)), modified: len(strings.TrimSpace(string(status))) > 0}
}

// ownRevision is the revision this program was built from, as the Go
// toolchain recorded it (not when built with -buildvcs=false, nor by go
// run).
func ownRevision() revision {
	b := buildinfo.Read()
	if b.Revision == "" {
		return revision{}
	}
	return revision{commit: b.Revision, modified: b.Modified}
}

// buildLedgerd builds the working directory's ./cmd/ledgerd into bin and
// says which code that is. The served phases run that ledgerd; the
// in-process phases and the load generator run this program's own code:
// a comparison of two builds of this program, run from one directory,
// serves the same ledgerd on both sides.
func buildLedgerd(ctx context.Context, w io.Writer, bin string) error {
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ledgerd").CombinedOutput(); err != nil {
		return fmt.Errorf("build ledgerd: %v: %s", err, out)
	}
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	tree, self := treeRevision(ctx, dir), ownRevision()
	fmt.Fprintf(w, "ledgerd built from %s (%s); this benchmark's own code, which runs the in-process phases and the load generator: %s\n", dir, tree, self)
	if tree.differs(self) {
		fmt.Fprintf(w, "note: the served ledgerd and this benchmark's in-process phases run different code (%s against %s)\n", tree, self)
	}
	return nil
}
