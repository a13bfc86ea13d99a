package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger/proof"
)

// TestFsckAfterARestoreToAnOlderFile: the bbolt file is restored from a
// copy older than the log published to the evidence directory. fsck (the
// integrity check) no longer passes: it names the published checkpoint
// and the row store's, and each published leaf the row store's log lacks,
// with the row it names.
func TestFsckAfterARestoreToAnOlderFile(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	e := &env{sc: sc, cfg: testConfig(sc, t.TempDir())}
	e.cfg.MerkleLog.Interval = config.Duration(20 * time.Millisecond)
	e.start(t)
	write := func(target string) string {
		var rep appendReply
		if code := e.call(t, "POST", "/v1/receipts", "writer", post(e.sc.Mint(pacttest.Spec{Target: target})), &rep); code != 200 {
			t.Fatalf("append %s = %d", target, code)
		}
		return rep.Row.ID
	}
	published := filepath.Join(e.cfg.DataDir, "evidence", "log", "checkpoint")
	// waitPublished waits until the evidence directory's latest checkpoint
	// holds every leaf of the rows written.
	waitPublished := func(rows int) int64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var cp struct{ Size string }
			if e.call(t, "GET", "/v1/log/checkpoint.json", "", nil, &cp) == 200 && cp.Size != "" {
				if raw, err := os.ReadFile(published); err == nil {
					if c, err := proof.ParseCheckpoint(string(raw[:strings.Index(string(raw), "\n\n")+1])); err == nil && fmt.Sprint(c.Size) == cp.Size && c.Size >= int64(rows) {
						return c.Size
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the log of %d rows not published within 30s", rows)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	write("KEPT-1")
	write("KEPT-2")
	waitPublished(3) // the policy leaf and two rows
	e.stop()
	db := filepath.Join(e.cfg.DataDir, "ledger.db")
	backup, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}

	e.start(t)
	lost := []string{write("LOST-1"), write("LOST-2")}
	size := waitPublished(6) // a second start's policy leaf, two rows more
	e.stop()
	if err := os.WriteFile(db, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	// The restored log grows past the published one with other leaves.
	for i := range 3 {
		write(fmt.Sprintf("AFTER-%d", i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var cp struct{ Size string }
		if e.call(t, "GET", "/v1/log/checkpoint.json", "", nil, &cp) == 200 && cp.Size == "7" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored log did not reach 7 leaves within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	var ic struct {
		RowsChecked int
		Findings    []struct{ RowID, Problem string }
	}
	if code := e.call(t, "POST", "/v1/integrity:check", "auditor", map[string]any{}, &ic); code != 200 {
		t.Fatalf("integrity = %d", code)
	}
	var all []string
	for _, f := range ic.Findings {
		all = append(all, f.RowID+": "+f.Problem)
	}
	text := strings.Join(all, "\n")
	t.Logf("findings after the restore:\n%s", text)
	if !strings.Contains(text, fmt.Sprintf("published checkpoint has %d leaves", size)) || !strings.Contains(text, "latest checkpoint 7 leaves") ||
		!strings.Contains(text, "share their first 3 leaves; the 3 published leaves after them are missing") {
		t.Fatalf("after a restore to a file older than the published log (%d leaves), the integrity check found:\n%s", size, text)
	}
	for _, id := range lost {
		if !strings.Contains(text, "row "+id) {
			t.Errorf("the findings do not name row %s, published and lost in the restore:\n%s", id, text)
		}
	}
}
