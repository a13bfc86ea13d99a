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
	"github.com/pactledger/pactledger/internal/server"
	"github.com/pactledger/pactledger/ledger/proof"
)

// TestFsckAfterARestoreToAnOlderFile: the bbolt file is restored from a
// copy older than the log published to the evidence directory. fsck (the
// integrity check) no longer passes: it names the published checkpoint
// and the row store's, and each published leaf the row store's log lacks,
// with the row it names. The ledger signs no checkpoint of the restored
// log meanwhile: its log's endpoints answer that the log diverged.
func TestFsckAfterARestoreToAnOlderFile(t *testing.T) {
	sc := pacttest.NewScenario(jose.ES256, jose.ES256)
	t.Cleanup(sc.Close)
	e := &env{sc: sc, cfg: testConfig(sc, t.TempDir())}
	e.cfg.MerkleLog.Interval = config.Duration(20 * time.Millisecond)
	server.SetLogWaitingShown(t, 0)
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
	// The row store records a publication after the bucket holds it: a
	// publication of this tree that returns has recorded it, so the
	// backup taken next knows its 3 leaves were published.
	deadline := time.Now().Add(30 * time.Second)
	for err := e.srv.Ledger().PublishTiles(t.Context()); err != nil; err = e.srv.Ledger().PublishTiles(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatalf("publishing the log of 3 leaves: %v", err)
		}
	}
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
	// Rows are still recorded after the restore, but the ledger signs no
	// checkpoint the published one is not a prefix of, and its log's
	// endpoints say why rather than serve the restored log.
	after := write("AFTER-0")
	for i := 1; i < 3; i++ {
		write(fmt.Sprintf("AFTER-%d", i))
	}
	var ready struct {
		Status string
		Log    struct{ Status, Signing, Error, Waiting string }
	}
	deadline = time.Now().Add(30 * time.Second)
	for ready.Log.Status != "diverged" || ready.Log.Waiting == "" {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not report the divergence within 30s: %+v", ready)
		}
		time.Sleep(10 * time.Millisecond)
		if code := e.call(t, "GET", "/readyz", "", nil, &ready); code != 200 {
			t.Fatalf("/readyz = %d after the restore: a write is still acknowledged durably", code)
		}
	}
	if ready.Status != "ready" || ready.Log.Signing != "stopped" || !strings.Contains(ready.Log.Error, "this ledger stopped signing checkpoints") {
		t.Errorf("/readyz after the restore: %+v", ready)
	}
	if !strings.Contains(ready.Log.Waiting, "leaves have waited in the log's queue since") {
		t.Errorf("/readyz after the restore says of the leaves waiting: %q", ready.Log.Waiting)
	}
	const diverged = "the log diverged from the one published to write-once storage"
	for _, path := range []string{"/v1/log/checkpoint", "/v1/log/checkpoint.json", "/v1/log/tile/0/000.p/4", "/v1/log/tile/entries/000.p/6"} {
		if code, body := e.get(t, path); code != 503 || !strings.Contains(string(body), diverged) || !strings.Contains(string(body), "an operator must restore the row store's newest backup") {
			t.Errorf("GET %s after the restore = %d %s; want 503 saying the log diverged", path, code, body)
		}
	}
	if code, body := e.get(t, "/v1/log/tile/0/000.p/3"); code != 200 || len(body) != 3*32 {
		t.Errorf("GET the tile of the 3 leaves published before the backup = %d (%d bytes)", code, len(body))
	}
	var perr struct{ Message string }
	if code := e.call(t, "GET", "/v1/rows/"+after+"/proof", "auditor", nil, &perr); code != 503 || !strings.Contains(perr.Message, diverged) {
		t.Errorf("the proof of a row recorded after the restore = %d %+v; want 503 saying the log diverged", code, perr)
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
	if !strings.Contains(text, fmt.Sprintf("published checkpoint has %d leaves", size)) || !strings.Contains(text, "latest checkpoint 3 leaves") ||
		!strings.Contains(text, "share their first 3 leaves; the 3 published leaves after them are missing") {
		t.Fatalf("after a restore to a file older than the published log (%d leaves), the integrity check found:\n%s", size, text)
	}
	for _, id := range lost {
		if !strings.Contains(text, "row "+id) {
			t.Errorf("the findings do not name row %s, published and lost in the restore:\n%s", id, text)
		}
	}
}
