package console_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pactledger/pactledger/internal/config"
	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/ledger"
)

// The evidence download of a row whose stored bundle was changed after it
// was written (a byte flipped in its segment file, before ledgerd started,
// so that it reads the copy) is not handed out as a file: the console shows
// a warning with both hashes and what to do, and offers the bundle for a
// look into it only as a second, explicit step. An intact row's downloads.
func TestEvidenceDownloadWarnsWhenTheBundleDiffers(t *testing.T) {
	var edited, intact *ledger.Row
	e := newEnv(t, func(e *env) {
		at := time.Now().UTC().Add(-time.Hour)
		edited = e.recordBefore(t, at, e.sc.Mint(pacttest.Spec{Target: "T-1234", At: at}))
		intact = e.recordBefore(t, at, e.sc.Mint(pacttest.Spec{Target: "U-1234", At: at}))
		n := 0
		err := filepath.WalkDir(filepath.Join(e.cfg.DataDir, "evidence"), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil || !bytes.Contains(b, []byte("T-1234")) {
				return err
			}
			_ = os.Chmod(filepath.Dir(p), 0o700)
			_ = os.Chmod(p, 0o600)
			n++
			return os.WriteFile(p, bytes.ReplaceAll(b, []byte("T-1234"), []byte("T-1235")), 0o400)
		})
		if err != nil || n == 0 {
			t.Fatalf("editing the segment: %d files, %v", n, err)
		}
	})
	c := e.newWebClient(t)
	c.signIn(t, config.RoleSupport)

	if code, body := c.get(t, "/console/rows/"+intact.ID+"/evidence"); code != 200 || !strings.Contains(body, `"receiptJws"`) {
		t.Fatalf("intact evidence download = %d:\n%s", code, body)
	}
	path := "/console/rows/" + edited.ID + "/evidence"
	code, body := c.get(t, path)
	if code != 409 || strings.Contains(body, `"receiptJws"`) || !strings.Contains(body, edited.EvidenceSHA256) || !strings.Contains(body, "fsck") ||
		!strings.Contains(body, path+"?anyway=1") {
		t.Fatalf("evidence download of a changed bundle = %d, want 409 with a warning naming %s:\n%s", code, edited.EvidenceSHA256, body)
	}
	if code, body := c.get(t, path+"?anyway=1"); code != 200 || !strings.Contains(body, `"rowEvidenceSha256"`) || !strings.Contains(body, edited.EvidenceSHA256) || !strings.Contains(body, "T-1235") {
		t.Fatalf("evidence download, anyway = %d:\n%s", code, body)
	}
}
