package ledger_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/pactledger/pactledger/internal/pacttest"
	"github.com/pactledger/pactledger/internal/s3test"
	"github.com/pactledger/pactledger/ledger"
)

// A newer version written over a row's locked segment, as whoever holds
// the bucket's credentials can, changes nothing the ledger reads: the
// write-once copy, the row's verification and its integrity check read
// the version the ledger recorded. The integrity check reports what
// stands over it, a newer version or a delete marker, since a reader of
// the bucket by key gets that instead.
func TestReadsTakeTheRecordedVersion(t *testing.T) {
	ctx := context.Background()
	name := s3test.Bucket()
	h := s3Harness(t, name)
	row, _ := h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5531"})))
	h.append(t, in(h.sc.Mint(pacttest.Spec{Target: "A-5532"})))
	h.drain(t)
	orig := writeOnce(t, h, row.ID)
	var loc ledger.Location
	if err := h.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		loc, err = tx.Object(ledger.EvidenceKey(row.ID))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if loc.VersionID == "" || loc.Length == 0 {
		t.Fatalf("the row's evidence is at %+v, want a version of a segment", loc)
	}
	c := rawS3(t)
	obj, err := c.GetObject(ctx, name, loc.Key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seg, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(seg, []byte("A-5531"), []byte("A-5539"), 1)
	info, err := c.PutObject(ctx, name, loc.Key, bytes.NewReader(edited), int64(len(edited)), minio.PutObjectOptions{})
	if err != nil || info.VersionID == loc.VersionID {
		t.Fatalf("a newer version over the segment: %+v %v", info, err)
	}
	if got := writeOnce(t, h, row.ID); !bytes.Equal(got, orig) {
		t.Fatal("the write-once copy read the newer version, not the one recorded")
	}
	rv, err := h.l.VerifyRow(ctx, row.ID)
	if err != nil || !rv.Same {
		t.Fatalf("verify after a newer version: %+v %v", rv, err)
	}
	// What stands over the recorded version is what a reader of the
	// bucket by key gets: the check reports it for the segment's rows.
	shadowedFor(t, h, row.ID, loc.Key, "a newer version ("+info.VersionID+")")
	if err := c.RemoveObject(ctx, name, loc.Key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if rv, err := h.l.VerifyRow(ctx, row.ID); err != nil || !rv.Same {
		t.Fatalf("verify after a delete marker: %+v %v", rv, err)
	}
	shadowedFor(t, h, row.ID, loc.Key, "a delete marker")
}

// shadowedFor checks the integrity check's findings: one for row id,
// and every one of them that what stands over key is not the copy
// recorded (want), with nothing to restore.
func shadowedFor(t *testing.T, h *harness, id, key, want string) {
	t.Helper()
	rep, err := h.l.CheckIntegrity(context.Background(), 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	var ofRow bool
	for _, f := range rep.Findings {
		ofRow = ofRow || f.RowID == id
		if !strings.Contains(f.Problem, want) || !strings.Contains(f.Problem, key) || f.Restorable {
			t.Errorf("finding %+v, want %q over %s, not restorable", f, want, key)
		}
	}
	if !ofRow {
		t.Fatalf("no finding for row %s: %+v", id, rep.Findings)
	}
}
