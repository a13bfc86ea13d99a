package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials/insecure"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger/proof"
)

// The recommended layout, the evidence directory outside the data
// directory, and ledger.db alone restored from a backup older than a
// checkpoint an auditor kept. The ledger signs no checkpoint of the
// restored log and answers UNAVAILABLE, reason LOG_DIVERGED. `log audit
// --from KEPT` is a failed check (exit 1): it says what the ledger says of
// the divergence and that, as far as it can tell, the ledger's log is not
// an extension of the kept checkpoint; it does not say ledgerd is
// unreachable. `log checkpoint` and `proof` say the log diverged and that
// no retry brings an answer (exit 6, not 5).
func TestLogAuditFromAKeptCheckpointAfterARowStoreRestore(t *testing.T) {
	evdir := filepath.Join(t.TempDir(), "evidence")
	f := startWith(t, insecure.NewCredentials(), func(c *config.Config) {
		c.Evidence.Dir = evdir
		c.MerkleLog.Interval = config.Duration(20 * time.Millisecond)
	})
	key := f.verifierKey(t)
	f.logged(t, f.rowID)
	f.stop()
	db := filepath.Join(f.cfg.DataDir, "ledger.db")
	backup, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}

	f.serve(t)
	lost := f.append(t, pacttest.Spec{User: "acct-9", Target: "LOST-9"})
	f.logged(t, lost)
	kept := filepath.Join(t.TempDir(), "kept.checkpoint")
	if code, out, errs := f.ctl(t, "nobody", "log", "checkpoint", "--save", kept); code != 0 {
		t.Fatalf("log checkpoint --save: %d %s %s", code, out, errs)
	}
	raw, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	keptCP, err := proof.Open(raw, key)
	if err != nil {
		t.Fatal(err)
	}
	// The evidence directory holds the kept checkpoint's leaves before
	// the restore.
	published := filepath.Join(evdir, "log", "checkpoint")
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, _ := os.ReadFile(published)
		if cp, err := proof.Open(raw, key); err == nil && cp.Size >= keptCP.Size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log of %d leaves was not published to %s within 30s", keptCP.Size, evdir)
		}
		if err := pause(t.Context(), 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	f.stop()
	if err := os.WriteFile(db, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	f.serve(t)

	// The restored ledger finds that its log diverged from the published
	// one before it signs anything.
	const diverged = "the log diverged from the one published to write-once storage"
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, _, errs := f.ctl(t, "nobody", "log", "checkpoint")
		if strings.Contains(errs, diverged) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log checkpoint after the restore did not report the divergence within 30s: %s", errs)
		}
		if err := pause(t.Context(), 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}

	code, out, errs := f.ctl(t, "auditor", "log", "audit", "--from", kept, "--log-key", key)
	if code != exitCheckFailed || strings.Contains(out+errs, "cannot reach") || strings.Contains(out+errs, "Is it running?") {
		t.Fatalf("log audit --from KEPT after the restore: exit %d, want %d (a failed check)\nstdout:\n%s\nstderr:\n%s", code, exitCheckFailed, out, errs)
	}
	for _, want := range []string{"FAILED: ", diverged, "kept checkpoint: localhost/pactledger size " + itoa(keptCP.Size), "verified with the key you gave",
		"as far as this audit can tell, the ledger's log is not an extension of the kept checkpoint", "ledgerctl fsck"} {
		if !strings.Contains(out, want) {
			t.Errorf("log audit --from KEPT after the restore does not say %q:\n%s", want, out)
		}
	}
	code, out, _ = f.ctl(t, "auditor", "log", "audit", "--from", kept)
	if code != exitCheckFailed || !strings.Contains(out, "not checked") || !strings.Contains(out, "--log-key") {
		t.Errorf("log audit --from KEPT without --log-key after the restore: exit %d\n%s", code, out)
	}

	for _, args := range [][]string{{"log", "checkpoint"}, {"proof", lost, "--wait", "0s"}} {
		code, out, errs := f.ctl(t, "auditor", args...)
		if code != exitError || strings.Contains(errs, "cannot reach") || !strings.Contains(errs, diverged) || !strings.Contains(errs, "no retry") {
			t.Errorf("%s after the restore: exit %d, want %d, saying the log diverged and no retry helps\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, exitError, out, errs)
		}
	}
}
