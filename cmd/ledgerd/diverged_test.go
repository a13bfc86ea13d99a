package main

import (
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
)

// httpAddr reads the HTTP address serve wrote into cfgFile.
func httpAddr(t *testing.T, cfgFile string) string {
	t.Helper()
	b, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), `http: "`)
	addr, _, _ := strings.Cut(rest, `"`)
	return "http://" + addr
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A ledgerd whose evidence directory holds another log's checkpoint (here
// one of another origin, as a second ledger given the same bucket would
// leave, or anyone with write access to it could) publishes nothing of
// its own log there, and says so where an operator looks: /readyz stays
// 200 (rows are still recorded, and the log signed and served) with the
// log's status "not published" and why, and
// pactledger_log_foreign_objects_total counts the checkpoint.
func TestAnotherLogInTheEvidenceDirectoryIsReported(t *testing.T) {
	evidence := t.TempDir()
	other := "other.example/log\n12\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n\n— other.example/log AAAA\n"
	if err := os.MkdirAll(filepath.Join(evidence, "log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(evidence, "log", "checkpoint"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	var dataDir string
	base := httpAddr(t, serve(t, func(c *config.Config) {
		c.Evidence.Dir = evidence
		c.MerkleLog.Interval = config.Duration(20 * time.Millisecond)
		dataDir = c.DataDir
	}))
	auditor := roleKey(t, dataDir, config.RoleAuditor)

	var ready struct {
		Status string `json:"status"`
		Log    struct {
			Status, Error, Since string
		} `json:"log"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for ready.Log.Status != "not published" && time.Now().Before(deadline) {
		call(t, "GET", base+"/readyz", auditor, nil, &ready)
	}
	if ready.Status != "ready" || ready.Log.Status != "not published" || ready.Log.Since == "" ||
		!strings.Contains(ready.Log.Error, `the bucket's log/checkpoint (of the log "other.example/log", 12 leaves) is signed by no key (its signature cannot be read), not by this ledger's log key localhost/pactledger+`) {
		t.Fatalf("/readyz with another log in the bucket: %+v", ready)
	}
	m := fetch(t, base+"/metrics")
	if !strings.Contains(m, "\npactledger_log_foreign_objects_total 1\n") || !strings.Contains(m, "\npactledger_log_diverged 0\n") {
		t.Errorf("/metrics with another log in the bucket: want pactledger_log_foreign_objects_total 1 and pactledger_log_diverged 0")
	}
	if b, _ := os.ReadFile(filepath.Join(evidence, "log", "checkpoint")); string(b) != other {
		t.Errorf("the bucket's checkpoint was replaced: %q", b)
	}
}
