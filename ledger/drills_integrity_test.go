package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// saveDrill stores a failed drill report and uploads it; it returns the
// report's id and body.
func saveDrill(t *testing.T, h *harness) (string, []byte) {
	t.Helper()
	id := ledger.NewDrillID(h.clock())
	body := fmt.Appendf(nil, `{"id":%q,"passed":false,"failures":["dispute: needed a person"]}`, id)
	if err := h.l.SaveDrill(context.Background(), id, h.clock(), body); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	if got := integrity(t, h); len(got.Findings) != 0 {
		t.Fatalf("clean ledger:\n%s", problems(got))
	}
	return id, body
}

// passed is a drill report rewritten to pass.
func passed(body []byte) []byte {
	return bytes.Replace(body, []byte(`"passed":false,"failures":["dispute: needed a person"]`), []byte(`"passed":true,"failures":[]`), 1)
}

// drillFindings runs fsck and checks that a finding names the report.
func drillFindings(t *testing.T, h *harness, id, want string) {
	t.Helper()
	p := problems(integrity(t, h))
	if !strings.Contains(p, "drill report "+id) || !strings.Contains(p, want) {
		t.Fatalf("findings:\n%s\nwant one on drill report %s with %q", p, id, want)
	}
}

// Whoever holds the row store and the bucket's credentials puts a newer
// version over a failed drill report's key (Object Lock keeps versions,
// not keys), rewrites the report in the row store to pass and records
// the newer version as its copy: the row store's report and the version
// it names agree. The ledger puts a report once, create-only, so the
// copy is the key's first version: fsck compares with that.
func TestIntegrityFindsADrillReportRecordedAtALaterVersion(t *testing.T) {
	ctx := context.Background()
	name := s3test.Bucket()
	h := s3Harness(t, name)
	id, body := saveDrill(t, h)
	edited := passed(body)
	info, err := rawS3(t).PutObject(ctx, name, ledger.DrillKey(id), bytes.NewReader(edited), int64(len(edited)), minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = h.store.Update(ctx, func(tx ledger.Tx) error {
		loc, err := tx.Object(ledger.DrillKey(id))
		if err != nil {
			return err
		}
		if loc.VersionID == "" || loc.VersionID == info.VersionID {
			return fmt.Errorf("recorded version %q, newer %q", loc.VersionID, info.VersionID)
		}
		loc.VersionID = info.VersionID
		if err := tx.SetObject(ledger.DrillKey(id), loc); err != nil {
			return err
		}
		return tx.PutDrill(id, edited)
	})
	if err != nil {
		t.Fatal(err)
	}
	drillFindings(t, h, id, "the first version")
}

// The same operator, without the bucket, forgets where the report's copy
// is: the report then looks not uploaded yet, and is not compared. A
// report with no copy recorded and none queued for upload is compared
// with what the store holds under its key.
func TestIntegrityFindsADrillReportWhoseCopyWasForgotten(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	id, body := saveDrill(t, h)
	err := h.store.Update(ctx, func(tx ledger.Tx) error {
		if err := tx.DeleteObject(ledger.DrillKey(id)); err != nil {
			return err
		}
		return tx.PutDrill(id, passed(body))
	})
	if err != nil {
		t.Fatal(err)
	}
	drillFindings(t, h, id, "differs from its write-once copy")
}
